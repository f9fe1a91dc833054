from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "An output is written to a regular file (replaced whole: a new file is written beside it and renamed over "
    "it, so a failure leaves the old one), or written through to a character device or a FIFO (`/dev/null`, "
    "`/dev/stdout`, a pipe), which are never replaced. A directory, a block device or a socket is refused, and "
    "a write that fails (no space left on the disk, `/dev/full`) is this error: a file being replaced keeps "
    "its old content.",
    cmd("ppdsl compile 1f1b -o ."),
    cmd("ppdsl compile 1f1b -o plan_1f1b.py"),
)
