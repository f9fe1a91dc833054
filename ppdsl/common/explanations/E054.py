from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "ppdsl writes only into a directory that no other user can change: owned by you or by root, and not "
    "writable by its group (unless it is your private group) or by everyone. A sticky directory everyone "
    "may write (`/tmp`) is shared: there ppdsl only makes new files and replaces its own. A run directory "
    "(`--run-dir`, default `ppdsl-run/`) and a save directory (`--save-dir`) are checked as ssh checks "
    "`~/.ssh`, every directory above them too, because the ranks and a resumed run open their files by name "
    "later. Otherwise another user (you may be root) could swap `spec.json` or plant a symlink where ppdsl "
    "writes.",
    cmd("ppdsl compile 1f1b", setting="the current directory is another user's"),
    cmd("ppdsl compile 1f1b", note="(in a directory of your own)"),
)
