from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "In a multi-process run every rank writes its own checkpoint of each saved step, and `--resume` continues "
    "from the newest step every rank saved. When there is none (a run killed while its ranks were saving their "
    "first step), or a rank finds its file changed to another step when it starts, resuming would have the "
    "ranks train out of step, so it is refused, naming each rank's steps.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 2 --steps 2 --nproc-per-node 2 --save-dir ckpt",
        "rm ckpt/checkpoint.step2.rank1.npz",
        "ppdsl run 1f1b --pp 2 -m 2 --steps 4 --nproc-per-node 2 --resume ckpt",
        paddle=True,
    ),
    cmd(
        "ppdsl run 1f1b --pp 2 -m 2 --steps 2 --nproc-per-node 2 --save-dir ckpt --save-every 1",
        "rm ckpt/checkpoint.step2.rank1.npz",
        "ppdsl run 1f1b --pp 2 -m 2 --steps 4 --nproc-per-node 2 --resume ckpt",
        note="each rank keeps its two newest steps: the run continues from step 1",
        paddle=True,
    ),
)
