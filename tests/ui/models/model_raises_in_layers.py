# args: run 1f1b --pp 2 -m 2 --steps 1 --model model_raises_in_layers:build
"""A model that asks for a stage the pipeline does not have: the error names this file's line, not that of the
`contextlib` frame between it and ppdsl."""


def build(ctx):
    import paddle

    x = ctx.data("x", [8])
    with ctx.stage(7):
        return paddle.mean(x)
