from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

TRACE = "ppdsl trace 1f1b --pp 2 -m 2 -o profile.json"

EXPLANATION = Explanation(
    "A profile (`ppdsl calibrate`, `ppdsl plot --measured`) must be a Chrome trace whose compute events "
    "(ph `X`) name a job `type` in their args, as `ppdsl trace` and `ppdsl run --profile` write them.",
    cmd("ppdsl calibrate profile.json -o costs.json", files=(("profile.json", '{"traceEvents": []}\n'),)),
    cmd(TRACE, "ppdsl calibrate profile.json -o costs.json"),
)
