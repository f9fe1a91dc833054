"""Costs from outside the schedule: a cost file (`--costs FILE`, written by `ppdsl calibrate`) and `--cost k=v,...`
pairs, applied over the schedule's own `cost` / `comm` declarations (later wins). Every command that takes costs
(`check`, `trace`, `plot`, `compare`, `sweep`) goes through `CostSpec`, which `ppdsl.analysis.expand.expand`
applies while it builds the expansion.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.units import US_PER, US_PER_COST_UNIT
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.resolve import COMM_KEYS


def parse_cost_pairs(text: str | None) -> dict[str, float] | None:
    """`forward=1,backward=2,latency=0.1` -> {name: value}; raises DiagnosticError (E007)."""
    if not text:
        return None
    pairs = {}
    for part in text.split(","):
        key, sep, raw = part.partition("=")
        try:
            if not sep:
                raise ValueError(part)
            pairs[key.strip()] = float(raw)
        except ValueError:
            raise DiagnosticError(
                [Diagnostic("E007", f"bad cost `{part}`", help="write `--cost forward=1,backward=2`")]
            ) from None
    return pairs


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


@dataclass(frozen=True)
class CostTable:
    """What jobs and links cost at some sizes: each job's time [type][rank][chunk], a transfer's latency and the
    links' bandwidth (units per time; None: unlimited)."""

    jobs: list[list[list[float]]]
    latency: float
    bandwidth: float | None


def apply_costs(base: CostTable, costs: dict, names: Sequence[str], stage_of: Sequence[Sequence[int]]) -> CostTable:
    """A cost file's contents over `base`: per type, then per stage, then communication. A new table (`base` is
    not changed)."""
    jobs = [[list(per_chunk) for per_chunk in per_rank] for per_rank in base.jobs]
    flat = costs.get("costs", {})
    for t, name in enumerate(names):
        if name in flat:
            for per_chunk in jobs[t]:
                per_chunk[:] = [float(flat[name])] * len(per_chunk)
    for stage_key, per_type in (costs.get("stages") or {}).items():
        stage = int(stage_key)
        for r, row in enumerate(stage_of):
            for c, s in enumerate(row):
                if s == stage:
                    for name, value in per_type.items():
                        if name in names:
                            jobs[names.index(name)][r][c] = float(value)
    latency = float(costs["latency"]) if "latency" in costs else base.latency
    bandwidth = (float(costs["bandwidth"]) or None) if "bandwidth" in costs else base.bandwidth
    return CostTable(jobs, latency, bandwidth)


def unknown_cost_error(unknown: list[str], names: Sequence[str]) -> DiagnosticError:
    known = ", ".join(f"`{n}`" for n in [*names, *COMM_KEYS])
    return DiagnosticError(
        [Diagnostic("E007", f"`--cost` names no job type `{unknown[0]}`", help=f"known names: {known}")]
    )


@dataclass
class CostSpec:
    """What the command line says about costs: `--cost` pairs and the contents of `--costs FILE`."""

    pairs: dict[str, float] | None = None
    file: dict[str, Any] | None = None

    @classmethod
    def read(cls, pairs: dict[str, float] | None, path: str | Path | None) -> CostSpec:
        return cls(pairs or None, load_costs(path) if path is not None else None)

    @property
    def us_per_unit(self) -> float:
        """Microseconds per simulated time unit: 1 ms for abstract costs, the file's unit (default s) for a file."""
        if self.file is None:
            return US_PER_COST_UNIT
        unit = str(self.file.get("unit", "s"))
        if unit not in US_PER:
            raise DiagnosticError(
                [Diagnostic("E008", f"unknown time unit `{unit}` in the cost file", help="write `s`, `ms` or `us`")]
            )
        return US_PER[unit]

    @property
    def measured(self) -> bool:
        return self.file is not None

    def unknown_names(self, names: set[str]) -> list[str]:
        return [k for k in self.pairs or {} if k not in names and k not in COMM_KEYS]

    def check_names(self, defn: ScheduleDef) -> None:
        """A pair naming no job type of the schedule is a mistake, not something to ignore."""
        unknown = self.unknown_names({jt.name for jt in defn.job_types})
        if unknown:
            raise unknown_cost_error(unknown, [jt.name for jt in defn.job_types])

    def apply(self, base: CostTable, names: Sequence[str], stage_of: Sequence[Sequence[int]]) -> CostTable:
        """The cost file, then the command line's pairs, over the schedule's own table (`ppdsl.analysis.expand`
        builds an expansion with the result)."""
        table = base
        if self.file is not None:
            table = apply_costs(table, self.file, names, stage_of)
        if self.pairs:
            jobs = {k: v for k, v in self.pairs.items() if k not in COMM_KEYS}
            comm = {k: v for k, v in self.pairs.items() if k in COMM_KEYS}
            table = apply_costs(table, {"costs": jobs, **comm}, names, stage_of)
        return table
