from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "An output path is followed through a symlink only if the symlink is yours or root's: another user's "
    "link could aim your write (as root, any write) at any file. In a shared sticky directory (`/tmp`), a file "
    "of another user's name is not replaced either. Remove the link, or name the file it points to.",
    cmd("ppdsl compile 1f1b -o /tmp/plan_1f1b.py", setting="another user's symlink at /tmp/plan_1f1b.py"),
    cmd("ppdsl compile 1f1b -o plan_1f1b.py"),
)
