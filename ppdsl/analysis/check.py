"""`ppdsl check`: a scenario's expansion -> per-rank checks -> cross-rank execution -> checks of the execution
(deadlocks, memory), as one report.

`check(scenario)` is the way in. A check of the whole schedule's execution is one function registered with the
codes it reports (`@schedule_check`); a check of each rank's order is one in `ppdsl.analysis.checks`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ppdsl.analysis.checks import MAX_NOTES, check_ranks, used_types
from ppdsl.analysis.execution import Execution, Wait, execute
from ppdsl.analysis.execution import bubble_ratio as idle_share
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.grid import text_grid
from ppdsl.analysis.memory import MemoryActions, host_levels, rank_levels
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.codes import EXIT_VALID, exit_code
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.text import count, numbered, terminal_columns
from ppdsl.common.units import format_bytes
from ppdsl.language.ir import ScheduleDef


@dataclass(frozen=True)
class RankReport:
    """One rank's measures in a valid schedule."""

    rank: int
    jobs: int
    busy: float
    idle: float
    bubble_ratio: float
    peak_activations: float  # in the expansion's memory unit (activations, or bytes when measured)
    peak_time: float
    memory_limit: float | None
    recompute: float = 0.0  # of `busy`, the time spent recomputing: overhead beside the bubble (`idle`)
    recompute_ratio: float = 0.0  # `recompute` over the makespan (`bubble_ratio`: `idle` over the makespan less it)
    # a schedule with collectives (None without): its collective stream's time, and the part not overlapped
    collective: float | None = None
    exposed_collective: float | None = None

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.collective is None:  # a schedule without collectives reports what it always did
            del out["collective"], out["exposed_collective"]
        return out


@dataclass(frozen=True)
class StageReport:
    """One virtual stage of a partitioned model: where it runs, its layers, and one micro-batch's work on it (its
    forward and its whole backward, as the expansion costs them) and activation."""

    stage: int
    rank: int
    chunk: int
    layers: int
    time: float
    activation: float
    critical: bool  # the stage with the most work: the one that bounds the pipeline's steady state

    def to_dict(self) -> dict:
        return asdict(self)


def stage_reports(exp: Expansion) -> list[StageReport]:
    """Every virtual stage's report, in stage order; empty without a partition (`Expansion.stage_work`)."""
    work = exp.stage_work
    if work is None:
        return []
    names = exp.type_names

    def cost(name: str, r: int, c: int) -> float:
        return exp.cost[names.index(name)][r][c] if name in names else 0.0

    times = []
    for r, c in exp.rank_of_stage():
        split = cost("backward_b", r, c) + cost("backward_w", r, c)
        times.append(cost("forward", r, c) + (split if "backward_b" in names else cost("backward", r, c)))
    worst = max(times, default=0.0)
    critical = times.index(worst) if times else -1
    return [
        StageReport(s, r, c, work.partition.counts[s], times[s], work.activation[s], s == critical)
        for s, (r, c) in enumerate(exp.rank_of_stage())
    ]


