from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "Each kind of input has a size ppdsl reads at most, far above any real file of the kind: 16 MiB for a "
    "schedule and each file it includes, 1 MiB for a cost file, 64 MiB for a PyTorch CSV or a profile. A "
    "larger file is refused before it is read, so a wrong path cannot exhaust the memory.",
    cmd("ppdsl check huge.sched --pp 2 -m 4", setting="a schedule file larger than 16 MiB"),
    cmd("ppdsl check example.sched --pp 2 -m 4", files=((SCHED, GPIPE + "\n"),)),
)
