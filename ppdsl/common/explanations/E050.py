from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "An output (`-o`, `--summary-json`, `--profile`) names a file the command reads: its schedule, a file the "
    "schedule includes, a cost file, a CSV, a profile. Writing it would destroy the input, so nothing is "
    "written. The same file under another name (a symlink, a hard link) is the same file.",
    cmd("ppdsl compile example.sched -o example.sched", files=((SCHED, GPIPE + "\n"),)),
    cmd("ppdsl compile example.sched -o plan_example.py", files=((SCHED, GPIPE + "\n"),)),
)
