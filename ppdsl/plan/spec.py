"""The plan specification: what the runtime needs of a checked schedule, as plain data built once.

`ppdsl run` checks a schedule, then every process that trains with it (one, or one per rank) builds its plan
from a `PlanSpec`: each rank's job order, the merged order of all ranks that the checker's execution computed,
the job types, the placement, the sizes, the stream rules, and the fingerprint of the source it was checked
from. It is frozen and serialisable (`to_json` / `from_json`), so the launcher writes it into the run directory
and a rank process reads it instead of reading and expanding the `.sched` file again: no rank imports
`ppdsl.language`, and a rank can never train a file that changed after it was checked.

A job is the one identity `ppdsl.plan.jobs` encodes, unpacked: (type index, chunk, micro-batch), the type
indexing `job_types`. The spec is built from a checked schedule by `ppdsl.analysis.plan_spec`; this module, like
all of `ppdsl.plan`, imports only `ppdsl.common`, for the runtime's rank processes import it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.jsontext import JsonError, parse_json
from ppdsl.plan.jobs import job_label
from ppdsl.plan.kinds import is_action, kind, letter_of, memory_actions, per_step, program_order

FORMAT = 2  # the JSON form's version: a file of another is refused (E091), never half read
JobTuple = tuple[int, int, int]  # (type index, chunk, micro-batch)
ParamValue = int | float | bool
AttrValue = bool | int | float | str


def source_fingerprint(texts: Iterable[str]) -> str:
    """sha256 of a schedule's text and then each file it includes, in the order they were read (each text ended
    by a NUL byte, so that moving text from one file to the next changes it)."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class JobTypeSpec:
    """A job type as the runtime uses it: the ops of `region` whose names match `ops` (fnmatch), per chunk.

    `before` / `after` tie an auxiliary job to its anchor, `receives` / `sends` move its anchor's communication
    onto it; `short` is its label's prefix (`F`, an alias, or the name) and `program_order` where its job program
    goes in a plan (Paddle's order: forward, backward..., optimizer); `builtin`: one of the five every schedule
    has (`ppdsl.plan.kinds`), named as the runtime classes ops (forward, backward, ..., optimizer), or a
    built-in memory action. `memory`: the program the runtime builds for a memory action (its kind's `program`:
    `recompute`, `offload`, `reload`; None for every other type), `fraction` the share of a (chunk, micro-batch)'s
    activations it acts on (None: all), so the runtime builds its program from this, never from the type's name."""

    name: str
    region: str
    ops: tuple[str, ...]
    before: str | None
    after: str | None
    receives: bool
    sends: bool
    short: str
    program_order: int
    builtin: bool
    memory: str | None = None
    fraction: float | None = None


@dataclass(frozen=True)
class RuleSpec:
    """A stream rule with its priority evaluated for the sizes (`ppdsl.language.ir.StreamRule` as data)."""

    pattern: str
    job: str | None
    stream: str | None
    priority: int | None
    attrs: tuple[tuple[str, AttrValue], ...]

    def as_dict(self) -> dict:
        """The form `ppdsl.runtime.streams.apply_rules` reads (a plan module's STREAM_RULES has it too)."""
        return {
            "pattern": self.pattern,
            "job": self.job,
            "stream": self.stream,
            "priority": self.priority,
            "attrs": dict(self.attrs),
        }


