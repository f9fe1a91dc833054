"""Simulation: a checked schedule run under a cost model, as records the pictures and reports read.

The engine is `ppdsl.analysis.execution` (one compute stream per rank, a send stream per rank carrying each
activation or gradient for latency + size / bandwidth, receives waiting for arrivals). This module turns one
execution into what reports need: per-job records, the transfer log and each rank's in-flight activations.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ppdsl.analysis.check import CheckResult, check_expansion
from ppdsl.analysis.execution import Execution
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import memory_curve
from ppdsl.analysis.records import JobRecord, Transfer
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError


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
        """(time, in-flight activations) after each change of `rank`'s level (a job's end; a copy's end or start
        for offloads and reloads): a step function starting at (0, 0)."""
        exp, ex = self.expansion, self.execution
        start, end = ex.start[rank], ex.end[rank]
        steps = ((t, c, mb, start[i], end[i]) for i, (t, c, mb) in enumerate(map(exp.decode, exp.jobs[rank])))
        return memory_curve(exp, rank, steps, ex.arrivals[rank] if ex.arrivals is not None else None)


def simulate(scenario: Scenario) -> Simulation:
    """Expand, check and simulate the scenario; raises DiagnosticError when its schedule is not valid."""
    return simulate_expansion(scenario.expansion(), scenario.rendezvous)


def simulate_expansion(exp: Expansion, rendezvous: bool = False) -> Simulation:
    # one execution both checks and times: the transfer log costs far less than running every rank twice
    result = check_expansion(exp, rendezvous, record_comms=True)
    if not result.valid:
        raise DiagnosticError(result.errors or result.diagnostics)
    return Simulation(exp, result.execution, result)
