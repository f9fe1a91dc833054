"""Schedule synthesis (`ppdsl synth`): the fastest schedule for given costs within a memory limit, written as a
`.sched` file that the checker proves at those sizes.

    problem.py  the sizes, placement, costs, link times, memory accounting and limits, read off a probe schedule
    schedule.py candidate schedules and their exact evaluation (the checker's execution model)
    greedy.py   memory-aware list scheduling under a policy
    improve.py  local search along the critical path
    exact.py    the CP-SAT model (`--exact`, and the repair step of lns.py)
    exact_actions.py  the CP-SAT model with memory actions (`--exact --memory-actions`, and their polish)
    lns.py      large-neighbourhood search over windows of a schedule
    window.py   a window of a schedule as a small CP-SAT model (lns.py's repair step)
    window_actions.py  the same with memory actions (lns.py's repair step for schedules with actions)
    periodic.py one micro-batch's block repeated every period (CP-SAT): starting points, and `--periodic`
    bounds.py   lower bounds on the makespan
    seeds.py    the library's schedules as starting points
    actions.py  memory actions (recompute, offload) inserted in found orders and improved (`--memory-actions`)
    cpsat.py    what the CP-SAT engines share: loading OR-Tools, integer scales, a schedule's statics, holds
    search.py   the one orchestrator: the time budget and the portfolio of every search (orders, actions,
                periodic blocks), their result and report
    request.py  what is asked (`SynthRequest`: each field an option of `ppdsl synth` and a keyword of
                `ppdsl.synthesize`, with its help and range) and its checks; light, as the command line reads it
    driver.py   `synthesize_file`: the request read into a `Problem` (`build`), searched, written, and the
                written file proven by the checker
    writer.py   the result as `.sched` text

With `--memory-actions` (a problem built with recompute / offload / reload) the engines that take the actions,
all through the one timing rule (`analysis.timing`, rule 6) and every result re-timed by `schedule.Evaluator`:
greedy.py (list scheduling that recomputes or offloads as it goes), actions.py (actions inserted in found orders),
periodic.py (a block that chooses them per stage), exact_actions.py (the whole schedule, up to
`ACTIONS_CP_SAT_MAX_JOBS` jobs or with `--exact`) and, above that size, lns.py's windows with window_actions.py.

`synthesize_file` (driver.py) puts them together and checks the written text with the checker before it is
returned; this module is the package's public surface. This layer builds on the analysis layer and is below
reports and the command line.
"""

from __future__ import annotations

import importlib

# what the package offers, and the module it lives in: imported when first named, so that the command line, which
# reads `SynthRequest`'s fields for every command, does not load the search
_HOMES = {
    "ACTIONS_CP_SAT_MAX_JOBS": "ppdsl.synth.search",
    "Infeasible": "ppdsl.synth.search",
    "SynthOutcome": "ppdsl.synth.driver",
    "SynthRequest": "ppdsl.synth.request",
    "SynthResult": "ppdsl.synth.search",
    "action_costs": "ppdsl.synth.driver",
    "action_search": "ppdsl.synth.search",
    "build": "ppdsl.synth.driver",
    "synthesize_file": "ppdsl.synth.driver",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
