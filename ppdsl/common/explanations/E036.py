from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Paddle's executor splits each step's batch into `microbatches` equal parts along its first dimension, so "
    "the batch size must be a multiple of the number of micro-batches.",
    cmd("ppdsl run 1f1b --pp 4 -m 8 --batch-size 30"),
    cmd("ppdsl run 1f1b --pp 4 -m 8 --batch-size 32", paddle=True),
)
