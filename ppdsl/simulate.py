"""Simulation: a checked schedule run under a cost model, as records the pictures and reports read.

The engine is `ppdsl.execution` (one compute stream per rank, a send stream per rank carrying each activation or
gradient for latency + size / bandwidth, receives waiting for arrivals). This module adds what reports need:
cost overrides (`--cost forward=1,backward=2` or a calibrated cost file from `ppdsl calibrate`), per-job
records, and each rank's in-flight activations over time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ppdsl.checker import CheckResult, check_expansion
from ppdsl.costs import apply_costs, load_costs
from ppdsl.diagnostics import DiagnosticError
from ppdsl.execution import Execution, Transfer
from ppdsl.expand import expand
from ppdsl.ir import Expansion
from ppdsl.resolve import load


@dataclass(frozen=True)
class JobRecord:
    rank: int
    step: int
    type: str
    chunk: int
    microbatch: int
    stage: int
    label: str
    start: float
    end: float


@dataclass
class Simulation:
    expansion: Expansion
    execution: Execution
    check: CheckResult

    @property
    def makespan(self) -> float:
        return self.execution.makespan

    @property
    def bubble_ratio(self) -> float:
        return self.execution.bubble_ratio

    @property
    def transfers(self) -> list[Transfer]:
        return self.execution.transfers or []

    def jobs(self) -> Iterator[JobRecord]:
        exp, ex = self.expansion, self.execution
        names = exp.type_names
        for r, codes in enumerate(exp.jobs):
            for i, code in enumerate(codes):
                t, c, mb = exp.decode(code)
                stage = exp.stage_of[r][c]
                yield JobRecord(r, i, names[t], c, mb, stage, exp.label(code), ex.start[r][i], ex.end[r][i])

    def memory_timeline(self, rank: int) -> list[tuple[float, float]]:
        """(time, in-flight activations) after each job of `rank` ends: a step function starting at (0, 0)."""
        exp = self.expansion
        level, points = 0.0, [(0.0, 0.0)]
        for i, code in enumerate(exp.jobs[rank]):
            t, c, _ = exp.decode(code)
            delta = exp.mem_delta[t][rank][c]
            if delta:
                level += delta
                points.append((self.execution.end[rank][i], level))
        return points


def simulate(
    path: str | Path,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: dict | None = None,
    costs: dict[str, float] | None = None,
    cost_file: str | Path | None = None,
    rendezvous: bool = False,
) -> Simulation:
    """Load, expand, check and simulate; raises DiagnosticError when the schedule is not valid."""
    exp = expand(load(path), pp, microbatches, vpp, params, costs)
    if cost_file is not None:
        apply_costs(exp, load_costs(cost_file))
    return simulate_expansion(exp, rendezvous)


def simulate_expansion(exp: Expansion, rendezvous: bool = False) -> Simulation:
    # one execution both checks and times: the transfer log costs far less than running every rank twice
    result = check_expansion(exp, rendezvous, record_comms=True)
    if not result.valid:
        raise DiagnosticError(result.errors or result.diagnostics)
    return Simulation(exp, result.execution, result)
