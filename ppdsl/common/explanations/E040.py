from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A rank of a multi-process run raised an error or the launcher stopped; the message is that rank's error "
    "(its file `rank<r>.error` and the launcher's logs in the launch's directory, `launch-<n>/` in the run "
    "directory, have the details). A receive that waits longer than `--comm-timeout` stops the run naming the"
    " rank, the job and the peer. Each rank is its own process: a `--model` module must be importable there "
    "too (the current directory and `PYTHONPATH` are).",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --comm-timeout 0.001",
        note="no activation crosses a link within a millisecond: the first receive gives up",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2", paddle=True),
)
