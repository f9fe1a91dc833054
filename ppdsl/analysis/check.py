"""`ppdsl check`: a scenario's expansion -> per-rank checks -> cross-rank execution -> memory, as one report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from ppdsl.analysis.checks import check_ranks, used_types
from ppdsl.analysis.execution import Execution, Wait, execute
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.grid import text_grid
from ppdsl.common.codes import EXIT_VALID, exit_code
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.units import format_bytes
from ppdsl.language.ir import ScheduleDef

if TYPE_CHECKING:
    from ppdsl.analysis.scenario import Scenario


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

    def to_dict(self) -> dict:
        return asdict(self)


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
        """The diagnostics (every finding is an error)."""
        return list(self.diagnostics)

    @property
    def valid(self) -> bool:
        return self.execution is not None and not self.errors

    @property
    def exit_code(self) -> int:
        return EXIT_VALID if self.valid else exit_code(self.errors or self.diagnostics)

    @property
    def completed(self) -> bool:
        """Every rank ran its whole order (the schedule may still be over a memory limit)."""
        return self.execution is not None and self.execution.completed

    @property
    def makespan(self) -> float | None:
        return self.execution.makespan if self.completed else None

    @property
    def bubble_ratio(self) -> float | None:
        return self.execution.bubble_ratio if self.completed else None

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
                s.idle / ex.makespan if ex.makespan else 0.0,
                s.peak_activations,
                s.peak_time,
                limits[s.rank],
            )
            for s in ex.ranks
        ]

    @property
    def peak_activations(self) -> list[float]:
        """Per rank, in the expansion's memory unit."""
        return [r.peak_activations for r in self.ranks]

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
            "ranks": [r.to_dict() for r in self.ranks],
        }


def check_scenario(scenario: Scenario, record_comms: bool = False) -> CheckResult:
    """Prove the scenario's schedule complete, ordered and deadlock-free for its sizes, and measure it."""
    result = CheckResult(str(scenario.schedule), scenario.pp, scenario.vpp, scenario.microbatches)
    try:
        result.path = scenario.path
        result.defn = scenario.definition()
        result.expansion = scenario.expansion()
    except DiagnosticError as err:
        result.diagnostics.extend(err.diagnostics)
        return result
    return check_expansion(result.expansion, scenario.rendezvous, result, record_comms)


def check_expansion(
    exp: Expansion, rendezvous: bool = False, result: CheckResult | None = None, record_comms: bool = False
) -> CheckResult:
    """Check an expansion; `record_comms` keeps the execution's transfer log (`ppdsl.reports.simulate` reads it)."""
    if result is None:
        result = CheckResult(exp.defn.path, exp.pp, exp.vpp, exp.microbatches, defn=exp.defn, expansion=exp)
    problems = check_ranks(exp)
    result.diagnostics.extend(problems)
    if problems:
        return result
    ex = execute(exp, rendezvous=rendezvous, used=used_types(exp), record_comms=record_comms)
    result.execution = ex
    if not ex.completed:
        result.diagnostics.append(_deadlock_diagnostic(exp, ex, rendezvous))
        return result
    for stats in ex.ranks:
        limit = exp.memory_limit[stats.rank]
        if limit is not None and stats.peak_activations > limit + 1e-9:
            if exp.memory_unit == "bytes":
                held = f"{format_bytes(stats.peak_activations)} of activations, over its limit of {format_bytes(limit)}"
            else:
                held = f"{stats.peak_activations:g} activations, over its limit of {limit:g}"
            result.diagnostics.append(
                Diagnostic(
                    "S106",
                    f"rank {stats.rank} holds {held}",
                    exp.defn.memory_limit_span,
                    label=f"peak at time {stats.peak_time:g}",
                    help="run backwards earlier (fewer warm-up forwards) or raise `memory limit`",
                )
            )
    return result


def _deadlock_diagnostic(exp: Expansion, ex: Execution, rendezvous: bool) -> Diagnostic:
    cycle = ex.deadlock or ex.blocked[:1]
    first = cycle[0]
    site = exp.defn.sites[exp.sites[first.rank][first.step]]
    if len(cycle) == 1 and first.peer == first.rank:
        message = f"rank {first.rank} waits for itself: `{first.job}` needs `{first.peer_job}`, which runs later"
        code = "S103"
    else:
        ranks = " -> ".join(str(w.rank) for w in cycle) + f" -> {cycle[0].rank}"
        message = f"deadlock: ranks {ranks} wait for each other"
        code = "S105"
    notes = [_describe(w) for w in cycle]
    marks = {w.rank: w.step for w in ex.blocked}
    notes.append("rank x step grid (`>X<` marks where each rank is stuck):\n" + text_grid(exp, marks))
    if rendezvous and any(w.kind == "send" for w in cycle):
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


def _describe(w: Wait) -> str:
    if w.kind == "send":
        return f"rank {w.rank} at step {w.step} (`{w.job}`) waits for rank {w.peer} to receive it in `{w.peer_job}`"
    return f"rank {w.rank} at step {w.step} (`{w.job}`) waits for `{w.peer_job}` from rank {w.peer}"
