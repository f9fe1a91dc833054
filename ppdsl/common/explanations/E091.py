from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl run --nproc-per-node` writes the checked schedule's plan specification into the launch's "
    "directory (`plan.json`) and every rank builds its plan from it, not from the `.sched` file. A rank refuses "
    "a file that is not a whole plan of this ppdsl's format (not JSON, another format version, a field of the "
    "wrong kind, a job or stage out of range) rather than train something half read.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2",
        note="while its ranks start, `plan.json` of the launch is overwritten",
        setting="a launch's plan.json replaced while its ranks start",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2", paddle=True),
)
