from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A file ppdsl was given cannot be read (it does not exist, is not readable, or is not UTF-8 text), or an "
    "output file cannot be written (its directory does not exist or is not writable). A schedule is a path or "
    "the name of a shipped schedule (`ppdsl list`); a name that is neither is read as a path.",
    cmd("ppdsl check 1f1b.shed --pp 4 -m 8"),
    cmd("ppdsl check 1f1b --pp 4 -m 8"),
)