@dataclass
class CheckResult:
    """What `ppdsl check` finds: the diagnostics, and for a valid schedule its makespan, bubble and memory."""

    path: str
    pp: int
    vpp: int
    microbatches: int
    diagnostics: list[Diagnostic] = field(default_factory=list)
    defn: ScheduleDef | None = None
    expansion: Expansion | None = None
    execution: Execution | None = None

    @property
    def errors(self) -> list[Diagnostic]:
        """The diagnostics themselves (every finding is an error): the same list, not a copy."""
        return self.diagnostics

    @property
    def valid(self) -> bool:
        return self.execution is not None and not self.diagnostics

    @property
    def exit_code(self) -> int:
        return EXIT_VALID if self.valid else exit_code(self.diagnostics)

    @property
    def completed(self) -> bool:
        """Every rank ran its whole order (the schedule may still be over a memory limit)."""
        return self.execution is not None and self.execution.completed

    @property
    def makespan(self) -> float | None:
        return self.execution.makespan if self.completed else None

    @property
    def bubble_ratio(self) -> float | None:
        """Idle time over the ranks' time less their recomputes (`execution.bubble_ratio`; `recompute_ratio` reports
        recomputing beside it)."""
        return self.execution.bubble_ratio if self.completed else None

    @property
    def recompute_ratio(self) -> float | None:
        """Recompute time over pp x makespan: the overhead of recomputing, beside the bubble."""
        return self.execution.recompute_ratio if self.completed else None

    @property
    def has_recompute(self) -> bool:
        """Does the schedule run recomputes (reports show their column only then)?"""
        return self.completed and any(s.recompute > 0 for s in self.execution.ranks)

    @property
    def ranks(self) -> list[RankReport]:
        if not self.completed or self.expansion is None:
            return []
        ex, limits = self.execution, self.expansion.memory_limit
        return [
            RankReport(
                s.rank,
                s.jobs,
                s.busy,
                s.idle,
                idle_share(s.idle, s.recompute, ex.makespan) if ex.makespan else 0.0,
                s.peak_activations,
                s.peak_time,
                limits[s.rank],
                s.recompute,
                s.recompute / ex.makespan if ex.makespan else 0.0,
                s.collective,
                s.exposed_collective,
            )
            for s in ex.ranks
        ]

    @property
    def stages(self) -> list[StageReport]:
        """Each virtual stage's layers and work, when the model is partitioned (else empty)."""
        return stage_reports(self.expansion) if self.expansion is not None else []

    @property
    def peak_activations(self) -> list[float]:
        """Per rank, in the expansion's memory unit."""
        return [r.peak_activations for r in self.ranks]

    @property
    def host_peak(self) -> float | None:
        """All ranks' offloaded memory at its highest, for a schedule with memory actions (else None)."""
        if not self.completed or self.expansion is None or MemoryActions.of(self.expansion) is None:
            return None
        return self.execution.host_peak

    def to_dict(self) -> dict:
        return {
            "schedule": self.defn.name if self.defn else None,
            "file": self.path,
            "pp": self.pp,
            "vpp": self.vpp,
            "microbatches": self.microbatches,
            "valid": self.valid,
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "memory_unit": self.expansion.memory_unit if self.expansion else None,
            "makespan": self.makespan,
            "bubble_ratio": self.bubble_ratio,
            "recompute_ratio": self.recompute_ratio,
            "ranks": [r.to_dict() for r in self.ranks],
            **({"stages": [s.to_dict() for s in self.stages]} if self.stages else {}),
            **(
                {"host_peak": self.host_peak, "host_limit": self.expansion.host_limit}
                if self.host_peak is not None
                else {}
            ),
        }


# A check of an execution: (expansion, execution, rendezvous) -> what it finds.
ScheduleRun = Callable[[Expansion, Execution, bool], list[Diagnostic]]


@dataclass(frozen=True)
class ScheduleCheck:
    """A check of the whole schedule's execution: the codes it reports, and what it runs."""

    codes: tuple[str, ...]
    run: ScheduleRun


SCHEDULE_CHECKS: list[ScheduleCheck] = []  # run in this order on every execution (the rendezvous flag given)


def schedule_check(*codes: str) -> Callable[[ScheduleRun], ScheduleRun]:
    """Register a check of every execution (stopped or complete) that reports `codes`."""

    def register(run: ScheduleRun) -> ScheduleRun:
        SCHEDULE_CHECKS.append(ScheduleCheck(codes, run))
        return run

    return register


def check(scenario: Scenario, record_comms: bool = False, record_visits: bool = False) -> CheckResult:
    """Prove the scenario's schedule complete, ordered and deadlock-free for its sizes, and measure it (never
    raises for a wrong schedule: the diagnostics are in the result). `record_visits` keeps the order in which the
    execution ran the jobs, from which `Execution.merged_order` merges every rank's order into one (a plan
    specification records it: `ppdsl.analysis.plan_spec`); it costs the execution about a third more."""
    # the name as given until the path is known; a resolved schedule's own path (its str() would be the repr of
    # every compiled item: 20 ms for a large table file, on every check the language server makes)
    named = scenario.schedule.path if isinstance(scenario.schedule, ScheduleDef) else str(scenario.schedule)
    result = CheckResult(named, scenario.pp, scenario.vpp, scenario.microbatches)
    try:
        result.path = scenario.path
        result.defn = scenario.definition()
        result.expansion = scenario.expansion()
    except DiagnosticError as err:
        result.diagnostics.extend(err.diagnostics)
        return result
    return check_expansion(result.expansion, scenario.rendezvous, result, record_comms, record_visits)


def check_expansion(
    exp: Expansion,
    rendezvous: bool = False,
    result: CheckResult | None = None,
    record_comms: bool = False,
    record_visits: bool = False,
) -> CheckResult:
    """Check an expansion; `record_comms` keeps the execution's transfer log (`ppdsl.reports.simulate` reads it)."""
    if result is None:
        result = CheckResult(exp.defn.path, exp.pp, exp.vpp, exp.microbatches, defn=exp.defn, expansion=exp)
    problems = check_ranks(exp)
    result.diagnostics.extend(problems)
    if problems:
        return result
    ex = execute(
        exp, rendezvous=rendezvous, used=used_types(exp), record_visits=record_visits, record_comms=record_comms
    )
    result.execution = ex
    for whole in SCHEDULE_CHECKS:
        result.diagnostics.extend(whole.run(exp, ex, rendezvous))
    return result


