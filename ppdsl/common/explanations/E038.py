from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A multi-process run starts one process per pipeline rank: `--nproc-per-node` times `--nnodes` must equal "
    "`--pp`; several nodes need `--master HOST:PORT`, and `--node-rank` must be one of the nodes.",
    cmd("ppdsl run 1f1b --pp 4 -m 8 --nproc-per-node 2 --dry-run"),
    cmd("ppdsl run 1f1b --pp 4 -m 8 --nproc-per-node 4 --dry-run"),
)
