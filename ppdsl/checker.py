"""`ppdsl check`: load -> expand -> per-rank checks -> cross-rank execution -> memory, as one report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ppdsl.checks import check_ranks, used_types
from ppdsl.diagnostics import Diagnostic, DiagnosticError, Severity
from ppdsl.execution import Execution, Wait, execute
from ppdsl.expand import expand
from ppdsl.grid import text_grid
from ppdsl.ir import Expansion, ScheduleDef
from ppdsl.resolve import load
from ppdsl.units import format_bytes

if TYPE_CHECKING:
    from ppdsl.costs import CostSpec

EXIT_VALID, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


@dataclass
class CheckResult:
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
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]

    @property
    def valid(self) -> bool:
        return self.execution is not None and not self.errors

    @property
    def exit_code(self) -> int:
        if self.valid:
            return EXIT_VALID
        if any(d.code.startswith("E") for d in self.errors):
            return EXIT_USAGE
        return EXIT_INVALID

    def to_dict(self) -> dict:
        ex = self.execution
        out = {
            "schedule": self.defn.name if self.defn else None,
            "file": self.path,
            "pp": self.pp,
            "vpp": self.vpp,
            "microbatches": self.microbatches,
            "valid": self.valid,
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "memory_unit": self.expansion.memory_unit if self.expansion else None,
            "makespan": ex.makespan if ex and ex.completed else None,
            "bubble_ratio": ex.bubble_ratio if ex and ex.completed else None,
            "ranks": [],
        }
        if ex and ex.completed and self.expansion:
            limits = self.expansion.memory_limit
            out["ranks"] = [
                {
                    "rank": s.rank,
                    "jobs": s.jobs,
                    "busy": s.busy,
                    "idle": s.idle,
                    "bubble_ratio": s.idle / ex.makespan if ex.makespan else 0.0,
                    "peak_activations": s.peak_activations,
                    "peak_time": s.peak_time,
                    "memory_limit": limits[s.rank],
                }
                for s in ex.ranks
            ]
        return out


def check(
    path: str | Path,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: dict | None = None,
    rendezvous: bool = False,
    costs: CostSpec | dict[str, float] | None = None,
    model: str | None = None,
    batch_size: int | None = None,
    memory_limit: float | None = None,
) -> CheckResult:
    """Prove a schedule complete, ordered and deadlock-free for these sizes, and measure it.

    With `model` (a `module:function`, or "builtin"), activation memory is measured in bytes on the model's
    real program at `batch_size` (this imports paddle); `memory_limit` then is in bytes too.
    """
    result = CheckResult(str(path), pp, vpp, microbatches)
    try:
        result.defn = load(path)
        if isinstance(costs, dict):  # `--cost`-style pairs: job types, `latency`, `bandwidth`
            from ppdsl.costs import CostSpec

            costs = CostSpec(costs)
        if costs is not None:
            costs.check_names(result.defn)
        result.expansion = expand(result.defn, pp, microbatches, vpp, params)
        if costs is not None:
            costs.apply(result.expansion)
        if model is not None:
            from ppdsl.runtime.memory import apply_model_memory

            apply_model_memory(result.expansion, None if model == "builtin" else model, batch_size or 0)
        if memory_limit is not None:
            result.expansion.memory_limit = [memory_limit] * pp
    except DiagnosticError as err:
        result.diagnostics.extend(err.diagnostics)
        return result
    return check_expansion(result.expansion, rendezvous, result)


def check_expansion(
    exp: Expansion, rendezvous: bool = False, result: CheckResult | None = None, record_comms: bool = False
) -> CheckResult:
    """Check an expansion; `record_comms` keeps the execution's transfer log (`ppdsl.simulate` reads it)."""
    if result is None:
        result = CheckResult(exp.defn.path, exp.pp, exp.vpp, exp.microbatches, defn=exp.defn, expansion=exp)
    problems = check_ranks(exp)
    result.diagnostics.extend(problems)
    if any(d.is_error for d in problems):
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
