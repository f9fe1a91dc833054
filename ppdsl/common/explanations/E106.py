from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl expand FILE --format megatron-layout` writes the schedule's partition as Megatron-LM's "
    "`--pipeline-model-parallel-layout`. It needs a partition (`--partition`, `--layers`, or the file's "
    "`partition`), a looped placement (Megatron puts virtual stage v * pp + r on rank r: a V-shaped placement "
    "cannot be said), and a model of an embedding first, transformer blocks and a loss last, the layer kinds "
    "the layout names.",
    cmd("ppdsl expand 1f1b --pp 4 -m 8 --format megatron-layout"),
    cmd("ppdsl expand 1f1b --pp 4 -m 8 --partition 5,5,5,4 --format megatron-layout"),
)
