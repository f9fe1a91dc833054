from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Before running anything, ppdsl counts the fewest jobs the sizes need (a forward and a backward for each "
    "rank, chunk and micro-batch, and an optimizer per rank), and refuses sizes over the limit, 8,388,608 jobs "
    "unless `--max-jobs` raises it; an order that runs more jobs than the limit is refused too. Time and memory "
    "grow with the jobs: the default covers pp=64, vpp=4, 4096 micro-batches.",
    cmd("ppdsl check 1f1b --pp 100000 -m 100000"),
    cmd("ppdsl check 1f1b --pp 64 -m 512"),
)
