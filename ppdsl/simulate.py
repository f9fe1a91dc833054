"""Simulation: a checked schedule run under a cost model, as records the pictures and reports read.

The engine is `ppdsl.execution` (one compute stream per rank, a send stream per rank carrying each activation or
gradient for latency + size / bandwidth, receives waiting for arrivals). This module adds what reports need:
cost overrides (`--cost forward=1,backward=2` or a calibrated cost file from `ppdsl calibrate`), per-job
records, and each rank's in-flight activations over time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ppdsl.checker import CheckResult, check_expansion
from ppdsl.diagnostics import Diagnostic, DiagnosticError
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


def load_costs(path: str | Path) -> dict:
    """A cost file written by `ppdsl calibrate` (JSON): {"costs": {type: time}, "stages": {stage: {type: time}},
    "latency": time, "bandwidth": units per time}; every key optional."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DiagnosticError([Diagnostic("E008", f"cannot read cost file `{path}`: {err}")]) from None
    if not isinstance(data, dict):
        raise DiagnosticError([Diagnostic("E008", f"cost file `{path}` must hold a JSON object")])
    return data


def apply_costs(exp: Expansion, costs: dict) -> None:
    """Override the expansion's cost table in place: per type, then per stage, then communication."""
    names = exp.type_names
    flat = costs.get("costs", {})
    for t, name in enumerate(names):
        if name in flat:
            for r in range(exp.pp):
                exp.cost[t][r] = [float(flat[name])] * exp.vpp
    for stage_key, per_type in (costs.get("stages") or {}).items():
        stage = int(stage_key)
        for r, row in enumerate(exp.stage_of):
            for c, s in enumerate(row):
                if s == stage:
                    for name, value in per_type.items():
                        if name in names:
                            exp.cost[names.index(name)][r][c] = float(value)
    if "latency" in costs:
        exp.latency = float(costs["latency"])
    if "bandwidth" in costs:
        exp.bandwidth = float(costs["bandwidth"]) or None


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
