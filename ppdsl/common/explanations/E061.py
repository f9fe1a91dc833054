from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A checkpoint is read without trusting it: only a regular file (not a FIFO, device or directory), an "
    "uncompressed `.npz` archive whose members all pass their CRC check, numeric arrays whose headers match "
    "their bytes, and a `__meta__` JSON object with a whole-number step. Anything else was not written whole by "
    "ppdsl (a copy cut short, a disk error, another program's file) and is refused, naming the file.",
    cmd(
        "ppdsl run 1f1b --steps 2 --save-dir ckpt",
        "truncate -s 100 ckpt/checkpoint.npz",
        "ppdsl run 1f1b --steps 4 --resume ckpt",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --steps 2 --save-dir ckpt", "ppdsl run 1f1b --steps 4 --resume ckpt", paddle=True),
)
