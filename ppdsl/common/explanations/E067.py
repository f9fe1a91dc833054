from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "`include` reads `.sched` files only, and only regular files: a device (`/dev/zero`), a FIFO, a directory "
    "or a file of another kind (`/etc/shadow`, a `.py`) is refused before it is read, and nothing of it is "
    "shown.",
    cmd("ppdsl check main.sched --pp 2 -m 4", files=(("main.sched", 'include "/dev/zero"\n' + GPIPE + "\n"),)),
    cmd(
        "ppdsl check main.sched --pp 2 -m 4",
        files=(("main.sched", 'include "common.sched"\n' + GPIPE + "\n"), ("common.sched", "cost forward = 1\n")),
    ),
)
