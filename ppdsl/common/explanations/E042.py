from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl synth` checks the file it writes before it writes it: the checker must prove it valid with the "
    "makespan the search measured. They share one execution model, so this never happens unless ppdsl has a "
    "bug: nothing is written, and the message says what the checker found. Please report it with the command.",
    cmd(
        "ppdsl synth --pp 4 -m 8 --memory-limit 4 -o found.sched",
        note="(only with a bug in ppdsl synth)",
        setting="a bug in ppdsl synth",
    ),
    cmd("ppdsl synth --pp 4 -m 8 --memory-limit 4 --time-limit 1 -o found.sched"),
)
