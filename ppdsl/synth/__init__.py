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
    search.py   the search: portfolio, refinement, local search, CP-SAT; its result and report
    writer.py   the result as `.sched` text

With `--memory-actions` (a problem built with recompute / offload / reload) the engines that take the actions,
all through the one timing rule (`analysis.timing`, rule 6) and every result re-timed by `schedule.Evaluator`:
greedy.py (list scheduling that recomputes or offloads as it goes), actions.py (actions inserted in found orders),
periodic.py (a block that chooses them per stage), exact_actions.py (the whole schedule, up to
`ACTIONS_CP_SAT_MAX_JOBS` jobs or with `--exact`) and, above that size, lns.py's windows with window_actions.py.

`synthesize_file` puts them together and checks the written text with the checker before it is returned. This
layer builds on the analysis layer and is below reports and the command line.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ppdsl.analysis.check import CheckResult, check
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.analysis.memory import MeasureMemory, MemoryActions, MemoryModel
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.units import format_bytes
from ppdsl.plan.kinds import COPY_NAMES, DEFAULT_RECOMPUTE_FRACTION, MEMORY_NAMES, OFFLOAD_NAME
from ppdsl.synth import exact
from ppdsl.synth.actions import ACTION_NAMES, ActionEngine, ActionResult, Placement, describe_counts
from ppdsl.synth.bounds import memory_lower_bound
from ppdsl.synth.clock import WorkClock, safety_cap
from ppdsl.synth.exact import MAX_TICKS, load_cp_model, time_ticks
from ppdsl.synth.exact import available as exact_available
from ppdsl.synth.exact_actions import NotModelled, drop_needless_actions, model_is_exact, solve_with_actions
from ppdsl.synth.greedy import Policy, list_schedule
from ppdsl.synth.lns import lns
from ppdsl.synth.periodic import Block, periodic_schedules
from ppdsl.synth.problem import Problem, build_problem, measured_problem_memory, searched_limits
from ppdsl.synth.schedule import COMPUTE, Evaluator, preference
from ppdsl.synth.search import (
    PERIODIC_SECONDS_PER_DET,
    Infeasible,
    SynthResult,
    action_policies,
    periodic_search,
    synthesize,
)
from ppdsl.synth.seeds import library_seeds
from ppdsl.synth.steady import SteadyForm, steady_form
from ppdsl.synth.writer import (
    Header,
    costs_fit_in_file,
    in_order,
    name_problem,
    number,
    problem_links,
    sched_text,
)

EPS = 1e-6
# of the time limit: how long the bases' first insertion of actions may run past the deadline when a finished
# candidate is held already (the list scheduler's or the block's); without one it runs to its end
INSERT_GRACE = 0.25
SCHEDULED_SHARE = 0.15  # of --time-limit, for list scheduling with actions (and the local search of its best)
ACTIONS_CP_SAT_SHARE = 0.25  # of the time limit, for the whole schedule with actions in CP-SAT (small sizes)
# Up to this, the actions search also runs that model (pp 4, 8 micro-batches, split free: 96 jobs). Smaller than
# the order search's CP_SAT_WHOLE_MAX_JOBS: with its anchoring the model grows with the square of a rank's jobs
# (about 1 s to build at 96 jobs, 10 s at 288).
ACTIONS_CP_SAT_MAX_JOBS = 120
# of the time limit, above it: windows of the actions search's best re-solved in CP-SAT with its actions
# (window_actions.py), each about ACTIONS_WINDOW compute jobs, ACTIONS_WINDOW_DEPTH per rank (so that at pp 8 a
# window spans every rank: what shortens these schedules is the cool-down across all of them), of
# ACTIONS_WINDOW_SECONDS of CP-SAT's deterministic time at that size (measured at pp 8, 16 and 32 micro-batches)
ACTIONS_WINDOWS_SHARE, ACTIONS_WINDOWS_LEAST = 0.25, 0.1
ACTIONS_WINDOW, ACTIONS_WINDOW_DEPTH, ACTIONS_WINDOW_SECONDS = 40, 5, 0.05
# of --time-limit, with --memory-actions: a periodic block that chooses the actions itself (periodic.py), a
# steady state the inserted actions rarely reach at tight memory; more of it below the least memory an order alone
# needs, where the orders found at relaxed limits are all far over it
PERIODIC_SHARE = 0.15
PERIODIC_SHARE_BELOW = 0.4


