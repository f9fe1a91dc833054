from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

STACK = (
    "stack.py",
    '''"""An nn.Layer stack placed on the stages by ctx.pipeline."""

from paddle import nn

BLOCKS = 1


class Head(nn.Layer):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(8, 8)

    def forward(self, x):
        return self.out(x).mean()


def build(ctx):
    with ctx.layers():
        embedding, blocks, head = nn.Linear(8, 8), [nn.Linear(8, 8) for _ in range(BLOCKS)], Head()
    x = ctx.data("x", [4, 8])
    return ctx.pipeline(embedding, blocks, head, inputs=[x])
''',
)

EXPLANATION = Explanation(
    "`ctx.pipeline` places an `nn.Layer` stack on the stages: the embedding on the first, the head on the "
    'last, the blocks between by `split` ("uniform", "params", or the blocks where stages start). It '
    "refuses a split that leaves a stage without a layer, and cut points that are not ascending block indices. "
    "A trainable weight used on two stages (tied embeddings) trains with one process per rank, where the "
    "schedule's `sync_shared` keeps the stages' copies in step (E095); one process refuses it.",
    cmd(
        "ppdsl run 1f1b --pp 4 -m 4 --batch-size 4 --steps 1 --model stack:build",
        files=(STACK,),
        note="one block for four stages: stages 1 and 2 hold nothing",
        paddle=True,
    ),
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --batch-size 4 --steps 1 --model stack:build",
        files=(STACK,),
        paddle=True,
    ),
)
