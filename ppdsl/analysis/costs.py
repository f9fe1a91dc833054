"""Costs from outside the schedule: a cost file (`--costs FILE`, written by `ppdsl calibrate`) and `--cost k=v,...`
pairs, applied over the schedule's own `cost` / `comm` declarations (later wins). Every command that takes costs
(`check`, `trace`, `plot`, `compare`, `sweep`) goes through `CostSpec`, which `ppdsl.analysis.expand.expand`
applies while it builds the expansion.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import COSTS_BYTES, read_text
from ppdsl.common.jsontext import JsonError, parse_json
from ppdsl.common.text import shortened
from ppdsl.common.units import US_PER, US_PER_COST_UNIT
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.resolve import COMM_KEYS
from ppdsl.plan.kinds import KINDS

# The largest cost, latency or bandwidth accepted: a million seconds (or 10^15 of any unit). Past it, sums over a
# schedule lose the precision that makes equal makespans compare equal, and a synthesized file could not write
# the number in the language's decimal notation. Zero is a cost: a job that takes no time (the optimizer's
# default), no latency, or no bandwidth term (a transfer then takes its latency alone).
MAX_COST = 1e15
COST_RANGE = "a finite number from 0 to 1e15"
# What a cost file (as `ppdsl calibrate` writes it) holds; `samples` is the count of measured jobs (not used).
COST_FILE_KEYS = ("unit", "costs", "stages", "latency", "bandwidth", "samples")
COST_FILE_FORM = '`{"costs": {"forward": 1}, "stages": {"0": {"forward": 2}}, "latency": 0.1, "unit": "s"}`'
MAX_SHOWN_KEY = 40  # characters of a key quoted in a message


def cost_value_problem(value: object, key: str = "") -> str | None:
    """Why `value` is not a cost, latency or (`key` "bandwidth") bandwidth; None if it is one: not a number,
    NaN, infinite, negative or above MAX_COST, or a bandwidth so small that a transfer would take longer."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is {_json_kind(value)}, not a number"
    try:
        number = float(value)
    except OverflowError:
        return "is over 1e15"
    if math.isnan(number):
        return "is not a number (NaN)"
    if number < 0:
        return f"is negative ({number:g})"
    if number > MAX_COST:
        return "is over 1e15"
    if key == "bandwidth" and 0 < number < 1 / MAX_COST:
        return "is below 1e-15 (0 means no bandwidth term)"
    return None


def _json_kind(value: object) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "a number"


def _key(text: str) -> str:
    """A key of the user's file, as a message quotes it (long ones cut)."""
    return shortened(text, MAX_SHOWN_KEY)


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`did you mean `forward`? ` (with the trailing space) when a known name is close to `name`; else ``."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean `{close[0]}`? " if close else ""


def parse_cost_pairs(text: str | None) -> dict[str, float] | None:
    """`forward=1,backward=2,latency=0.1` -> {name: value}; raises DiagnosticError (E007) for a pair that is
    not `name=number`, or a number that is not a cost (NaN, infinite, negative, over MAX_COST)."""
    if not text:
        return None
    pairs = {}
    for part in text.split(","):
        key, sep, raw = part.partition("=")
        try:
            if not sep:
                raise ValueError(part)
            value = float(raw)
        except ValueError:
            raise DiagnosticError(
                [Diagnostic("E007", f"bad cost `{part}`", help="write `--cost forward=1,backward=2`")]
            ) from None
        problem = cost_value_problem(value, key.strip())
        if problem is not None:
            raise DiagnosticError(
                [Diagnostic("E007", f"bad cost `{part}`: `{key.strip()}` {problem}", help=f"give {COST_RANGE}")]
            )
        pairs[key.strip()] = value
    return pairs


def load_costs(path: str | Path) -> dict:
    """A cost file written by `ppdsl calibrate` (JSON): {"costs": {type: time}, "stages": {stage: {type: time}},
    "latency": time, "bandwidth": units per time, "unit": "s"}; every key optional, at least one cost. Raises
    DiagnosticError (E008) for a file that cannot be read, is not JSON, or holds anything else: every problem,
    each naming its key."""
    text = read_text(path, COSTS_BYTES, "E008", "cost file ")  # a regular file under the cap, UTF-8
    try:
        data = parse_json(text)
    except JsonError as err:
        raise DiagnosticError(
            [Diagnostic("E008", f"cost file `{path}` is not JSON: {err}", help=COST_FILE_HELP)]
        ) from None
    problems = cost_file_problems(data)
    if problems:
        shown = problems[:MAX_PROBLEMS]
        raise DiagnosticError(
            [Diagnostic("E008", f"cost file `{path}`: {message}", help=help) for message, help in shown]
        )
    return data


COST_FILE_HELP = f"a cost file is a JSON object as `ppdsl calibrate` writes it: {COST_FILE_FORM}"
MAX_PROBLEMS = 20


