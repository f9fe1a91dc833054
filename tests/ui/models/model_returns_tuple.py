# args: run 1f1b --pp 2 -m 2 --steps 1 --model model_returns_tuple:build
"""The loss returned together with the activations."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [4])
        h = paddle.tanh(x)
    with ctx.stage(1):
        return paddle.mean(h**2), h