@dataclass(frozen=True)
class PlanSpec:
    """A checked schedule at its sizes, as the runtime builds plans from it. Nothing in it is executable."""

    schedule: str  # the schedule's name
    source: str  # the file it was checked from, as the checker named it
    fingerprint: str  # `source_fingerprint` of that file and its includes when it was checked
    pp: int
    vpp: int
    microbatches: int
    params: tuple[tuple[str, ParamValue], ...]
    job_types: tuple[JobTypeSpec, ...]
    stage_of: tuple[tuple[int, ...], ...]  # [rank][chunk] -> global stage
    orders: tuple[tuple[JobTuple, ...], ...]  # [rank] -> its jobs, in order
    merged: tuple[tuple[int, int], ...] | None  # (rank, step) of every job, all ranks in one valid order
    rules: tuple[RuleSpec, ...]
    # layers per virtual stage in stage order, the embedding and the head counted (`--partition` or the file's
    # `partition`); None: the model splits itself (its `ctx.pipeline(split=...)`)
    partition: tuple[int, ...] | None = None

    # ------------------------------------------------------------ reading

    @property
    def nstages(self) -> int:
        return self.pp * self.vpp

    @property
    def type_names(self) -> list[str]:
        return [jt.name for jt in self.job_types]

    @property
    def parameters(self) -> dict[str, ParamValue]:
        return dict(self.params)

    def rank_of_stage(self) -> list[tuple[int, int]]:
        """[stage] -> (rank, chunk)."""
        out = [(0, 0)] * self.nstages
        for r, row in enumerate(self.stage_of):
            for c, s in enumerate(row):
                out[s] = (r, c)
        return out

    def job_tuples(self, rank: int) -> list[tuple[str, int, int]]:
        """(type name, chunk, micro-batch) of `rank`'s jobs in order: the form Paddle's job lists use."""
        names = self.type_names
        return [(names[t], c, mb) for t, c, mb in self.orders[rank]]

    def label(self, job: JobTuple) -> str:
        """Compact job name: `F3`, `B0.c1`, `recv_forward2`, `optimizer` (`ppdsl.plan.jobs.job_label`)."""
        t, chunk, mb = job
        jt = self.job_types[t]
        return job_label(jt.name, jt.short, chunk, mb, self.vpp, per_step(jt.name))

    def rule_dicts(self) -> list[dict]:
        return [rule.as_dict() for rule in self.rules]

    def require_fingerprint(self, expected: str, where: str, fix: str) -> None:
        """E090 unless this plan was checked from the source that hashes to `expected` (`where` names what
        expected it, `fix` how to get a plan of that source)."""
        if self.fingerprint != expected:
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E090",
                        f"the plan of `{self.schedule}` was checked from a source that hashes to "
                        f"{self.fingerprint[:16]}, but {where} hashes to {expected[:16]}",
                        help=fix,
                    )
                ]
            )

    # ------------------------------------------------------------ JSON

    def to_json(self) -> str:
        data = {
            "format": FORMAT,
            "schedule": self.schedule,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "pp": self.pp,
            "vpp": self.vpp,
            "microbatches": self.microbatches,
            "params": dict(self.params),
            "job_types": [
                {
                    "name": jt.name,
                    "region": jt.region,
                    "ops": list(jt.ops),
                    "before": jt.before,
                    "after": jt.after,
                    "receives": jt.receives,
                    "sends": jt.sends,
                    "short": jt.short,
                    "program_order": jt.program_order,
                    "builtin": jt.builtin,
                    "memory": jt.memory,
                    "fraction": jt.fraction,
                }
                for jt in self.job_types
            ],
            "stage_of": [list(row) for row in self.stage_of],
            "orders": [[list(job) for job in order] for order in self.orders],
            "merged": None if self.merged is None else [list(key) for key in self.merged],
            "rules": [rule.as_dict() for rule in self.rules],
            "partition": None if self.partition is None else list(self.partition),
        }
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, where: str = "the plan") -> PlanSpec:
        """The spec `to_json` wrote; E091 for anything else (not JSON, another format, a field of the wrong kind or
        out of range), naming `where` (the file) and what is wrong."""
        try:
            data = parse_json(text)
            return _spec_of(data)
        except (JsonError, _Bad) as err:
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E091",
                        f"{where} is not a ppdsl plan specification: {err}",
                        help="`ppdsl run` writes it (plan.json in the launch's directory); run it again rather "
                        "than editing or copying one",
                    )
                ]
            ) from None


# ---------------------------------------------------------------------- building it


def with_stages(spec: PlanSpec, stage_of: Iterable[Iterable[int]]) -> PlanSpec:
    """The same spec over other stage numbers (a program cut per rank numbers its chunks 0 .. vpp-1)."""
    return replace(spec, stage_of=tuple(tuple(row) for row in stage_of))


