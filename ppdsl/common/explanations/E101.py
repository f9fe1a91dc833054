from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Every time and memory amount of a layer profile is a finite number from 0 to 1e15: a negative time would "
    "make a stage faster for holding more, and JSON has no NaN (ppdsl refuses it where a reader would accept it).",
    cmd(
        "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
        files=(
            (
                "model.json",
                '{"pattern": "TT", "forward_ms": {"T": -1.0}, "backward_ms": {"T": 2.0}, "weight_ms": {"T": 1.0}}\n',
            ),
        ),
    ),
    cmd(
        "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
        files=(
            (
                "model.json",
                '{"pattern": "TT", "forward_ms": {"T": 1.0}, "backward_ms": {"T": 2.0}, "weight_ms": {"T": 1.0}}\n',
            ),
        ),
    ),
)
