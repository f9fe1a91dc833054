from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl run --nproc-per-node` received SIGTERM, SIGINT (Ctrl-C) or SIGHUP. It stopped Paddle's launcher "
    "and every rank process of this node (SIGTERM, then SIGKILL after a few seconds), and says at which step. "
    "Had ppdsl itself been killed (SIGKILL), the ranks end as well: each process is tied to its parent's "
    "life. Checkpoints written so far (`--save-dir`) are whole; continue with `--resume`.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --steps 100000",
        note="stopped with Ctrl-C",
        setting="a signal sent while it runs",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --steps 100", paddle=True),
)
