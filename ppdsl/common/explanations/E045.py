from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl run --nproc-per-node` binds the files of a launch to it: each rank gets the sha256 of the launch's "
    "`spec.json` on its command line, and the spec holds the sha256 of `plan.json`. A rank reads each file once "
    "(never through a symlink, a regular file only) and compares its bytes before it parses them, so a file "
    "changed after the launcher wrote it (by anyone who can write the run directory) is refused rather than "
    "obeyed: the spec names the model module every rank runs. Run `ppdsl run` again, with a `--run-dir` only "
    "you can write.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2",
        note="while its ranks start, `spec.json` of the launch is rewritten",
        setting="a launch's spec.json replaced while its ranks start",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2", paddle=True),
)
