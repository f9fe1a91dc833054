# args: run 1f1b --pp 2 -m 2 --steps 1 --model model_wrong_shape:build
"""A weight whose shape does not match its input."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [4])
        w = paddle.static.create_parameter([5, 3], "float32", name="w0")
        h = paddle.matmul(x, w)
    with ctx.stage(1):
        return paddle.mean(h**2)