@dataclass
class SynthRequest:
    """What to synthesize: the sizes, the costs and memory, and how hard to search."""

    pp: int
    microbatches: int
    vpp: int = 1
    placement: str = "looped"
    costs: CostSpec | None = None
    memory_limit: float | None = None
    memory: MemoryModel | MeasureMemory | None = None  # bytes on a model (the CLI's --model); None: activations
    memory_options: str = ""  # how to measure it again on the command line (`--model M --batch-size B`)
    split: str = "auto"
    backward_b_frees: float = 0.5
    exact: bool = False
    periodic: bool = False  # a repeated block, written so that it holds for any number of micro-batches
    time_limit: float = 10.0
    seed: int = 0
    workers: int = 1
    library: bool = True  # seed the search with the library's schedules
    cost_scale: float = 1.0
    max_jobs: int = DEFAULT_MAX_JOBS  # sizes needing more jobs are refused before anything runs
    name: str = ""
    command: str = ""  # the command line that makes this request (for the file's docstring)
    output: str = "OUT.sched"  # where the file goes (named in the docstring's commands)
    cost_options: str = ""  # `--cost ...` / `--costs FILE` as given (for the docstring)
    memory_actions: tuple[str, ...] = ()  # of "recompute", "offload": the search may choose them (actions.py)
    # what a recompute rebuilds of what its forward does not keep as the stage input (1: a full recompute, as `check`
    # reads a recompute without a fraction); it costs that fraction of the forward (`kinds.recompute_share`)
    recompute_fraction: float = DEFAULT_RECOMPUTE_FRACTION
    host_limit: float | None = None  # all ranks' offloaded memory together (with offload)


@dataclass
class SynthOutcome:
    result: SynthResult
    text: str  # the .sched file
    check: CheckResult  # the checker's verdict on `text`, with the same costs
    request: SynthRequest
    notes: list[str] = field(default_factory=list)


def build(request: SynthRequest) -> Problem:
    bad_name = name_problem(request.name)
    if bad_name is not None:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"the name `{request.name}` {bad_name}",
                    help='the name is written between double quotes in the file: leave out `"` and control characters',
                )
            ]
        )
    unknown = [a for a in request.memory_actions if a not in ACTION_NAMES]
    if unknown:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E084",
                    f"unknown memory action `{unknown[0]}` in --memory-actions",
                    help="use `recompute`, `offload` or both: `--memory-actions recompute,offload`",
                )
            ]
        )
    costs = action_costs(request)
    if not (request.time_limit > 0 and math.isfinite(request.time_limit)):
        raise DiagnosticError(
            [Diagnostic("E007", f"the time limit must be a positive number of seconds, got {request.time_limit}")]
        )
    problem = build_problem(
        request.pp,
        request.microbatches,
        request.vpp,
        request.placement,
        costs,
        request.memory_limit,
        request.memory,
        request.split,
        request.backward_b_frees,
        request.cost_scale,
        request.max_jobs,
        memory_actions=bool(request.memory_actions),
        recompute_fraction=request.recompute_fraction,
        host_limit=request.host_limit,
    )
    k, ticks = time_ticks(problem)
    if ticks == 0:  # (a zero cost is meaningful for some jobs: the optimizer's default; not for all of them)
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    "every job costs 0: there is no time to minimize",
                    help="give forward and backward costs (`--cost forward=1,backward=2`)",
                )
            ]
        )
    if ticks > MAX_TICKS:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"the costs need {ticks:.3g} time steps of 1/{k} for one training step, more than the search "
                    f"counts ({MAX_TICKS:.3g})",
                    help="give costs with fewer decimals, or in a larger unit (the largest and smallest nonzero "
                    "costs should be within about 10^9 of each other)",
                )
            ]
        )
    need = problem.minimum_memory()
    # (with memory actions a rank may hold less than an order alone needs: the actions engine says if nothing fits)
    short = [] if request.memory_actions else [r for r in range(problem.pp) if need[r] > problem.limit[r] + 1e-9]
    if short:
        r = max(short, key=lambda q: need[q] - problem.limit[q])
        unit = problem.memory_unit
        shown = format_bytes if unit == "bytes" else (lambda x: f"{number(x)} activations")
        raise DiagnosticError(
            [
                Diagnostic(
                    "S114",
                    f"no schedule fits a memory limit of {shown(problem.limit[r])}: rank {r} holds at least "
                    f"{shown(need[r])} in any schedule",
                    help=f"raise --memory-limit to {shown(max(need))} or more: a micro-batch's forwards on all "
                    "of a rank's stages are held at once before its first backward there",
                )
            ]
        )
    return problem


