from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import MODEL

EXPLANATION = Explanation(
    "A rank of `ppdsl run --nproc-per-node` runs the `--model` module from the source bytes its launcher "
    "read, not by importing it again: the launch's spec holds the sha256 of the module's file (and of each "
    "package `__init__.py` above it), the rank reads each file once, compares and runs those bytes. A file "
    "edited or replaced between the launch and a rank's start is refused; so is a module that is not Python "
    "source (a compiled extension), whose bytes a rank could not run this way. Start the run again once the "
    "model's files are as you want them.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --model mymodel:build",
        files=(MODEL,),
        note="`mymodel.py` is edited while the ranks start",
        setting="a model file edited while the ranks start",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --model mymodel:build", files=(MODEL,), paddle=True),
)