def plan_module_spec(
    job_types: Sequence[Mapping],
    stage_of: Sequence[Sequence[int]],
    orders: Sequence[Sequence[tuple[str, int, int]]],
    rules: Sequence[Mapping],
    microbatches: int,
) -> PlanSpec:
    """The spec of a generated plan module (`ppdsl compile`) at the sizes it was called with: its JOB_TYPES, its
    placement, its `job_list`s (by type name) and its STREAM_RULES. No check merged its orders (`merged` is None:
    one process running every rank merges them by the values each job reads, `ppdsl.runtime.plan.build_plan`)."""
    index = {jt["name"]: t for t, jt in enumerate(job_types)}
    types = tuple(
        JobTypeSpec(
            jt["name"],
            jt["region"],
            tuple(jt.get("ops") or ("*",)),
            jt.get("before"),
            jt.get("after"),
            bool(jt.get("receives")),
            bool(jt.get("sends")),
            letter_of(jt["name"]) or jt["name"],  # JOB_TYPES has no aliases: a user type's label is its name
            program_order(jt["name"]),
            kind(jt["name"]) is not None,
            kind(jt["name"]).program if is_action(jt["name"]) else None,
            jt.get("fraction"),
        )
        for jt in job_types
    )
    rule_specs = tuple(
        RuleSpec(r["pattern"], r.get("job"), r.get("stream"), r.get("priority"), tuple((r.get("attrs") or {}).items()))
        for r in rules
    )
    return PlanSpec(
        schedule="plan",
        source="<plan module>",
        fingerprint="",
        pp=len(stage_of),
        vpp=len(stage_of[0]) if stage_of else 1,
        microbatches=microbatches,
        params=(),
        job_types=types,
        stage_of=tuple(tuple(row) for row in stage_of),
        orders=tuple(tuple((index[t], c, mb) for t, c, mb in order) for order in orders),
        merged=None,
        rules=rule_specs,
    )


# ---------------------------------------------------------------------- reading the JSON form


class _Bad(ValueError):
    """A field of a plan's JSON that is missing or of the wrong kind."""


def _field(data: Mapping, key: str, kind: type | tuple[type, ...], what: str = ""):
    if key not in data:
        raise _Bad(f"{what}`{key}` is missing")
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:  # JSON true is not a number here
        raise _Bad(f"{what}`{key}` is not {_kind_name(kinds)}")
    if not isinstance(value, kinds):
        raise _Bad(f"{what}`{key}` is not {_kind_name(kinds)}")
    return value


def _kind_name(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "an object"}
    names[type(None)] = "null"
    names[float] = "a number"
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _count(data: Mapping, key: str, low: int = 1) -> int:
    value = _field(data, key, int)
    if value < low:
        raise _Bad(f"`{key}` is {value}, below {low}")
    return value


