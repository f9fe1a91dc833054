from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

ELEMENTWISE = (
    "mymodel.py",
    '''"""A model with no matmul: nothing to put in backward_w."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [2, 4])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            scale = paddle.static.create_parameter([4], "float32", name=f"scale{s}")
            h = paddle.tanh(h * scale)
    with ctx.stage(ctx.num_stages - 1):
        return paddle.mean(h * h)
''',
)

EXPLANATION = Explanation(
    "A schedule with `backward_b` / `backward_w` splits each backward into the input gradient and the weight "
    "gradient. ppdsl splits matmul weight gradients on 3-D `[micro-batch, sequence, hidden]` inputs; a model "
    "with none has nothing to put in `backward_w`. Use a schedule with whole backwards for it.",
    cmd(
        "ppdsl run zbh1 --pp 2 -m 2 --steps 1 --model mymodel:build",
        files=(ELEMENTWISE,),
        note="with a model that has no matmul",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --pp 2 -m 2 --steps 1 --model mymodel:build", files=(ELEMENTWISE,), paddle=True),
)
