"""A model with no matmul: its backward cannot be split into backward_b and backward_w."""

HIDDEN = 4


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [2, HIDDEN])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            scale = paddle.static.create_parameter([HIDDEN], "float32", name=f"ew.scale{s}")
            h = paddle.tanh(h * scale)
    with ctx.stage(ctx.num_stages - 1):
        return paddle.mean(h * h)
