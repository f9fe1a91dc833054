from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A cost file (`ppdsl calibrate`) gives times in seconds (or its `unit`), while an offload or reload nobody "
    "gave a cost takes the built-in 0.5, an abstract unit: half a second beside millisecond forwards, which would "
    "make offloading look useless. The copies' times must come from the same measurement or the command line.",
    cmd(
        "ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions offload --costs costs.json --time-limit 1 "
        "-o found.sched",
        files=(("costs.json", '{"unit": "s", "costs": {"forward": 0.001, "backward": 0.002}}\n'),),
    ),
    cmd(
        "ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions offload --costs costs.json "
        "--cost offload=0.0005,reload=0.0005 --time-limit 1 -o found.sched",
        files=(("costs.json", '{"unit": "s", "costs": {"forward": 0.001, "backward": 0.002}}\n'),),
    ),
)
