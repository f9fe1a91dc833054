"""tests/models/user_mlp.py with a dropout on every stage that draws its mask from Paddle's generator (no fixed
seed, no seed tensor): what a recompute must replay (ppdsl/runtime/recompute.py)."""

from tests.models.user_mlp import HIDDEN, SEQ, make_batch  # noqa: F401  (the model's batches)

DROP = 0.3


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [SEQ, HIDDEN])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            w = paddle.static.create_parameter([HIDDEN, HIDDEN], "float32", name=f"drop.w{s}")
            h = paddle.tanh(paddle.matmul(h, w))
            # fix_seed false and no seed tensor: each call draws a new mask from the generator
            h = paddle._C_ops.dropout(h, None, DROP, False, "upscale_in_train", 0, False)
    with ctx.stage(ctx.num_stages - 1):
        y = ctx.data("y", [SEQ, HIDDEN])
        return paddle.mean((h - y) ** 2)
