from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Recompute, offload and reload jobs are placed by synth only when `--memory-actions` lets the search choose "
    "them; without it the costs of those jobs would time nothing, which is more likely a forgotten option than "
    "an intent. (A cost file's memory-action costs are left out instead: it may be calibrated on a run with them.)",
    cmd("ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --cost offload=0.25,reload=0.25 --time-limit 1 -o found.sched"),
    cmd(
        "ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions offload --cost offload=0.25,reload=0.25 "
        "--time-limit 1 -o found.sched"
    ),
)
