from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import MODEL

EXPLANATION = Explanation(
    "The model function must return the loss of one micro-batch: one float number, a Value of the program "
    "(shape [] or [1], as `paddle.mean(...)` gives). None (a forgotten `return`), a tuple, or a loss per "
    "example are refused before anything trains.",
    cmd(
        "ppdsl run 1f1b --steps 1 --model badmodel:build",
        files=(("badmodel.py", MODEL[1].replace("return paddle.mean", "paddle.mean")),),
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
)