def cost_file_problems(data: object) -> list[tuple[str, str]]:
    """(message, help) of everything wrong with a cost file's JSON value; empty when it is a cost file."""
    if not isinstance(data, dict):
        return [(f"holds {_json_kind(data)}, not a JSON object", COST_FILE_HELP)]
    problems: list[tuple[str, str]] = []

    def number(key_path: str, value: object) -> None:
        problem = cost_value_problem(value, key_path)
        if problem is not None:
            problems.append((f"`{key_path}` {problem}", f"give {COST_RANGE}"))

    def per_type(key_path: str, value: object) -> None:
        if not isinstance(value, dict):
            problems.append((f"`{key_path}` is {_json_kind(value)}, not an object", f"write {COST_FILE_FORM}"))
            return
        for name, cost in value.items():
            number(f"{key_path}.{_key(name)}", cost)

    for key, value in data.items():
        if key not in COST_FILE_KEYS:
            guess = did_you_mean(key, COST_FILE_KEYS)
            if not guess and key in KINDS:
                guess = f'job costs go under `costs`: `{{"costs": {{"{key}": ...}}}}`; '
            elif not guess and key in ("traceEvents", "displayTimeUnit"):
                guess = "this is a profile: turn it into costs with `ppdsl calibrate PROFILE -o costs.json`; "
            problems.append((f"unknown key `{_key(key)}`", f"{guess}a cost file holds {_names(COST_FILE_KEYS)}"))
        elif key == "unit":
            if not isinstance(value, str) or value not in US_PER:
                shown = f"`{_key(value)}`" if isinstance(value, str) else _json_kind(value)
                problems.append((f"unknown time unit {shown}", "write `s`, `ms` or `us`"))
        elif key == "costs":
            per_type("costs", value)
        elif key == "stages":
            if not isinstance(value, dict):
                problems.append((f"`stages` is {_json_kind(value)}, not an object", f"write {COST_FILE_FORM}"))
                continue
            for stage, types in value.items():
                if not (stage.isascii() and stage.isdigit() and len(stage) <= 9):
                    problems.append(
                        (f"`stages.{_key(stage)}` is not a stage number", 'a stage is an integer from 0, as `"3"`')
                    )
                    continue
                per_type(f"stages.{stage}", types)
        elif key == "samples":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                problems.append(("`samples` must be a count of measured jobs", "an integer from 0"))
        else:
            number(key, value)
    if not problems and not any(k in data for k in ("costs", "stages", "latency", "bandwidth")):
        problems.append(("holds no costs", COST_FILE_HELP))
    return problems


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def cost_file_names(file: dict) -> list[tuple[str, str]]:
    """(key path, job type) of every job type a cost file names: (`costs.forward`, `forward`),
    (`stages.3.backward`, `backward`)."""
    found = [(f"costs.{name}", name) for name in file.get("costs") or {}]
    for stage, types in (file.get("stages") or {}).items():
        found += [(f"stages.{stage}.{name}", name) for name in types]
    return found


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
    guess = did_you_mean(unknown[0], [*names, *COMM_KEYS])
    return DiagnosticError(
        [Diagnostic("E007", f"`--cost` names no job type `{_key(unknown[0])}`", help=f"{guess}known names: {known}")]
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

    def without(self, names: Collection[str]) -> CostSpec:
        """The same costs less those of the job types `names`, in the pairs and in the file (its `costs` and every
        stage's), for a schedule that has none of those types: a cost file calibrated on a run with recompute
        (`ppdsl calibrate`) still times a schedule without it. Links and the file's unit stay."""
        gone = set(names)
        pairs = {k: v for k, v in (self.pairs or {}).items() if k not in gone} or None
        file = self.file
        if file is not None:
            file = dict(file)
            if isinstance(file.get("costs"), dict):
                file["costs"] = {k: v for k, v in file["costs"].items() if k not in gone}
            if isinstance(file.get("stages"), dict):
                file["stages"] = {
                    stage: {k: v for k, v in types.items() if k not in gone} if isinstance(types, dict) else types
                    for stage, types in file["stages"].items()
                }
        return CostSpec(pairs, file)

    def names(self) -> set[str]:
        """The job types the pairs and the file give a cost to (not the links)."""
        given = {k for k in self.pairs or {} if k not in COMM_KEYS}
        return given | {name for _, name in cost_file_names(self.file or {})}

    def unknown_names(self, names: set[str]) -> list[str]:
        return [k for k in self.pairs or {} if k not in names and k not in COMM_KEYS]

    def check_names(self, defn: ScheduleDef) -> None:
        """A pair or a cost file naming no job type of the schedule is a mistake, not something to ignore."""
        self.check_known([jt.name for jt in defn.job_types])

    def check_known(self, names: Sequence[str]) -> None:
        """Raise DiagnosticError for a value that is not a cost (pairs given as a dict through the API are
        checked here, as `--cost` is when parsed), a pair naming none of `names` (E007), or a cost file naming
        none of them (E008: a typo in a file must not fall back to the schedule's own costs)."""
        for key, value in (self.pairs or {}).items():
            problem = cost_value_problem(value, key)
            if problem is not None:
                raise DiagnosticError(
                    [Diagnostic("E007", f"the cost `{_key(key)}` {problem}", help=f"give {COST_RANGE}")]
                )
        unknown = self.unknown_names(set(names))
        if unknown:
            raise unknown_cost_error(unknown, names)
        if self.file is None:
            return
        problems = cost_file_problems(self.file)
        if problems:  # (a file read by `load_costs` has none; a dict given through the API may)
            raise DiagnosticError([Diagnostic("E008", f"cost file: {message}", help=h) for message, h in problems])
        wrong = [(path, name) for path, name in cost_file_names(self.file) if name not in names]
        if wrong:
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E008",
                        f"the cost file's `{_key(path)}` names no job type of the schedule",
                        help=f"{did_you_mean(name, names)}job types: {_names(names)}",
                    )
                    for path, name in wrong[:MAX_PROBLEMS]
                ]
            )

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
