from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A command-line value cannot be used: sizes must be integers from 1 up, `--param` must name a parameter of "
    "the schedule (`name=value`), `--cost` a job type, and options that go together must be given together.",
    cmd("ppdsl check 1f1b --pp 0 -m 8"),
    cmd("ppdsl check 1f1b --pp 4 -m 8"),
)
