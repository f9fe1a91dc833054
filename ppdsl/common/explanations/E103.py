from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A partition says how many of the model's layers each virtual stage holds, in stage order: `9,10,9,6` (on the "
    "command line) or `partition = [9, 10, 9, 6]` (in a file). It may also be a Megatron-LM layout string, as "
    '`--pipeline-model-parallel-layout` takes it: `"Et*8|t*9|t*8|t*7L"`, `E` the embedding, `t` a transformer '
    "block, `L` the loss and head, `|` between stages, `x*n` and `(...)*n` repeats. Anything else is refused, "
    "and so is Megatron's `m` (a multi-token prediction layer), which a layer profile does not describe.",
    cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 3;3;3;3"),
    cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 3,3,3,3"),
)
