"""A user model following the README contract: inputs from ctx.data, layers on ctx.stage, a make_batch."""

import numpy as np

HIDDEN, SEQ = 8, 4


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [SEQ, HIDDEN])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            w = paddle.static.create_parameter([HIDDEN, HIDDEN], "float32", name=f"user.w{s}")
            h = paddle.tanh(paddle.matmul(h, w))
    with ctx.stage(ctx.num_stages - 1):
        y = ctx.data("y", [SEQ, HIDDEN])
        return paddle.mean((h - y) ** 2)


def make_batch(step, batch_size, seed):
    rng = np.random.default_rng([seed, step])
    x = rng.standard_normal((batch_size, SEQ, HIDDEN)).astype("float32")
    return {"x": x, "y": np.sin(x)}
