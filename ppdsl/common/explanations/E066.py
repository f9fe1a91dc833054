from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "Includes are bounded: a chain of at most 32 files including one another, at most 1,000 `include` "
    "statements expanded and 16 MiB of included text in all, whatever the files. A file included several times "
    "is read once. The message names the chain of files, or the figure that went over.",
    cmd(
        "ppdsl check main.sched --pp 2 -m 4",
        files=(
            ("main.sched", 'include "a0.sched"\n' + GPIPE + "\n"),
            *((f"a{i}.sched", f'include "a{i + 1}.sched"\n') for i in range(33)),
            ("a33.sched", "cost forward = 1\n"),
        ),
    ),
    cmd(
        "ppdsl check main.sched --pp 2 -m 4",
        files=(("main.sched", 'include "a0.sched"\n' + GPIPE + "\n"), ("a0.sched", "cost forward = 1\n")),
    ),
)
