from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A layer profile lists the model's layers in order, each with its forward, input-gradient backward "
    "(`backward_b`) and weight-gradient backward (`backward_w`) time, in one of two JSON forms: ppdsl's own, "
    '`{"layers": [{"name": "T", "forward": 1.7, "backward_b": 2.0, "backward_w": 1.1}, ...]}` (with optional '
    "`activation` and `params` per layer), or the compact form of public profile collections, a `pattern` of one "
    "letter per layer with per-letter `forward_ms`, `backward_ms` and `weight_ms` (and optional `activation` / "
    "`params`). A field missing, unknown or of the wrong kind is refused, located in the file, rather than read "
    "as zero.",
    cmd(
        "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
        files=(("model.json", '{"layers": [{"name": "T", "forward": 1}, {"name": "T", "forward": 1}]}\n'),),
        note="the layers give no backward times",
    ),
    cmd(
        "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
        files=(
            (
                "model.json",
                '{"layers": [{"name": "T", "forward": 1, "backward_b": 1, "backward_w": 1}, '
                '{"name": "T", "forward": 1, "backward_b": 1, "backward_w": 1}]}\n',
            ),
        ),
    ),
)