# ------------------------------------------------------------------------------------- S103 / S105: deadlocks


@schedule_check("S103", "S105", "E074")
def deadlock(exp: Expansion, ex: Execution, rendezvous: bool) -> list[Diagnostic]:
    """S103 (a rank waits for its own later job), S105 (ranks wait for each other) or E074 (they do, and one of
    them waits in a collective): the execution stopped."""
    return [] if ex.completed else [_deadlock_diagnostic(exp, ex, rendezvous)]


def deadlock_cycle(ex: Execution) -> list[Wait]:
    """The waits a deadlock diagnostic names, one per rank of the cycle (the language server points at each)."""
    return ex.deadlock or ex.blocked[:1]


def _deadlock_diagnostic(exp: Expansion, ex: Execution, rendezvous: bool) -> Diagnostic:
    cycle = deadlock_cycle(ex)
    first = cycle[0]
    site = exp.defn.sites[exp.sites[first.rank][first.step]]
    if len(cycle) == 1 and first.peer == first.rank:
        message = f"rank {first.rank} waits for itself: `{first.job}` needs `{first.peer_job}`, which runs later"
        code = "S103"
    else:
        ranks = " -> ".join(str(w.rank) for w in cycle) + f" -> {cycle[0].rank}"
        message = f"deadlock: ranks {ranks} wait for each other"
        code = "S105"
    joined = next((w for w in cycle if w.kind == "collective"), None)
    if joined is not None:  # the cycle passes through a collective: say so, where a member waits in it
        first = joined
        site = exp.defn.sites[exp.sites[first.rank][first.step]]
        message = f"deadlock through the collective `{first.job}`: ranks {ranks} wait for each other"
        code = "E074"
    notes = [describe_wait(w) for w in cycle]
    if joined is not None:
        notes += [_sequence(exp, w) for w in cycle]
    marks = {w.rank: w.step for w in ex.blocked}
    # the note is indented by 5 columns when rendered: the grid fits the rest of the terminal (or 80 columns)
    grid = text_grid(exp, marks, columns=terminal_columns() - 5)
    notes.append("rank x step grid (`>X<` marks where each rank is stuck):\n" + grid)
    if joined is not None:
        help_text = (
            f"a member goes on from `{joined.job}` only when every member has joined it: move it after the jobs "
            "its peers wait for (on each member, after its last send and receive of the step)"
        )
    elif rendezvous and any(w.kind == "send" for w in cycle):
        help_text = (
            "with blocking sends both ends of a link must reach their send and receive in the same order; "
            "post receives earlier, or check without `--rendezvous` if sends are stream-ordered"
        )
    else:
        help_text = "reorder the jobs so that every receive has a send before it on the peer rank"
    return Diagnostic(
        code,
        message,
        site.span,
        label=f"rank {first.rank} is stuck here at step {first.step} (`{first.job}`)",
        help=help_text,
        notes=notes,
    )


def _sequence(exp: Expansion, w: Wait, before: int = 4) -> str:
    """A rank's jobs up to where it is stuck (`>X<`) and the next one: the sequence a deadlock note shows."""
    jobs = exp.jobs[w.rank]
    shown = [
        f">{exp.label(jobs[i])}<" if i == w.step else exp.label(jobs[i])
        for i in range(max(0, w.step - before), min(len(jobs), w.step + 2))
    ]
    return f"rank {w.rank}'s order: {'... ' if w.step > before else ''}{' '.join(shown)}"


def describe_wait(w: Wait) -> str:
    if w.kind == "collective":
        return f"rank {w.rank} at step {w.step} waits in `{w.job}` for rank {w.peer} to join it"
    if w.kind == "send":
        return f"rank {w.rank} at step {w.step} (`{w.job}`) waits for rank {w.peer} to receive it in `{w.peer_job}`"
    return f"rank {w.rank} at step {w.step} (`{w.job}`) waits for `{w.peer_job}` from rank {w.peer}"


# ------------------------------------------------------------------------------------- S106: over the memory limit


@schedule_check("S106")
def memory_over_limit(exp: Expansion, ex: Execution, rendezvous: bool) -> list[Diagnostic]:
    """S106 for a completed execution (an execution that stopped is a deadlock, and its peaks are partial)."""
    return memory_diagnostics(exp, ex) if ex.completed else []


