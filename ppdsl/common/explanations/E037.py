from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`--resume DIR` continues from a checkpoint written by `--save-dir DIR`: `checkpoint.npz` (one process) or "
    "`checkpoint.step<N>.rank<r>.npz` (one per rank and saved step), of the same run: the same schedule text and "
    "sizes, model, batch size, `--lr`, `--optimizer` and `--seed`, for any of them changes what the next step "
    "computes. `--steps` is the total of the run, so a checkpoint past it is refused rather than doing nothing.",
    cmd("ppdsl run 1f1b --steps 2 --resume no_such_dir", paddle=True),
    cmd("ppdsl run 1f1b --steps 2 --save-dir ckpt", "ppdsl run 1f1b --steps 2 --resume ckpt", paddle=True),
)
