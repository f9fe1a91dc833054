from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "The synthesizer's engines (greedy, CP-SAT, windows, periodic) time forwards and backwards only; a "
    "schedule with recompute, offload or reload jobs is checked and simulated by `ppdsl check` and "
    "`ppdsl plot`, whose executor models the copy stream, but synth refuses it rather than time it wrongly.",
    cmd(
        "python -c 'import ppdsl; from ppdsl.synth.problem import problem_from_expansion as p; "
        'p(ppdsl.expand("recompute.sched", pp=2, microbatches=2), "looped", "auto")\'',
        note="(through the Python API only: the command line's synth never reads a schedule)",
        setting="a Python caller handing synth a schedule with memory actions",
    ),
    cmd("ppdsl synth --pp 4 -m 8 --memory-limit 4 --time-limit 1 -o found.sched"),
)
