"""An nn.Layer stack placed by `ctx.pipeline`: an embedding, six residual MLP blocks of unequal width, a head.

Parameters: the embedding 16 * 8 = 128, a block of width w 17 * w + 8 (block 0: w = 32, 552; the rest: w = 4, 76),
the head 8 * 16 = 128. One `build_*` per way of splitting.
"""

import numpy as np

VOCAB, SEQ, HIDDEN = 16, 4, 8
WIDTHS = [32, 4, 4, 4, 4, 4]


def layers():
    import paddle
    from paddle import nn

    class Block(nn.Layer):
        def __init__(self, width):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(HIDDEN, width), nn.Linear(width, HIDDEN)

        def forward(self, x):
            return x + self.fc2(nn.functional.gelu(self.fc1(x)))

    class Head(nn.Layer):
        def __init__(self, tied=None):
            super().__init__()
            self.out = nn.Linear(HIDDEN, VOCAB, bias_attr=False)
            self.tied = tied

        def forward(self, x, labels):
            logits = self.out(x) if self.tied is None else paddle.matmul(x, self.tied.weight, transpose_y=True)
            return nn.functional.cross_entropy(logits, labels.unsqueeze(-1)).mean()

    return nn.Embedding(VOCAB, HIDDEN), [Block(w) for w in WIDTHS], Head


def _build(ctx, split, tied=False):
    with ctx.layers():
        embedding, blocks, head = layers()
        head = head(embedding if tied else None)
    tokens = ctx.data("tokens", [SEQ], "int64")
    labels = ctx.data("labels", [SEQ], "int64")
    return ctx.pipeline(embedding, blocks, head, inputs=[tokens], head_inputs=[labels], split=split)


def build_uniform(ctx):
    return _build(ctx, "uniform")


def build_params(ctx):
    return _build(ctx, "params")


def build_cuts(ctx):
    """Stages 1, 2, 3 start at blocks 1, 3, 5 (for four stages)."""
    return _build(ctx, [1, 3, 5])


def build_tied(ctx):
    """The head multiplies with the embedding's weight: one trainable weight on the first and the last stage."""
    return _build(ctx, "uniform", tied=True)


def build_bad_split(ctx):
    return _build(ctx, "by-magic")


def make_batch(step, batch_size, seed):
    rng = np.random.default_rng([seed, step])
    tokens = rng.integers(0, VOCAB, (batch_size, SEQ + 1))
    return {"tokens": tokens[:, :-1], "labels": (tokens[:, :-1] + 1) % VOCAB}
