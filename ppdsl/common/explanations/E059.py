from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "`ppdsl fmt DIR` rewrites the `.sched` files under DIR, and nothing outside it: a symlink it meets that "
    "leads out of the tree is not followed, and is reported. A link to a file inside the tree is skipped (that "
    "file is formatted under its own name). To format the file a link points to, name that file.",
    cmd(
        "ln -s /etc/outside.sched schedules/link.sched",
        "ppdsl fmt schedules",
        setting="a symlink out of the tree",
    ),
    cmd("ppdsl fmt example.sched", files=((SCHED, GPIPE + "\n"),)),
)
