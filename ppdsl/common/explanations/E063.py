from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A run holds a lock on its `--save-dir` (`flock` on `.ppdsl.lock` in it) while it trains, so two runs never "
    "write one directory's checkpoints and a later `--resume` never continues a mix of both. The lock ends with "
    "the process that holds it, also when it is killed.",
    cmd(
        "ppdsl run 1f1b --steps 1000 --save-dir ckpt",
        "ppdsl run 1f1b --steps 10 --save-dir ckpt",
        note="the second command is typed in another terminal while the first still trains",
        paddle=True,
    ),
    cmd(
        "ppdsl run 1f1b --steps 1000 --save-dir ckpt",
        "ppdsl run 1f1b --steps 10 --save-dir other",
        note="the second command is typed in another terminal while the first still trains",
        paddle=True,
    ),
)
