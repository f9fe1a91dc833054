from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A partition has one entry per virtual stage (pp x vpp of them, in stage order), places every layer of the "
    "profile (the embedding and the head are layers too), and, written as a Megatron layout, names each layer's "
    "kind as the profile has it. `ppdsl run` also wants the model's own layer count (the embedding, its blocks and "
    "the head) and a model built with `ctx.pipeline`: one that places its ops by hand cannot be moved. A partition "
    "that does not fit is refused rather than padded or cut.",
    cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 4,4,4"),
    cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 4,4,4,4"),
)
