"""`ppdsl compare / sweep`: several schedules, or one over many sizes, measured under the same costs, as rows.

Costs, in order of precedence (later wins): the schedule's own `cost` / `comm` declarations, a cost file
(`--costs FILE`, `ppdsl.analysis.costs`), then `--cost k=v,...` where k is a job type or `latency` /
`bandwidth`. A cost file's times are real (seconds unless it says `"unit"`); everything else is in abstract
cost units.

`compare` without `--vpp` runs each schedule at the smallest chunk count (1..4) its `require`s accept. So that
1F1B (one chunk per rank) and ZB-V (two) describe the same model, each job's cost and each in-flight
activation is then divided by the schedule's vpp: a chunk holds 1/vpp of a rank's layers. Makespan and peak
memory are then in units of one rank's work and one rank's activations for one micro-batch.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import scale_costs
from ppdsl.analysis.layers import min_max_partition
from ppdsl.analysis.scenario import Scenario
from ppdsl.common import csv_cells
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.sizes import MAX_SIZE
from ppdsl.common.text import shortened
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.resolve import load

AUTO_VPP = (1, 2, 3, 4)
MAX_SWEEP_POINTS = 4096  # a sweep is a table to read, not a search
MAX_SIZE_DIGITS = len(str(MAX_SIZE))  # (checked before `int`, which refuses more than 4300 digits)


# ----------------------------------------------------------------------------------------------------------
# compare


@dataclass
class Row:
    """One schedule at one size: `status` ok, rejected (a `require` is false) or invalid (fails its check)."""

    schedule: str
    file: str
    pp: int
    vpp: int | None
    microbatches: int
    status: str
    makespan: float | None = None
    bubble_ratio: float | None = None  # idle time over pp x makespan
    recompute_ratio: float | None = None  # recompute time over pp x makespan: overhead beside the bubble
    peak_activations: float | None = None  # max over ranks (divided by vpp when normalised)
    peak_rank: int | None = None
    over_limit: bool | None = None
    reason: str = ""
    memory_unit: str = "activations"  # "bytes" when measured on a model's program (`--model`)
    partition: str | None = None  # the layers per virtual stage, for a model of layers (`--layers`, `--partition`)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if out["partition"] is None:  # (rows of a model without layers read as they always did)
            del out["partition"]
        return out


def _first_message(err: DiagnosticError) -> str:
    d = err.diagnostics[0]
    return f"{d.code}: {d.message}"


def _own_params(defn: ScheduleDef, params: dict | None) -> dict:
    return {k: v for k, v in (params or {}).items() if k in defn.params}


def measure(scenario: Scenario, normalise: bool = False, memory_limit: float | None = None) -> Row:
    """Check and time one scenario. `normalise`: try vpp 1..4 (the smallest its `require`s accept) and express
    costs and activations per rank (module doc). Activation memory measured on a real program (the scenario's
    `memory` hook) is in bytes, which are real, so it is not normalised. `memory_limit` marks the row over it or
    not; it does not make the schedule invalid."""
    defn = scenario.definition()
    row = Row(
        defn.name, str(defn.path), scenario.pp, None if normalise else scenario.vpp, scenario.microbatches, "rejected"
    )
    exp = None
    reasons: list[list[str]] = []
    for v in AUTO_VPP if normalise else (scenario.vpp,):
        try:
            exp = scenario.with_(vpp=v).expansion()
            row.vpp = v
            break
        except DiagnosticError as err:
            # a `require` that refuses these sizes, or a partition with another number of stages: another vpp may fit
            if any(d.code not in ("S100", "E104") for d in err.diagnostics):
                if any(d.code.startswith("E") for d in err.diagnostics):
                    raise
                row.status, row.reason = "invalid", _first_message(err)
                return row
            reasons.append([d.message for d in err.diagnostics])
    if exp is None:
        # the vpp that came closest says what else to change (`microbatches == pp`, not also `vpp >= 2`)
        row.reason = "; ".join(min(reasons, key=len))
        return row
    row.memory_unit = exp.memory_unit
    # a partition's stages already cost their layers: a chunk is what it holds, not 1/vpp of a rank
    scale = 1.0 / exp.vpp if normalise and exp.stage_work is None else 1.0
    if scale != 1.0:
        exp = scale_costs(exp, scale)
    result = check_expansion(exp, scenario.rendezvous)
    if result.valid and exp.stage_work is not None:
        exp, result = _best_partition(scenario.with_(vpp=exp.vpp), exp, result)
        row.partition = exp.stage_work.partition.text()
    if not result.valid:
        row.status, row.reason = "invalid", f"{result.errors[0].code}: {result.errors[0].message}"
        return row
    ex = result.execution
    peak = max(ex.ranks, key=lambda s: s.peak_activations)
    row.status = "ok"
    row.makespan = ex.makespan
    row.bubble_ratio = ex.bubble_ratio
    row.recompute_ratio = ex.recompute_ratio
    row.peak_activations = peak.peak_activations * (1.0 if row.memory_unit == "bytes" else scale)
    row.peak_rank = peak.rank
    if memory_limit is not None:
        row.over_limit = row.peak_activations > memory_limit + 1e-9
    return row


def _best_partition(scenario: Scenario, exp, result):
    """With a layer profile and the partition left free (no `--partition`, none in the file), the even split's
    expansion and check, or the DP min-max split's when it is faster (ties: the smaller peak): each schedule under
    the better of the two baselines torchtitan and torch's auto-partition compare against."""
    profile = scenario.profile()
    if profile is None or scenario.partition is not None or exp.defn.partition is not None:
        return exp, result
    if len(profile.layers) < exp.nstages:
        return exp, result
    dp = min_max_partition(profile, exp.nstages)
    if dp.counts == exp.stage_work.partition.counts:
        return exp, result
    other = scenario.with_(partition=dp).expansion()
    checked = check_expansion(other, scenario.rendezvous)
    if not checked.valid:
        return exp, result

    def measures(r) -> tuple[float, float]:
        return r.execution.makespan, max(s.peak_activations for s in r.execution.ranks)

    return (other, checked) if measures(checked) < measures(result) else (exp, result)