def action_costs(request: SynthRequest) -> CostSpec | None:
    """The request's costs for its problem. The costs of recompute, offload and reload (`--cost offload=0.5`, a
    cost file's) time the jobs `--memory-actions` places; without actions synth places none, and they are left out
    (a cost file may be calibrated on a run with them; `ppdsl synth` refuses such pairs itself, E110, and
    `compare --synth` / `frontier` give one set of costs to rows with and without actions). Copies timed in a cost
    file's real unit need their own costs: the built-in 0.5 is in abstract units (E111)."""
    costs = request.costs
    if costs is None:
        return None
    if not request.memory_actions:
        return costs.without(MEMORY_NAMES)
    if OFFLOAD_NAME in request.memory_actions and costs.measured:
        missing = [n for n in COPY_NAMES if n not in costs.names()]
        if missing:
            unit = str(costs.file.get("unit", "s")) if costs.file else "s"
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E111",
                        f"the cost file's times are in {unit}, but it gives no cost for `{missing[0]}`: the "
                        "built-in copy time (0.5) is in abstract units",
                        help=f"give the copies' times in {unit}: `--cost offload=...,reload=...`, or calibrate a "
                        "run that offloads (`ppdsl run ... --profile`, then `ppdsl calibrate`)",
                    )
                ]
            )
    return costs


def synthesize_file(request: SynthRequest, progress: Callable[[str], None] | None = None) -> SynthOutcome:
    """Search, write the `.sched` text, and check it; raises DiagnosticError for bad requests. Bytes measured on a
    model are measured once for the search (on the probe's program) and again for the check (on the written
    file's, as `ppdsl check --model` measures)."""
    checked_request = request
    if request.memory is not None and not isinstance(request.memory, MemoryModel):
        request = replace(request, memory=measure_probe(request))
    problem = build(request)
    # each limit down to the highest level a schedule reaches under it: the same schedules fit, so limits between
    # two levels are one search and give one file (a looser limit is never the slower for where it falls)
    searched = searched_limits(problem)
    lowered = False  # (below the asked limits, for what is in transit: bounds proven there may not hold)
    for _ in range(TRANSIT_ROUNDS):
        result, block = _search(request, searched, progress)
        text = sched_text(problem, result.orders, _header(request, problem, result, block), block)
        check = checked_text(text, checked_request, result)
        short = _transit_over_limit(problem, check)
        if short is None:
            break
        # the engines count activations, not what is in transit between jobs (the check does): plan with less
        searched = replace(searched, limit=[x - over for x, over in zip(searched.limit, short, strict=True)])
        lowered = True
    if lowered:
        # a bound proven at the lowered limits is none at the asked ones: only what the asked limits force holds
        bound = min(result.lower_bound, memory_lower_bound(problem, request.memory_actions))
        result = replace(result, problem=problem, lower_bound=bound, optimal=result.makespan <= bound + EPS)
        text = sched_text(problem, result.orders, _header(request, problem, result, block), block)
    elif searched is not problem:
        result = replace(result, problem=problem)
    check = verify(text, checked_request, result, checked=check)
    if block is not None:
        # the periodic form claims every number of micro-batches: prove one more, beyond the warm-up's length
        verify(text, checked_request, result, microbatches=2 * request.microbatches + problem.nstages)
    elif (steady := _steady_text(problem, result, checked_request)) is not None:
        text, check = steady
    return SynthOutcome(result, text, check, checked_request)


def _steady_text(problem: Problem, result: SynthResult, request: SynthRequest) -> tuple[str, CheckResult] | None:
    """The file in its steady-state form (`ppdsl.synth.steady`), proven at each count it admits from the searched
    one up to `proven_counts` more strides, with its check at the searched count; None where the orders have no
    steady state or it fails at the first count above."""
    form = steady_form(problem, result.orders) if in_order(result.orders) else None
    if form is None:
        return None
    m = problem.microbatches
    counts = [m + k * form.stride for k in range(1, proven_counts(m, form.stride) + 1)]

    def text(proven_up_to: int) -> str:
        header = _header(request, problem, result, None, form, proven_up_to)
        return sched_text(problem, result.orders, header, steady=form, proven_up_to=proven_up_to)

    written = text(counts[-1])
    proven = m
    for count, checked in zip(counts, checked_counts(written, request, result, counts), strict=False):
        if not checked.valid:
            break
        proven = count
    if proven == m:
        return None
    if proven != counts[-1]:
        written = text(proven)  # (only the `require` and the docstring change: the orders proven stay the same)
    return written, verify(written, request, result)


