from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`--master HOST:PORT` is the rendezvous address every node of a multi-node run meets at: a host name or "
    "IPv4 address, a colon, and a TCP port from 1 to 65535. It is checked before any process starts, for "
    "Paddle's launcher would only write its error to the run directory's `launch.log`.",
    cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 10.0.0.1:99999 --dry-run"),
    cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 10.0.0.1:8090 --dry-run"),
)
