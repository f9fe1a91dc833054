from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`--memory-actions` lists what the search may do to a (stage, micro-batch)'s activations besides keeping "
    "them: `recompute` (keep the stage input, re-run the forward before the backward) and `offload` (copy them "
    "to host memory after the forward, back before the backward), comma-separated.",
    cmd("ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions swap -o found.sched"),
    cmd("ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions recompute --time-limit 1 -o found.sched"),
)