def memory_diagnostics(exp: Expansion, ex: Execution) -> list[Diagnostic]:
    """S106: a rank over its memory limit, at the job that first takes it over (one diagnostic per such job's
    statement, naming every rank it takes over)."""
    over: dict[int, list[tuple[int, int, float, float, float]]] = {}  # site -> [(rank, step, time, level, limit)]
    for stats in ex.ranks:
        limit = exp.memory_limit[stats.rank]
        if limit is None or stats.peak_activations <= limit + 1e-9:
            continue
        rank = stats.rank
        jobs = [(*exp.decode(code), ex.start[rank][i], ex.end[rank][i]) for i, code in enumerate(exp.jobs[rank])]
        sent = ex.arrivals[rank] if ex.arrivals is not None else None
        for lv in rank_levels(exp, rank, jobs, sent):  # the accounting of the peak: copies counted when they happen
            if lv.level > limit + 1e-9:
                site = exp.sites[rank][lv.step]
                over.setdefault(site, []).append((rank, lv.step, lv.time, lv.level, limit))
                break
    return [_memory_diagnostic(exp, site, found) for site, found in over.items()]


# --------------------------------------------------------------------------- S119: over the host's memory limit


@schedule_check("S119")
def host_over_limit(exp: Expansion, ex: Execution, rendezvous: bool) -> list[Diagnostic]:
    """S119: the ranks' offloads together hold more host memory than `memory host limit`, at the offload whose
    copy takes the host over it."""
    limit = exp.host_limit
    if limit is None or not ex.completed or ex.host_peak <= limit + 1e-9:
        return []
    first = next(lv for lv in host_levels(exp, ex.start, ex.end) if lv.level > limit + 1e-9)

    def amount(value: float) -> str:
        return format_bytes(value) if exp.memory_unit == "bytes" else count(value, "activation")

    job = exp.label(exp.jobs[first.rank][first.step])
    notes = [f"the host holds {amount(ex.host_peak)} at its peak, at time {ex.host_peak_time:g}"]
    span = exp.defn.host_limit.span if exp.defn.host_limit is not None else None
    if span is not None:
        notes.append(f"the limit is the schedule's `memory host limit`, at {span.file}:{span.line}")
    return [
        Diagnostic(
            "S119",
            f"offloads hold more host memory than the host limit of {amount(limit)}",
            exp.defn.sites[exp.sites[first.rank][first.step]].span,
            label=f"`{job}` (step {first.step}) on rank {first.rank} takes the host to {amount(first.level)} "
            f"at time {first.time:g}",
            help="reload earlier, offload fewer micro-batches (or a smaller `fraction`), or raise the limit",
            notes=notes,
        )
    ]


def _memory_diagnostic(exp: Expansion, site: int, found: list[tuple[int, int, float, float, float]]) -> Diagnostic:
    def amount(value: float) -> str:
        return format_bytes(value) if exp.memory_unit == "bytes" else count(value, "activation")

    def crossing(rank: int, step: int, time: float, level: float) -> str:
        return (
            f"`{exp.label(exp.jobs[rank][step])}` (step {step}) takes rank {rank} to {amount(level)} at time {time:g}"
        )

    ranks = [r for r, *_ in found]
    limits = {limit for *_, limit in found}
    if len(found) == 1:
        rank, _, _, _, limit = found[0]
        message = f"rank {rank} holds more than its limit of {amount(limit)}"
    elif len(limits) == 1:
        message = f"{numbered('rank', ranks)} hold more than their limit of {amount(limits.pop())}"
    else:
        message = f"{numbered('rank', ranks)} hold more than their limits"
    notes = [crossing(r, step, time, level) for r, step, time, level, _ in found[1:MAX_NOTES]]
    if len(found) > MAX_NOTES:
        notes.append(f"and {count(len(found) - MAX_NOTES, 'more rank')}")
    limit_span = exp.defn.memory_limit.span if exp.defn.memory_limit is not None else None
    if exp.memory_limit_given:
        notes.append("the limit is `--memory-limit`'s")
    elif limit_span is not None:
        notes.append(f"the limit is the schedule's `memory limit`, at {limit_span.file}:{limit_span.line}")
    rank, step, time, level, _ = found[0]
    return Diagnostic(
        "S106",
        message,
        exp.defn.sites[site].span,
        label=crossing(rank, step, time, level),
        help="run backwards earlier (fewer warm-up forwards) or raise the limit",
        notes=notes,
    )
