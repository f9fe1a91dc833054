"""`synthesize_file`: a request checked and read into a `Problem` (`build`: every refusal that needs no search,
as costs that cannot be counted or a limit below what any schedule holds), searched (search.py), written as
`.sched` text (writer.py) and proven by the checker with the same costs and memory before it is returned; a
measured model's values in transit between jobs, which the engines do not count, are made room for by searching
again at a lower limit. A request with a layer profile (`layers`) goes through `ppdsl.synth.partition`, which
chooses the partition and searches each candidate's stages here.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ppdsl.analysis.check import CheckResult, check
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.layers import Partition
from ppdsl.analysis.memory import MemoryModel
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.units import format_bytes
from ppdsl.plan.kinds import OFFLOAD_NAME, action_names, copies, is_action
from ppdsl.synth.bounds import memory_lower_bound
from ppdsl.synth.cpsat import MAX_TICKS, time_ticks
from ppdsl.synth.partition import synthesize_partitioned
from ppdsl.synth.periodic import Block
from ppdsl.synth.problem import Problem, build_problem, measured_problem_memory, searched_limits
from ppdsl.synth.request import SynthRequest
from ppdsl.synth.search import SynthResult, search_request
from ppdsl.synth.steady import SteadyForm, steady_form
from ppdsl.synth.writer import Header, costs_fit_in_file, in_order, number, problem_links, sched_text

EPS = 1e-6


@dataclass
class SynthOutcome:
    result: SynthResult
    text: str  # the .sched file
    check: CheckResult  # the checker's verdict on `text`, with the same costs
    request: SynthRequest
    notes: list[str] = field(default_factory=list)
    # with a layer profile: the partition the file carries, and each one tried with its makespan (None: none fit)
    partition: Partition | None = None
    partitions_tried: list[tuple[Partition, float | None]] = field(default_factory=list)


def build(request: SynthRequest) -> Problem:
    """The request checked and read into a `Problem`; raises DiagnosticError for what no search can answer."""
    problems = request.problems()
    if problems:
        raise DiagnosticError(problems)
    costs = action_costs(request)
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
        dp=request.dp,
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
        return costs.without(action_names())
    if OFFLOAD_NAME in request.memory_actions and costs.measured:
        missing = [n for n in action_names() if copies(n) and n not in costs.names()]
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
    file's, as `ppdsl check --model` measures). With a layer profile (`request.layers`) the partition is chosen
    (or fixed, `request.partition`) with the order: `ppdsl.synth.partition`."""
    if request.layers is not None:
        problems = request.problems()  # (the profile read and the partition checked before any search)
        if problems:
            raise DiagnosticError(problems)
        return synthesize_partitioned(request, synthesize_file, progress)
    checked_request = request
    if request.memory is not None and not isinstance(request.memory, MemoryModel):
        request = replace(request, memory=measure_probe(request))
    problem = build(request)
    # each limit down to the highest level a schedule reaches under it: the same schedules fit, so limits between
    # two levels are one search and give one file (a looser limit is never the slower for where it falls)
    searched = searched_limits(problem)
    lowered = False  # (below the asked limits, for what is in transit: bounds proven there may not hold)
    for _ in range(TRANSIT_ROUNDS):
        result, block = search_request(request, searched, progress)
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
    if not _as_searched(next(checked_counts(written, request, result, [m])), result):
        return None  # (a reduction the repeated form can only write after the block ends later than searched)
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


def _as_searched(checked: CheckResult, result: SynthResult) -> bool:
    """Does the checked file run as the search timed its orders (valid, the same makespan)?"""
    if not checked.valid or checked.makespan is None:
        return False
    return abs(checked.makespan - result.makespan) <= EPS * max(1.0, result.makespan)


def proven_counts(microbatches: int, stride: int) -> int:
    """How many counts above the searched one a steady-state file is proven at: up to four times it, at most
    STEADY_PROOFS of them (each is one `ppdsl check`, milliseconds at the sizes synth searches)."""
    return max(1, min(3 * microbatches // stride, STEADY_PROOFS))


STEADY_PROOFS = 32


# A model measured on a program counts the values in transit between jobs (`Expansion.mem_received`), which the
# search's engines do not: a schedule the check finds over the limit by them is searched again with the limit less
# what it went over, this many times at most (each round rarely needs more than one more: a gradient per rank)
TRANSIT_ROUNDS = 4


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
            costs = costs.without(action_names())
        scenario = Scenario(path, request.pp, counts[0], request.vpp, costs=costs, memory=request.memory, dp=request.dp)
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
    wrong_makespan = microbatches is None and not _as_searched(checked, result)
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
    return any(t < len(names) and is_action(names[t]) for order in result.orders for t, _, _ in order)


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
        # a summary for the reader: 12 digits, as sums of a profile's layer costs carry float noise (4.17169999...)
        # the file's own `cost` lines keep every digit
        values = sorted({float(f"{x:.12g}") for x in p.cost[t]})
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
    check += f" --dp {p.dp}" if p.dp > 1 else ""
    if not costs_fit_in_file(p) and request.cost_options:
        check += f" {request.cost_options}"
    if request.memory_options:
        check += f" {request.memory_options}"
    return Header(name, inputs, outcome, found, request.command or "ppdsl synth ...", check)
