"""The intermediate representation: what a `.sched` file means, independent of sizes.

`ScheduleDef` has every name resolved and every expression compiled to a Python callable over the sizes and
parameters; `ppdsl.analysis.expand` binds sizes to it. Nothing after resolution reads the AST again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ppdsl.common.diagnostics import Span, number_text
from ppdsl.language.jobtypes import BUILTIN, MEMORY_NAMES, letter_of

if TYPE_CHECKING:
    from ppdsl.language import ast


@dataclass(frozen=True)
class JobType:
    """A named part of the training program, selected by region and op-name patterns, run per chunk.

    `before` / `after` tie an auxiliary job (Paddle's `recv_forward`, `send_backward`) to the job of the same
    chunk and micro-batch it must precede or follow; `receives` / `sends` move that job's cross-stage
    communication onto this one.

    `fraction` (memory actions only, `memory recompute fraction = 0.5`): the part of a (chunk, micro-batch)'s
    activations a `recompute` rebuilds or an `offload` / `reload` moves (None: all of them). It is the job type's,
    so every such job of the schedule is as partial; which micro-batches are recomputed or offloaded at all is the
    order's choice.
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
    fraction: float | None = None

    @property
    def per_chunk(self) -> bool:
        return self.name != "optimizer"

    def to_dict(self) -> dict:
        """The plain form generated plan modules and the runtime exchange (`JOB_TYPES`)."""
        out = {
            "name": self.name,
            "region": self.region,
            "ops": list(self.ops),
            "before": self.before,
            "after": self.after,
            "receives": self.receives,
            "sends": self.sends,
        }
        if self.name in MEMORY_NAMES:  # only memory actions have one: every other plan's table stays as it was
            out["fraction"] = self.fraction
        return out

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
            fraction=data.get("fraction"),
        )

    @property
    def builtin(self) -> bool:
        return self.name in BUILTIN

    def label(self, chunk: int, mb: int, vpp: int) -> str:
        """Compact job name: `F3`, `B0.c1`, `recv_forward2`, `optimizer`."""
        if self.name == "optimizer":
            return "optimizer"
        short = letter_of(self.name) or self.alias or self.name
        return f"{short}{number_text(mb)}" + (f".c{chunk}" if vpp > 1 else "")


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
class Function:
    """A schedule's `fn`, compiled: `source` is its body's Python (user names `v_x`, functions `u_f`), over its
    parameters then the sizes and schedule parameters it reads (`globals`); types as its calls use them."""

    name: str
    params: tuple[str, ...]
    globals: tuple[str, ...]
    source: str
    param_types: tuple[str, ...]
    result_type: str
    text: str  # the definition as written
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

    Callables take the size/parameter environment as keyword arguments (see `ppdsl.language.lowering`).
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
    functions: list[Function] = field(default_factory=list)
    function_nodes: dict[str, ast.FnDef] = field(default_factory=dict)  # as written, for a readable recompile
    host_limit_fn: Callable[..., float] | None = None  # `memory host limit = ...`: all ranks' offloaded memory
    host_limit_span: Span | None = None

    def type_index(self, name: str) -> int:
        for i, jt in enumerate(self.job_types):
            if jt.name == name or jt.alias == name:
                return i
        raise KeyError(name)

    @property
    def summary(self) -> str:
        return self.doc.split("\n")[0] if self.doc else ""