def _spec_of(data) -> PlanSpec:
    if not isinstance(data, dict):
        raise _Bad("it is not a JSON object")
    if data.get("format") != FORMAT:
        raise _Bad(f"its format is `{data.get('format')!r}`, this ppdsl reads format {FORMAT}")
    pp, vpp, m = _count(data, "pp"), _count(data, "vpp"), _count(data, "microbatches")
    types = []
    for i, jt in enumerate(_field(data, "job_types", list)):
        if not isinstance(jt, dict):
            raise _Bad(f"job type {i} is not an object")
        at = f"job type {i}: "
        ops = _field(jt, "ops", list, at)
        if not all(isinstance(p, str) for p in ops):
            raise _Bad(f"{at}`ops` holds something that is not a string")
        types.append(
            JobTypeSpec(
                _field(jt, "name", str, at),
                _field(jt, "region", str, at),
                tuple(ops),
                _field(jt, "before", (str, type(None)), at),
                _field(jt, "after", (str, type(None)), at),
                _field(jt, "receives", bool, at),
                _field(jt, "sends", bool, at),
                _field(jt, "short", str, at),
                _field(jt, "program_order", int, at),
                _field(jt, "builtin", bool, at),
                _memory_kind(jt, at),
                _fraction(jt, at),
            )
        )
    stage_of = _field(data, "stage_of", list)
    nstages = pp * vpp
    if len(stage_of) != pp or any(
        not isinstance(row, list) or len(row) != vpp or any(type(s) is not int or not 0 <= s < nstages for s in row)
        for row in stage_of
    ):
        raise _Bad(f"`stage_of` is not {pp} rows of {vpp} stages from 0 to {nstages - 1}")
    if sorted(s for row in stage_of for s in row) != list(range(nstages)):
        raise _Bad("`stage_of` does not place every stage once")
    orders = _field(data, "orders", list)
    if len(orders) != pp or not all(isinstance(order, list) for order in orders):
        raise _Bad(f"`orders` is not {pp} lists of jobs")
    jobs = tuple(tuple(_job(job, len(types), vpp, m, r) for job in order) for r, order in enumerate(orders))
    merged = _field(data, "merged", (list, type(None)))
    if merged is not None:
        merged = tuple(_merged_key(key, jobs) for key in merged)
        if len(merged) != sum(map(len, jobs)) or len(set(merged)) != len(merged):
            raise _Bad("`merged` does not hold every job of `orders` once")
    rules = []
    for i, rule in enumerate(_field(data, "rules", list)):
        if not isinstance(rule, dict):
            raise _Bad(f"rule {i} is not an object")
        at = f"rule {i}: "
        attrs = _field(rule, "attrs", dict, at)
        if not all(isinstance(v, (bool, int, float, str)) for v in attrs.values()):
            raise _Bad(f"{at}`attrs` holds a value that is not a number, a string, true or false")
        rules.append(
            RuleSpec(
                _field(rule, "pattern", str, at),
                _field(rule, "job", (str, type(None)), at),
                _field(rule, "stream", (str, type(None)), at),
                _field(rule, "priority", (int, type(None)), at),
                tuple(attrs.items()),
            )
        )
    partition = data.get("partition")
    if partition is not None and (
        not isinstance(partition, list)
        or len(partition) != nstages
        or any(type(n) is not int or n < 0 for n in partition)
    ):
        raise _Bad(f"`partition` is not {nstages} layer counts (integers from 0)")
    params = _field(data, "params", dict)
    if not all(isinstance(v, (bool, int, float)) for v in params.values()):
        raise _Bad("`params` holds a value that is not a number, true or false")
    return PlanSpec(
        schedule=_field(data, "schedule", str),
        source=_field(data, "source", str),
        fingerprint=_field(data, "fingerprint", str),
        pp=pp,
        vpp=vpp,
        microbatches=m,
        params=tuple(params.items()),
        job_types=tuple(types),
        stage_of=tuple(tuple(row) for row in stage_of),
        orders=jobs,
        merged=merged,
        rules=tuple(rules),
        partition=None if partition is None else tuple(partition),
    )


def _memory_kind(jt: Mapping, at: str) -> str | None:
    kind = _field(jt, "memory", (str, type(None)), at)
    programs = tuple(dict.fromkeys(k.program for k in memory_actions()))  # what the runtime can build
    if kind is not None and kind not in programs:
        raise _Bad(f"{at}`memory` is `{kind}`, not one of {', '.join(programs)}")
    return kind


def _fraction(jt: Mapping, at: str) -> float | None:
    value = _field(jt, "fraction", (int, float, type(None)), at)
    if value is not None and not 0 < value <= 1:
        raise _Bad(f"{at}`fraction` is {value}, not in (0, 1]")
    return None if value is None else float(value)


def _job(job, ntypes: int, vpp: int, microbatches: int, rank: int) -> JobTuple:
    if (
        not isinstance(job, list)
        or len(job) != 3
        or any(type(x) is not int for x in job)
        or not (0 <= job[0] < ntypes and 0 <= job[1] < vpp and 0 <= job[2] < microbatches)
    ):
        raise _Bad(f"rank {rank}'s order holds `{json.dumps(job)[:40]}`, not a [type, chunk, micro-batch] in range")
    return (job[0], job[1], job[2])


def _merged_key(key, jobs: tuple[tuple[JobTuple, ...], ...]) -> tuple[int, int]:
    if (
        not isinstance(key, list)
        or len(key) != 2
        or any(type(x) is not int for x in key)
        or not 0 <= key[0] < len(jobs)
        or not 0 <= key[1] < len(jobs[key[0]])
    ):
        raise _Bad(f"`merged` holds `{json.dumps(key)[:40]}`, not a [rank, step] of `orders`")
    return (key[0], key[1])
