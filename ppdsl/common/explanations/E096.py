from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "`ppdsl fmt` formats the files it is named and the `.sched` files under the directories it is named "
    "(hidden directories skipped); with no path, those under the working directory. When all the paths together "
    "hold no `.sched` file, a path is probably wrong (a typo, the wrong directory), and nothing is done.",
    cmd("ppdsl fmt .", files=(("notes.txt", "not a schedule\n"),)),
    cmd("ppdsl fmt .", files=(("notes.txt", "not a schedule\n"), (SCHED, GPIPE + "\n"))),
)
