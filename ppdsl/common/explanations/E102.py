from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "In a profile's compact form each letter of `pattern` is one layer, and its times are looked up by that "
    "letter in `forward_ms`, `backward_ms` and `weight_ms`. A letter none of them gives would be a layer of "
    "unknown cost: the diagnostic points at it in the pattern.",
    cmd(
        "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
        files=(
            (
                "model.json",
                '{"pattern": "ETTL", "forward_ms": {"E": 2, "T": 1}, "backward_ms": {"E": 1, "T": 2}, '
                '"weight_ms": {"E": 0, "T": 1}}\n',
            ),
        ),
        note="`L` (the head) has no times",
    ),
    cmd(
        "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
        files=(
            (
                "model.json",
                '{"pattern": "ETTL", "forward_ms": {"E": 2, "T": 1, "L": 3}, '
                '"backward_ms": {"E": 1, "T": 2, "L": 2}, '
                '"weight_ms": {"E": 0, "T": 1, "L": 0}}\n',
            ),
        ),
    ),
)