def compare(
    paths: Sequence[str | Path],
    base: Scenario,
    normalise: bool = False,
    memory_limit: float | None = None,
    skip_broken: bool = False,
    also_costed: Sequence[str] = (),
) -> list[Row]:
    """Every schedule measured in the `base` scenario's sizes, costs, parameters and communication (its own
    schedule is not used); ok rows best first (makespan, then peak memory), then the others as given.

    A file that does not load (syntax, names) raises DiagnosticError, unless `skip_broken` (the library), when
    it becomes an invalid row. `params` go to the schedules that declare them; one declared by none is E007. A cost
    for a job type none of them has is E007 / E008 too, unless it is one of `also_costed` (the job types of rows
    measured beside them: `compare --synth --memory-actions`'s recompute, offload and reload).
    """
    pp, microbatches, vpp = base.pp, base.microbatches, None if normalise else base.vpp
    params, costs = base.params, base.costs
    defns: list[ScheduleDef | Row] = []
    for path in paths:
        try:
            defns.append(load(path))
        except DiagnosticError as err:
            if not skip_broken:
                raise
            defns.append(Row(Path(path).stem, str(path), pp, vpp, microbatches, "invalid", reason=_first_message(err)))
    loaded = [d for d in defns if isinstance(d, ScheduleDef)]
    for name in params or {}:
        if loaded and not any(name in d.params for d in loaded):
            raise DiagnosticError([Diagnostic("E007", f"no schedule compared has a parameter `{name}`")])
    if costs is not None and loaded:
        costs.check_known(sorted({jt.name for d in loaded for jt in d.job_types} | set(also_costed)))
    rows = []
    for d in defns:
        if isinstance(d, Row):
            rows.append(d)
            continue
        own = costs
        if costs is not None:  # a job type only some schedules have (recompute, say) costs only their jobs
            own = costs.without(costs.names() - {jt.name for jt in d.job_types})
        scenario = base.with_(schedule=d, params=_own_params(d, params), costs=own)
        rows.append(measure(scenario, normalise, memory_limit))
    return ranked(rows)


def ranked(rows: Sequence[Row]) -> list[Row]:
    """Rows that ran, best first (makespan, then peak memory, then name); then the others, in their order."""
    ok = sorted((r for r in rows if r.status == "ok"), key=lambda r: (r.makespan, r.peak_activations, r.schedule))
    return ok + [r for r in rows if r.status != "ok"]


