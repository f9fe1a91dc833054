from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "`ppdsl fmt` changes only whitespace, and proves it before it writes: the formatted text must parse and "
    "hold the same tokens and comments in the same order. This never fails unless the formatter has a bug: the "
    "file is left as it was, and the other files are formatted. Please report it with the file.",
    cmd("ppdsl fmt example.sched", note="(only with a bug in ppdsl fmt)", setting="a bug in ppdsl fmt"),
    cmd("ppdsl fmt example.sched", files=((SCHED, GPIPE + "\n"),)),
)
