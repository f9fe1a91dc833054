"""The intermediate representation: a resolved schedule definition, and its expansion for given sizes.

`ScheduleDef` is what a `.sched` file means, independent of sizes (names resolved, expressions compiled).
`Expansion` binds pp / vpp / microbatches / params and holds every rank's job order as packed integers:

    code = (microbatch * vpp + chunk) * len(job_types) + type_index

so that 262,144 jobs cost one Python int each. Every later stage (checks, execution, formats, codegen, the
runtime) reads an `Expansion`; nothing reads the AST again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ppdsl.diagnostics import Span, number_text

if TYPE_CHECKING:
    from ppdsl import ast

FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W, OPTIMIZER = range(5)
BUILTIN_JOB_TYPES = ("forward", "backward", "backward_b", "backward_w", "optimizer")
BUILTIN_ALIASES = {"F": "forward", "B": "backward", "I": "backward_b", "W": "backward_w"}
REGIONS = ("forward", "backward", "backward_b", "backward_w", "optimize")
SIZE_NAMES = ("pp", "vpp", "microbatches")


@dataclass(frozen=True)
class JobType:
    """A named part of the training program, selected by region and op-name patterns, run per chunk.

    `before` / `after` tie an auxiliary job (Paddle's `recv_forward`, `send_backward`) to the job of the same
    chunk and micro-batch it must precede or follow; `receives` / `sends` move that job's cross-stage
    communication onto this one.
    """

    name: str
    region: str
    ops: tuple[str, ...] = ("*",)
    alias: str | None = None
    before: str | None = None
    after: str | None = None
    receives: bool = False
    sends: bool = False
    span: Span | None = None

    @property
    def per_chunk(self) -> bool:
        return self.name != "optimizer"

    def to_dict(self) -> dict:
        """The plain form generated plan modules and the runtime exchange (`JOB_TYPES`)."""
        return {
            "name": self.name,
            "region": self.region,
            "ops": list(self.ops),
            "before": self.before,
            "after": self.after,
            "receives": self.receives,
            "sends": self.sends,
        }

    @classmethod
    def from_dict(cls, data: dict) -> JobType:
        return cls(
            data["name"],
            data["region"],
            tuple(data.get("ops") or ("*",)),
            data.get("alias"),
            data.get("before"),
            data.get("after"),
            bool(data.get("receives")),
            bool(data.get("sends")),
        )

    @property
    def builtin(self) -> bool:
        return self.name in BUILTIN_JOB_TYPES


@dataclass(frozen=True)
class Site:
    """Where in the source a job was emitted (an order statement or a table cell)."""

    span: Span
    text: str


@dataclass(frozen=True)
class StreamRule:
    """Generalised `_pir_overlap_send_recv`: ops matching `pattern` (in job type `job`, or any) get a stream,
    a scheduling priority and attributes. `stream` may name op attributes: `send_stream_{ring_id}`."""

    pattern: str
    job: str | None
    stream: str | None
    priority: int | None
    attrs: tuple[tuple[str, bool | int | float | str], ...]
    span: Span | None = None


@dataclass(frozen=True)
class Require:
    check: Callable[..., bool]
    message: str
    source: str
    span: Span


@dataclass(frozen=True)
class ParamDef:
    name: str
    default: int | float | bool
    span: Span


@dataclass(frozen=True)
class TableDef:
    """A literal order: rows of (rank, [(type, chunk, micro-batch, site)]), used when `when` holds (or always)."""

    when: Callable[..., bool] | None
    rows: list[tuple[int, list[tuple[int, int, int, int]]]]
    span: Span


@dataclass
class ScheduleDef:
    """A resolved schedule: everything the file declares, with expressions compiled to Python callables.

    Callables take the size/parameter environment as keyword arguments (see `ppdsl.lowering`).
    """

    name: str
    doc: str
    path: str
    params: dict[str, ParamDef]
    requires: list[Require]
    job_types: list[JobType]
    placement_kind: str  # looped | vshape | expr
    placement_fn: Callable[..., int] | None
    costs: dict[str, Callable[..., float]]
    comm: dict[str, Callable[..., float]]
    memory: dict[str, tuple[str, Callable[..., float]]]
    memory_limit_fn: Callable[..., float] | None
    memory_limit_span: Span | None
    rules: list[StreamRule]
    rule_priorities: list[Callable[..., int] | None]
    order_fn: Callable[..., None] | None
    order_source: str  # the generated Python of the order body (for codegen and debugging)
    tables: list[TableDef]  # literal orders, the first whose `when` holds is used
    sites: list[Site]
    line_sites: dict[int, int]  # generated-code line -> site id, to place runtime errors
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, every file read
    order_ast: ast.Order | None = None  # the order body as written, for `ppdsl compile`'s readable backend

    def type_index(self, name: str) -> int:
        for i, jt in enumerate(self.job_types):
            if jt.name == name or jt.alias == name:
                return i
        raise KeyError(name)

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else ""


@dataclass
class Expansion:
    """A schedule bound to sizes: per-rank job orders plus the cost and memory tables the checks need."""

    defn: ScheduleDef
    pp: int
    vpp: int
    microbatches: int
    params: dict[str, int | float | bool]
    stage_of: list[list[int]]  # [rank][chunk] -> global stage
    jobs: list[list[int]]  # [rank] -> packed job codes, in execution order
    sites: list[list[int]]  # [rank] -> site id of each job
    cost: list[list[list[float]]]  # [type][rank][chunk]
    latency: float
    bandwidth: float | None
    mem_delta: list[list[list[float]]]  # [type][rank][chunk]: activation units a job adds (negative: frees)
    memory_limit: list[float | None]  # [rank]
    rules: list[StreamRule]  # with priorities evaluated for these sizes
    memory_unit: str = "activations"  # or "bytes", once measured on a real program (ppdsl.runtime.memory)

    @property
    def ntypes(self) -> int:
        return len(self.defn.job_types)

    @property
    def nstages(self) -> int:
        return self.pp * self.vpp

    @property
    def type_names(self) -> list[str]:
        return [jt.name for jt in self.defn.job_types]

    def decode(self, code: int) -> tuple[int, int, int]:
        """(type index, chunk, micro-batch) of a packed job code."""
        rest, t = divmod(code, self.ntypes)
        mb, chunk = divmod(rest, self.vpp)
        return t, chunk, mb

    def encode(self, t: int, chunk: int, mb: int) -> int:
        return (mb * self.vpp + chunk) * self.ntypes + t

    def rank_of_stage(self) -> list[tuple[int, int]]:
        """[stage] -> (rank, chunk)."""
        out = [(0, 0)] * self.nstages
        for r, row in enumerate(self.stage_of):
            for c, s in enumerate(row):
                out[s] = (r, c)
        return out

    def label(self, code: int) -> str:
        """Compact job name: `F3`, `B0.c1`, `backward_w2`, `optimizer`."""
        t, chunk, mb = self.decode(code)
        return job_label(self.defn.job_types[t], chunk, mb, self.vpp)

    def job_tuples(self, rank: int) -> list[tuple[str, int, int]]:
        """(type name, chunk, micro-batch) in order: the form Paddle's job lists and generated plans use."""
        names = self.type_names
        return [(names[t], c, mb) for t, c, mb in map(self.decode, self.jobs[rank])]


SHORT_NAMES = {"forward": "F", "backward": "B", "backward_b": "I", "backward_w": "W"}


def job_label(jt: JobType, chunk: int, mb: int, vpp: int) -> str:
    if jt.name == "optimizer":
        return "optimizer"
    short = SHORT_NAMES.get(jt.name) or jt.alias or jt.name
    return f"{short}{number_text(mb)}" + (f".c{chunk}" if vpp > 1 else "")
