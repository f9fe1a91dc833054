from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Every rank of this node must be past the rendezvous (all nodes met, the process groups made) within "
    "`--rendezvous-timeout` seconds (default 60) of the launch; otherwise ppdsl stops the launcher and its "
    "ranks rather than wait forever. Usually a node was not started, or with another `--master` or "
    "`--nnodes`; on a very loaded machine Paddle itself may need longer to start.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 0 "
        "--rendezvous-timeout 5",
        note="no node 1 is ever started",
        paddle=True,
    ),
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 0",
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 1",
        note="the two commands at once, one on each node",
        paddle=True,
    ),
)
