"""Texts several codes' examples share: a GPipe order and a small model placed by hand."""

from __future__ import annotations

GPIPE = "order { forward * microbatches  backward * microbatches  optimizer }"
MODEL = (
    "mymodel.py",
    '''"""A two-layer model per stage (see the README's `--model` contract)."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [8, 16])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            w = paddle.static.create_parameter([16, 16], "float32", name=f"w{s}")
            h = paddle.tanh(paddle.matmul(h, w))
    with ctx.stage(ctx.num_stages - 1):
        return paddle.mean(h * h)
''',
)
