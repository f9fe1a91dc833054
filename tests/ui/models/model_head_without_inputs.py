# args: run 1f1b --pp 2 -m 2 --steps 1 --model model_head_without_inputs:build
"""An nn.Layer stack whose head needs the labels, placed without `head_inputs`."""


def build(ctx):
    from paddle import nn

    class Head(nn.Layer):
        def __init__(self):
            super().__init__()
            self.out = nn.Linear(8, 8)

        def forward(self, x, labels):
            return ((self.out(x) - labels) ** 2).mean()

    with ctx.layers():
        embedding, blocks, head = nn.Linear(8, 8), [nn.Linear(8, 8), nn.Linear(8, 8)], Head()
    x = ctx.data("x", [8])
    ctx.data("labels", [8])
    return ctx.pipeline(embedding, blocks, head, inputs=[x])
