from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import MODEL

EXPLANATION = Explanation(
    "`ppdsl run --model module:function` calls the function once, with the model context (`ctx`: sizes, "
    "`ctx.data`, `ctx.stage`, `ctx.layers`, `ctx.pipeline`), inside the program it builds; it must take that "
    "one argument and return the loss.",
    cmd(
        "ppdsl run 1f1b --steps 1 --model nomodel:build",
        files=(("nomodel.py", "def build():\n    pass\n"),),
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
)