def proven_counts(microbatches: int, stride: int) -> int:
    """How many counts above the searched one a steady-state file is proven at: up to four times it, at most
    STEADY_PROOFS of them (each is one `ppdsl check`, milliseconds at the sizes synth searches)."""
    return max(1, min(3 * microbatches // stride, STEADY_PROOFS))


STEADY_PROOFS = 32


# A model measured on a program counts the values in transit between jobs (`Expansion.mem_received`), which the
# search's engines do not: a schedule the check finds over the limit by them is searched again with the limit less
# what it went over, this many times at most (each round rarely needs more than one more: a gradient per rank)
TRANSIT_ROUNDS = 4


def _search(
    request: SynthRequest, problem: Problem, progress: Callable[[str], None] | None
) -> tuple[SynthResult, Block | None]:
    """The search the request asks for; raises DiagnosticError (S114) when nothing fits."""
    try:
        if request.periodic:
            return periodic_search(problem, request.time_limit, request.seed, request.memory_actions)
        if request.memory_actions:
            return search_with_actions(request, problem, progress), None
        seeds = list(library_seeds(problem)) if request.library else []
        found = synthesize(
            problem, request.time_limit, request.exact, request.seed, seeds, request.workers, progress=progress
        )
        return found, None
    except Infeasible:  # (the one-at-a-time seed fits whatever `build` accepts; a periodic block may not)
        message = "no periodic block fits the memory limit" if request.periodic else "no schedule fits the memory limit"
        hint = "raise --time-limit, or drop --periodic to search every schedule" if request.periodic else None
        if request.memory_actions:
            message += f" with {' and '.join(request.memory_actions)}"
            hint = "raise --memory-limit (or --host-limit), or allow both actions: --memory-actions recompute,offload"
        if problem.expansion is not None and problem.expansion.mem_received is not None:
            message += " and the values in transit between jobs (measured on the model)"
        raise DiagnosticError([Diagnostic("S114", message, help=hint)]) from None


def _transit_over_limit(problem: Problem, check: CheckResult) -> list[float] | None:
    """[rank]: how far the checked schedule goes over each rank's limit, when only what is in transit takes it
    there (None: it fits, or the model counts nothing in transit, or it fails otherwise: `verify` says how)."""
    exp = check.expansion
    if exp is None or exp.mem_received is None or check.execution is None or not check.execution.completed:
        return None
    if any(d.code != "S106" for d in check.diagnostics):
        return None
    over = [max(0.0, r.peak_activations - limit) for r, limit in zip(check.execution.ranks, problem.limit, strict=True)]
    return over if any(x > 1e-9 for x in over) else None


def measure_probe(request: SynthRequest) -> MemoryModel:
    """The request's `--model` bytes measured on the probe's program (every job type the search may place)."""
    assert request.memory is not None and not isinstance(request.memory, MemoryModel)
    return measured_problem_memory(
        request.memory,
        request.pp,
        request.microbatches,
        request.vpp,
        request.placement,
        request.split,
        request.backward_b_frees,
        bool(request.memory_actions),
        request.recompute_fraction,
        request.max_jobs,
    )


def checked_text(text: str, request: SynthRequest, result: SynthResult, microbatches: int | None = None) -> CheckResult:
    """`ppdsl check` of the written schedule with the request's costs and memory (at other `microbatches`, for a
    periodic schedule)."""
    return next(checked_counts(text, request, result, [microbatches or request.microbatches]))


def checked_counts(text: str, request: SynthRequest, result: SynthResult, counts: list[int]) -> Iterator[CheckResult]:
    """`checked_text` at each of `counts`, the file read and resolved once."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "synthesized.sched"
        path.write_text(text, encoding="utf-8")
        costs = None if costs_fit_in_file(result.problem) else action_costs(request)
        if costs is not None and not _has_actions(result):  # (the file then has no action types)
            costs = costs.without(MEMORY_NAMES)
        scenario = Scenario(path, request.pp, counts[0], request.vpp, costs=costs, memory=request.memory)
        if request.memory is not None and request.memory_limit is not None:
            scenario = scenario.with_(memory_limit=request.memory_limit)
        for count in counts:
            yield check(scenario.with_(microbatches=count))


def verify(
    text: str,
    request: SynthRequest,
    result: SynthResult,
    microbatches: int | None = None,
    checked: CheckResult | None = None,
) -> CheckResult:
    """Check the written schedule with the same costs and memory (`checked`: its check, when already run); it must
    be valid with the search's makespan (at other `microbatches`, for a periodic schedule: valid within the limit)."""
    m = microbatches or request.microbatches
    if checked is None:
        checked = checked_text(text, request, result, microbatches)
    wrong_makespan = microbatches is None and abs(checked.makespan - result.makespan) > EPS * max(1.0, result.makespan)
    if not checked.valid or wrong_makespan:
        found = "; ".join(f"{d.code}: {d.message}" for d in checked.diagnostics) or f"makespan {checked.makespan}"
        found += "" if microbatches is None else f" at microbatches={m}"
        raise DiagnosticError(
            [
                Diagnostic(
                    "E042",
                    f"the synthesized schedule does not check as searched ({found}; the search's makespan "
                    f"{result.makespan:g})",
                    help="this is a bug in ppdsl synth: please report it with the command line",
                )
            ]
        )
    return checked


def _has_actions(result: SynthResult) -> bool:
    """Does the result run a recompute, offload or reload job?"""
    names = result.problem.expansion.type_names if result.problem.expansion is not None else ()
    return any(t < len(names) and names[t] in MEMORY_NAMES for order in result.orders for t, _, _ in order)


def _header(
    request: SynthRequest,
    problem: Problem,
    result: SynthResult,
    block: Block | None,
    steady: SteadyForm | None = None,
    proven_up_to: int = 0,
) -> Header:
    p = problem
    name = request.name or f"synth-pp{p.pp}-m{p.microbatches}-v{p.vpp}"
    costs = []
    for label, t in (("forward", 0), ("backward", 1), ("backward_b", 2), ("backward_w", 3)):
        values = sorted(set(p.cost[t]))
        costs.append(f"{label} {'/'.join(map(number, values))}")
    latency, bandwidth = problem_links(p)
    links = f"latency {number(latency)}" + (f", bandwidth {number(bandwidth)}" if bandwidth else "")
    unit = p.memory_unit
    shown = format_bytes if unit == "bytes" else (lambda x: number(x))
    limit = (
        "no memory limit"
        if all(x == float("inf") for x in p.limit)
        else (
            f"memory limit {shown(p.limit[0])} per rank" + (" (bytes measured on the model)" if unit == "bytes" else "")
        )
    )
    inputs = [
        f"Inputs: {p.placement} placement, backward split: {p.split}; costs {', '.join(costs)}; {links};",
        f"{limit}"
        + ("" if unit == "bytes" else f"; memory: a forward holds 1, backward_b frees {number(p.backward_b_frees)}")
        + ".",
    ]
    ev = result.evaluation
    state = "optimal" if result.optimal else f"{result.gap:.1%} above it"
    fixed = block is None and steady is None
    makespan = "Makespan" if fixed else f"At microbatches={p.microbatches}: makespan"
    outcome = [
        f"{makespan} {number(round(ev.makespan, 9))}; lower bound {number(round(result.lower_bound, 9))} ({state}).",
        f"Peak memory per rank: {', '.join(shown(round(x, 9)) for x in ev.peaks)}.",
    ]
    found = [f"Found by: {result.origin}."]
    if block is not None:
        found.append(
            f"Periodic: one micro-batch's block repeats every {number(round(block.period / block.ticks, 9))}, so the "
            "order holds, within the memory limit, for any number of micro-batches; each further micro-batch adds "
            "about one period to the makespan."
        )
    elif steady is not None:
        every = "micro-batch" if steady.stride == 1 else f"{steady.stride} micro-batches"
        steps = "" if steady.stride == 1 else f" in steps of {steady.stride}"
        found.append(
            f"Steady state: after its warm-up each rank repeats a block, once per {every}, then cools down; so the "
            f"order holds for more micro-batches, and the checker proved it within the memory limit at every count "
            f"from {p.microbatches} to {proven_up_to}{steps} (the `require`)."
        )
    else:
        found.append(
            f"For microbatches={p.microbatches} only: its orders have no block that repeats and holds at more "
            "micro-batches (search again for another count, or use `--periodic`)."
        )
    check = f"ppdsl check {request.output} --pp {p.pp} -m {p.microbatches}" + (f" --vpp {p.vpp}" if p.vpp > 1 else "")
    if not costs_fit_in_file(p) and request.cost_options:
        check += f" {request.cost_options}"
    if request.memory_options:
        check += f" {request.memory_options}"
    return Header(name, inputs, outcome, found, request.command or "ppdsl synth ...", check)


def search_with_actions(
    request: SynthRequest, problem: Problem, progress: Callable[[str], None] | None = None
) -> SynthResult:
    """`--memory-actions`: the actions search (`action_search`), then, with `--exact` or when the problem is
    small (`ACTIONS_CP_SAT_MAX_JOBS`), the whole schedule with actions in CP-SAT (exact_actions.py) from the best
    found, which proves it optimal or gives the gap; above that size, LNS windows with its actions
    (`windows_with_actions`). The better is kept. Raises Infeasible when nothing fits."""
    t0 = time.perf_counter()
    limit = request.time_limit
    clock = WorkClock(limit)  # what decides is counted work, not the wall clock (clock.py)
    whole = exact_available() and (request.exact or problem.jobs_per_step <= ACTIONS_CP_SAT_MAX_JOBS)
    if request.exact:
        load_cp_model()  # a clear error when OR-Tools is missing
    if not math.isfinite(max(problem.limit)) or not exact_available():
        return action_search(request, problem, limit, progress, clock)
    if not whole:
        found = action_search(request, problem, (1 - ACTIONS_WINDOWS_SHARE) * limit, progress, clock)
        if found.optimal:
            return found
        # what is left of the limit (what follows: writing and checking the file), but at least
        # ACTIONS_WINDOWS_LEAST of it when the actions search ran over its share: a bounded overrun
        left = max(limit - clock.now() - min(0.05 * limit, 5.0), ACTIONS_WINDOWS_LEAST * limit)
        return windows_with_actions(request, found, left, progress, clock)
    # as `--exact` without actions: the heuristic's share is small next to the proof's
    heuristic = min(limit / 2, 10.0) if request.exact else (1 - ACTIONS_CP_SAT_SHARE) * limit
    found = action_search(request, problem, heuristic, progress, clock)
    if found.optimal:
        return found
    # (what follows the solve: re-timing, dropping needless actions, writing and checking the file)
    seconds = max(limit - clock.now() - min(0.05 * limit, 5.0), 0.5)
    try:
        solution, hinted = solve_with_actions(
            problem,
            request.memory_actions,
            seconds,
            start=(found.orders, found.evaluation),
            workers=request.workers,
            seed=request.seed,
            deterministic=request.workers == 1,
            proof=request.exact,
        )
    except NotModelled as why:
        return replace(found, origin=f"{found.origin}; CP-SAT not run: {why}")
    exact_model = model_is_exact(problem)
    best, origin = found.evaluation, found.origin
    orders = found.orders
    if solution.orders is not None:
        timer = Evaluator(problem)
        ev = timer.evaluate(solution.orders)
        if ev.feasible and ev.makespan < best.makespan - EPS:
            solved, ev = drop_needless_actions(timer, solution.orders, ev)
            did_text = actions_taken(problem, solved)
            best, orders, origin = ev, solved, f"CP-SAT with actions ({did_text}) from: {found.origin}"
    bound = found.lower_bound
    if exact_model and solution.status != "INFEASIBLE":  # (its bound: 0 without --exact, see solve_with_actions)
        bound = max(bound, solution.bound)
    optimal = best.makespan <= bound + EPS
    status = solution.status.lower() + ("" if hinted else ", the actions search's schedule not taken up")
    if progress is not None:
        progress(f"CP-SAT with actions: {status}, bound {number(round(solution.bound, 6))}")
    return SynthResult(
        problem,
        orders,
        best,
        bound,
        optimal,
        seconds=time.perf_counter() - t0,
        origin=origin,
        cp_sat=solution.status,
        capped=found.capped or clock.capped(),
    )


def actions_taken(problem: Problem, orders: list) -> str:
    """How many (stage, micro-batch)s the orders recompute and offload, for the origin of a result."""
    a = MemoryActions.of(problem.expansion)
    return describe_counts(
        {
            name: sum(job[0] == t for row in orders for job in row)
            for name, t in zip(ACTION_NAMES, (a.recompute, a.offload), strict=True)
        }
    )


def windows_with_actions(
    request: SynthRequest,
    found: SynthResult,
    seconds: float,
    progress: Callable[[str], None] | None = None,
    clock: WorkClock | None = None,
) -> SynthResult:
    """`found` (the actions search's best) improved by the large-neighbourhood search over windows with its
    actions (`lns(..., memory_actions=...)`, window_actions.py) for about `seconds`; each repaired schedule is
    re-timed by the checker's execution and kept only if it keeps every limit and is faster. The sizes above
    ACTIONS_CP_SAT_MAX_JOBS, where the whole schedule with actions is too large a model."""
    t0 = time.perf_counter()
    problem = found.problem
    if seconds <= 0:
        return found
    clock = clock if clock is not None else WorkClock(seconds)
    timer = Evaluator(problem)
    try:
        orders, ev, spent = lns(
            timer,
            found.orders,
            seconds,
            window=ACTIONS_WINDOW,
            target=found.lower_bound,
            seed=request.seed,
            out_of_time=clock.capped,  # (the windows count their work: the clock is only the safety net)
            per_window=ACTIONS_WINDOW_SECONDS,
            memory_actions=request.memory_actions,
            depth=ACTIONS_WINDOW_DEPTH,
        )
    except NotModelled as why:
        return replace(found, origin=f"{found.origin}; CP-SAT windows not run: {why}")
    clock.spend(spent)
    if progress is not None:
        progress(f"CP-SAT windows with actions: makespan {number(round(ev.makespan, 6))} ({spent:.1f} s of work)")
    seconds_spent = found.seconds + time.perf_counter() - t0
    if not ev.feasible or ev.makespan >= found.evaluation.makespan - EPS:
        return replace(found, seconds=seconds_spent, cp_sat="windows", capped=found.capped or clock.capped())
    return replace(
        found,
        orders=orders,
        evaluation=ev,
        optimal=ev.makespan <= found.lower_bound + EPS,
        seconds=seconds_spent,
        origin=f"{found.origin} + CP-SAT windows with actions ({actions_taken(problem, orders)})",
        cp_sat="windows",
        capped=found.capped or clock.capped(),
    )


def action_search(
    request: SynthRequest,
    problem: Problem,
    seconds: float,
    progress: Callable[[str], None] | None = None,
    clock: WorkClock | None = None,
) -> SynthResult:
    """The fastest orders the order search finds at a few relaxed limits (no limit, between, the tightest an order
    reaches, the request's own when an order fits it), then memory actions inserted where a rank is over its
    limit and improved by local search (actions.py), every candidate timed by the checker's execution on
    `problem` (which has the action types), within about `seconds`. Before them, in SCHEDULED_SHARE of the time,
    the list scheduler's own schedules with actions (greedy.py), and in PERIODIC_SHARE a periodic block that
    chooses the actions per stage (periodic.py): finished candidates, and the block's order and a list schedule
    it plans are bases. Raises Infeasible when nothing fits."""
    t0 = time.perf_counter()
    # every share below is of counted work (clock.py): the same inputs give the same schedule under any load
    clock = clock if clock is not None else WorkClock(seconds)
    start = clock.now()
    order_share = 0.65 * seconds

    # the orders are found without the action types: their costs are the actions engine's
    order_costs = None if request.costs is None else request.costs.without(MEMORY_NAMES)

    def order_problem(limit: float | None, split: str) -> Problem:
        return build_problem(
            request.pp,
            request.microbatches,
            request.vpp,
            request.placement,
            order_costs,
            limit,
            request.memory,
            split,
            request.backward_b_frees,
            request.cost_scale,
            request.max_jobs,
        )

    def order_search(limit: float | None, split: str, seconds: float) -> SynthResult:
        p = order_problem(limit, split)
        seeds = list(library_seeds(p)) if request.library else []
        found = synthesize(p, max(seconds, 0.2), seed=request.seed, seeds=seeds)
        clock.spend(found.work)
        return found

    # The ladder of limits the orders are found at: the request's own (when an order reaches it), the tightest an
    # order reaches, and steps up to the peak of the fastest order without a limit. A deferred backward_w holds
    # memory no action can move, so with the split free the orders are also found with whole backwards.
    need, limit = max(problem.minimum_memory()), max(problem.limit)
    if not math.isfinite(limit):  # nothing to make room for: the order search's answer, which needs no action
        p = order_problem(None, request.split)
        seeds = list(library_seeds(p)) if request.library else []
        found = synthesize(p, seconds, request.exact, request.seed, seeds, request.workers, progress=progress)
        return replace(found, problem=problem, origin=f"{found.origin} (no memory limit: no action needed)")
    bound = memory_lower_bound(problem, request.memory_actions)

    def result(best: ActionResult) -> SynthResult:
        did = describe_counts(best.counts())
        return SynthResult(
            problem,
            best.orders,
            best.evaluation,
            bound,
            best.evaluation.makespan <= bound + EPS,
            seconds=time.perf_counter() - t0,
            origin=f"{best.origin} ({did})",  # (no counts of work in the file: see determinism in clock.py)
            work=clock.now() - start,
            capped=clock.capped(),
        )

    def at_bound(found: ActionResult | None) -> bool:
        """Is `found` optimal (no later start can beat it)?"""
        return found is not None and found.evaluation.makespan <= bound + EPS

    # first the list scheduler's own schedules, which take the actions while they schedule (greedy.py)
    engine = ActionEngine(problem, request.memory_actions, start + seconds, clock)
    policies = action_policies(problem, request.memory_actions)
    scheduled = engine.scheduled(policies, start + SCHEDULED_SHARE * seconds)
    if scheduled is not None and progress is not None:
        progress(f"{scheduled.origin}: makespan {number(round(scheduled.evaluation.makespan, 6))}")
    if at_bound(scheduled):
        scheduled.candidates = engine.evaluator.calls
        return result(scheduled)
    low = max(need, limit)
    bases: list[tuple[float, str, list]] = []
    # first a periodic block that chooses the actions itself, in a bounded share of the time (the order searches
    # share what is left of theirs)
    share = PERIODIC_SHARE if need <= limit + EPS else PERIODIC_SHARE_BELOW
    periodic = periodic_with_actions(request, problem, share * seconds, clock)
    if periodic is not None:
        # its compute order is a base too (the engine may place actions better in it), and a list schedule
        # planned by it without a limit, which fills the warm-up and cool-down the repetition leaves idle
        compute = [[job for job in order if job[0] in COMPUTE] for order in periodic.orders]
        bases.append((periodic.evaluation.makespan, f"{periodic.origin}'s order", compute))
        plain = order_problem(None, request.split)
        planned = list_schedule(plain, Policy(split=plain.split != "no", planned=True), periodic_plan(periodic))
        if planned is not None:
            bases.append((Evaluator(plain).evaluate(planned).makespan, f"{periodic.origin}, planned", planned))
        if progress is not None:
            progress(f"{periodic.origin}: makespan {number(round(periodic.evaluation.makespan, 6))}")
        if at_bound(periodic):
            return result(replace(periodic, candidates=max(engine.evaluator.calls, 1)))

    def add(x: float | None, split: str, seconds: float) -> SynthResult | None:
        try:
            found = order_search(x, split, seconds)
        except Infeasible:
            return None
        whole = ", whole backwards" if split == "no" and request.split == "auto" else ""
        at = "no limit" if x is None else f"found at limit {number(x)}"
        bases.append((found.makespan, f"{found.origin} ({at}{whole})", found.orders))
        if progress is not None:
            progress(f"order ({at}{whole}): makespan {number(round(found.makespan, 6))}")
        return found

    # first what the order alone reaches at the request's limit (when it reaches it at all): with actions the
    # result is never slower than that
    if need <= limit + EPS:
        add(limit, request.split, 0.25 * seconds)
    free = add(None, request.split, order_share / 6)
    top = max(free.evaluation.peaks) if free is not None else low
    # then, the most useful first should time run out: halfway up with whole backwards (1F1B-like orders, whose
    # in-flight micro-batches the actions free), the request's own limit with whole backwards, and so on
    mid, upper = low + (top - low) / 2, low + (top - low) / 4
    ladder = [(mid, "no"), (low, "no"), (mid, "auto"), (upper, "no"), (upper, "auto"), (low, "auto")]
    configs = []
    for x, split in ladder:
        split = split if request.split == "auto" else request.split
        done = need <= limit + EPS and x == low and split == request.split
        if (x, split) not in configs and not done and (x == low or low < top - EPS):
            configs.append((x, split))
    share = max(order_share - (clock.now() - start), 0.0) / max(len(configs), 1)
    for x, split in configs:
        if clock.now() - start > order_share:
            break
        add(x, split, share)
    # the library's orders too: an action pattern of theirs (PipeOffload's, 1F1B with recompute) is a start
    if request.library:
        plain = order_problem(None, request.split)
        timer = Evaluator(plain)
        for name, orders in library_seeds(plain):
            bases.append((timer.evaluate(orders).makespan, f"{name}'s order", orders))
    bases.sort(key=lambda b: b[0])
    bases.append((float("inf"), "one micro-batch at a time", problem.sequential()))  # fits the least memory
    held = scheduled is not None or periodic is not None
    best = engine.search(((origin, orders) for _, origin, orders in bases), fallback=held, grace=INSERT_GRACE * seconds)

    def key(found: ActionResult) -> tuple:
        return preference(problem, found.orders, found.evaluation)

    # (among equally fast ones, the least memory, then the simplest: `schedule.preference`)
    if scheduled is not None and (best is None or key(scheduled) < key(best)):
        best = scheduled
    if periodic is not None and (best is None or key(periodic) < key(best)):
        best = periodic
    if best is None:
        raise Infeasible(problem)
    return result(best)


def periodic_plan(found: ActionResult) -> dict[tuple[int, int, int], float]:
    """A list scheduler's priorities (earlier first) from the times the block's re-timed orders run each compute
    job at."""
    priority = {}
    for r, order in enumerate(found.orders):
        for i, job in enumerate(order):
            if job[0] in COMPUTE:
                priority[job] = -found.evaluation.start[r][i]
    return priority


def periodic_with_actions(
    request: SynthRequest, problem: Problem, seconds: float, clock: WorkClock | None = None
) -> ActionResult | None:
    """The fastest periodic block with memory actions (`periodic_schedules` with `request.memory_actions`) found
    within `seconds` that keeps every limit once the checker's execution re-times its orders; None if none."""
    if seconds <= 0 or not exact.available():
        return None
    timer = Evaluator(problem)
    best: ActionResult | None = None
    budget, deadline = seconds / PERIODIC_SECONDS_PER_DET, safety_cap(seconds)
    for block in periodic_schedules(
        problem, budget, request.seed, 1, search_longer=True, actions=request.memory_actions, deadline=deadline
    ):
        if clock is not None:
            clock.spend(block.spent * PERIODIC_SECONDS_PER_DET)
        ev = timer.evaluate(block.orders)
        if ev.feasible and (best is None or ev.makespan < best.evaluation.makespan - EPS):
            plan = Placement({(s, mb): a for s, a in block.choice.items() for mb in range(problem.microbatches)})
            best = ActionResult(block.orders, ev, plan, block.name)
    return best
