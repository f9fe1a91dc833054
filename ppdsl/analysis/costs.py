"""Costs from outside the schedule: a cost file (`--costs FILE`, written by `ppdsl calibrate`) and `--cost k=v,...`
pairs, applied over the schedule's own `cost` / `comm` declarations (later wins). Every command that takes costs
(`check`, `trace`, `plot`, `compare`, `sweep`) goes through `CostSpec`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import COSTS_BYTES, read_text
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
        data = json.loads(read_text(path, COSTS_BYTES, "E008", "cost file "))
    except ValueError as err:
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

    def apply(self, exp: Expansion) -> None:
        """The cost file, then the command line's pairs, over the expansion's own table."""
        if self.file is not None:
            apply_costs(exp, self.file)
        if self.pairs:
            jobs = {k: v for k, v in self.pairs.items() if k not in COMM_KEYS}
            comm = {k: v for k, v in self.pairs.items() if k in COMM_KEYS}
            apply_costs(exp, {"costs": jobs, **comm})
