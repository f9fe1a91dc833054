from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Node 0 of a multi-node run serves the rendezvous on the port of `--master` (on every interface), so "
    "that port must be free there; a port another process holds would make the launcher talk to that "
    "process and wait forever. Node 0 tries the port before it starts anything.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 0",
        note="while another process listens on port 8090",
        setting="port 8090 in use",
        paddle=True,
    ),
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8091 --node-rank 0",
        note="and the same with --node-rank 1 on the other node",
        paddle=True,
    ),
)
