from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import MODEL

EXPLANATION = Explanation(
    "The model function raised while it built the program: the message is the error and the line of the model's "
    "own code it came from (Paddle's shape checks raise here too: a weight that does not match its input, a "
    "layer called with the wrong inputs). `ctx.pipeline` calls `head(h, *head_inputs)`: a head that takes the "
    "labels needs `head_inputs=[labels]`.",
    cmd(
        "ppdsl run 1f1b --steps 1 --model badmodel:build",
        files=(("badmodel.py", MODEL[1].replace("[16, 16]", "[17, 16]")),),
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
)
