from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl synth --exact` models the schedule in CP-SAT, OR-Tools' constraint solver, and `--periodic` solves "
    "its repeated block there too; OR-Tools is an optional dependency (the `synth` extra; the `test` extra has "
    "it too). Without these options, synth searches without it, only less strongly.",
    cmd(
        "ppdsl synth --pp 2 -m 4 --exact -o found.sched",
        note="in an environment without OR-Tools",
        setting="OR-Tools not installed",
    ),
    cmd("pip install 'ppdsl[synth]'", "ppdsl synth --pp 2 -m 4 --exact -o found.sched", setting="network"),
)
