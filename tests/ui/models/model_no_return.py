# args: run 1f1b --pp 2 -m 2 --steps 1 --model model_no_return:build
"""The loss is computed, but `build` forgets to return it."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [4])
        h = paddle.tanh(x)
    with ctx.stage(1):
        paddle.mean(h**2)