# ----------------------------------------------------------------------------------------------------------
# sweep sizes

_RANGE = re.compile(r"^(\d+)\.\.(\d+)(?::(\d+))?$")


def parse_sizes(text: str, what: str = "size") -> list[int]:
    """Sizes on the command line: comma-separated items, each `n`, `a..b` (a, 2a, 4a, ... up to b) or
    `a..b:s` (a, a + s, ... up to b); both ends inclusive when the sequence reaches them. Sorted, unique.

    `8..64` is 8, 16, 32, 64; `4..12:4` is 4, 8, 12; `2,3,8..32` is 2, 3, 8, 16, 32.
    """
    out: set[int] = set()

    def bad(item: str, why: str) -> DiagnosticError:
        return DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"bad {what} `{item}`: {why}",
                    help="write sizes as `8`, `4,8`, `8..64` (doubling) or `4..16:4` (step 4)",
                )
            ]
        )

    for item in text.split(","):
        item = item.strip()
        if any(len(digits) > MAX_SIZE_DIGITS for digits in re.findall(r"\d+", item)):
            raise bad(shortened(item), f"sizes go up to {MAX_SIZE}")
        if item.isdigit():
            values = [int(item)]
        else:
            m = _RANGE.match(item)
            if not m:
                raise bad(item, "not a number or a range")
            a, b = int(m.group(1)), int(m.group(2))
            step = int(m.group(3)) if m.group(3) else None
            if a < 1 or b < a:
                raise bad(item, "a range `a..b` needs 1 <= a <= b")
            if step == 0:
                raise bad(item, "the step must be positive")
            if step is None:
                values = []
                v = a
                while v <= b:
                    values.append(v)
                    v *= 2
            else:
                if (b - a) // step + 1 > MAX_SWEEP_POINTS:
                    raise bad(item, f"more than {MAX_SWEEP_POINTS} sizes")
                values = list(range(a, b + 1, step))
        if any(v < 1 for v in values):
            raise bad(item, "sizes start at 1")
        if any(v > MAX_SIZE for v in values):
            raise bad(item, f"sizes go up to {MAX_SIZE}")
        out.update(values)
        if len(out) > MAX_SWEEP_POINTS:
            raise bad(text, f"more than {MAX_SWEEP_POINTS} sizes")
    return sorted(out)


def sweep(base: Scenario, pps: Sequence[int], microbatches: Sequence[int]) -> list[Row]:
    """The base scenario at every (pp, microbatches), in that order; sizes a `require` rejects are rows too.
    Raises DiagnosticError (E007) for more than MAX_SWEEP_POINTS pairs: each axis within it, 4096 x 4096 would
    still be 16 million rows."""
    if len(pps) * len(microbatches) > MAX_SWEEP_POINTS:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"{len(pps)} pipeline degrees x {len(microbatches)} micro-batch counts are "
                    f"{len(pps) * len(microbatches):,} sizes, more than the {MAX_SWEEP_POINTS} a sweep measures",
                    help="sweep fewer sizes (`8..64` doubles; `4..16:4` steps)",
                )
            ]
        )
    defn = base.definition()
    base = base.with_(params=_own_params(defn, base.params))
    return [measure(base.with_(pp=pp, microbatches=m)) for pp in pps for m in microbatches]


# ----------------------------------------------------------------------------------------------------------
# rendering (text formats; the rich tables are built in the command line)

FIELDS = [
    "schedule",
    "file",
    "pp",
    "vpp",
    "microbatches",
    "status",
    "makespan",
    "bubble_ratio",
    "recompute_ratio",
    "peak_activations",
    "peak_rank",
    "over_limit",
    "reason",
    "memory_unit",
]


def rows_json(rows: Sequence[Row], **header: Any) -> str:
    return json.dumps({**header, "rows": [r.to_dict() for r in rows]}, indent=2)


def rows_csv(rows: Sequence[Row]) -> str:
    buf = io.StringIO()
    fields = [*FIELDS, "partition"] if any(r.partition is not None for r in rows) else FIELDS
    writer = csv.DictWriter(buf, fields, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: "" if v is None else csv_cells.cell(v) for k, v in r.to_dict().items()})
    return buf.getvalue()
