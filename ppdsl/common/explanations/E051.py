from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "ppdsl reads regular files only. A directory, a FIFO (a named pipe), a device (`/dev/zero`, `/dev/stdin`) "
    "or a socket is refused before anything is read: reading one may never end, or never stop growing. Save "
    "what a pipe or a program produces to a file first.",
    cmd("ppdsl check /dev/zero --pp 2 -m 4"),
    cmd("ppdsl check example.sched --pp 2 -m 4", files=((SCHED, GPIPE + "\n"),)),
)
