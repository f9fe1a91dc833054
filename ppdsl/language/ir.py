"""The intermediate representation: what a `.sched` file means, independent of sizes.

`ScheduleDef` has every name resolved and every expression and statement checked and typed (`Expr` is an
expression's Python source with its type); it is data only (frozen, nothing callable, no AST behind it), so it
compares, hashes its parts and pickles. `runnable.compiled(defn)` makes it executable (the checker's fast form),
`readable_order` writes its order as a plan module's `job_list`; `ppdsl.analysis.expand` binds sizes to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Span
from ppdsl.plan.jobs import job_label
from ppdsl.plan.kinds import KINDS, Kind, is_action, letter_of, per_step


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
    def kind(self) -> Kind | None:
        """Its built-in kind's row (`ppdsl.plan.kinds`); None for a schedule's own job type."""
        return KINDS.get(self.name)

    @property
    def per_chunk(self) -> bool:
        return not per_step(self.name)

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
        if is_action(self.name):  # only memory actions have one: every other plan's table stays as it was
            out["fraction"] = self.fraction
        return out

    @property
    def builtin(self) -> bool:
        return self.name in KINDS

    @property
    def short(self) -> str:
        """Its jobs' label prefix: PyTorch's letter (`F`), else its alias, else its name."""
        return letter_of(self.name) or self.alias or self.name

    def label(self, chunk: int, mb: int, vpp: int) -> str:
        """Compact job name: `F3`, `B0.c1`, `recv_forward2`, `optimizer`."""
        return job_label(self.name, self.short, chunk, mb, vpp, not self.per_chunk)


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
class Expr:
    """A checked expression: its Python source over the names it reads (user values `v_x`, functions `u_f`, the
    helper `_ceildiv`), its static type (`types.INT`, `FLOAT`, `BOOL`) and the function calls one evaluation
    makes (what the order's evaluation budget charges). A declaration's expression (a cost, a `require`) also
    keeps what was written (`text`), the declaration's span for messages (`span`), and the per-job names it is
    evaluated with besides the sizes and parameters (`extra`: `rank`, `chunk`, `stage`)."""

    source: str
    type: str
    calls: int = 0
    text: str = ""
    span: Span | None = None
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class Require:
    condition: Expr
    message: str
    source: str  # the condition as written
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
    """A literal order: rows of (rank, ((type, chunk, micro-batch, site), ...)), used when `when` holds (or always)."""

    when: Expr | None
    rows: tuple[tuple[int, tuple[tuple[int, int, int, int], ...]], ...]
    span: Span


# ---------------------------------------------------------------------- the order body, checked
# Each statement keeps its span and its site (an index into `ScheduleDef.sites`, what a runtime error names).


@dataclass(frozen=True)
class Let:
    name: str
    value: Expr
    span: Span
    site: int


@dataclass(frozen=True)
class EmitJob:
    """A job of type `type` (an index into `ScheduleDef.job_types`) on chunk `chunk`, of micro-batch `mb` or, when
    that is None, the next one of counter `counter` (a type's own, or the one it shares: backward and backward_b);
    `times` times if given (`forward * n`)."""

    type: int
    counter: int
    chunk: Expr
    mb: Expr | None
    times: Expr | None
    span: Span
    site: int


@dataclass(frozen=True)
class Repeat:
    count: Expr
    body: tuple[Stmt, ...]
    span: Span
    site: int


@dataclass(frozen=True)
class ForRange:
    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]
    span: Span
    site: int


@dataclass(frozen=True)
class IfElse:
    branches: tuple[tuple[Expr, tuple[Stmt, ...]], ...]  # `if` then each `elif`: (test, body)
    orelse: tuple[Stmt, ...]
    span: Span
    site: int


Stmt = Let | EmitJob | Repeat | ForRange | IfElse


@dataclass(frozen=True)
class OrderDef:
    """`order { ... }`, checked: its statements, the span of the whole body and the site of its header."""

    body: tuple[Stmt, ...]
    span: Span
    site: int


@dataclass(frozen=True)
class PartitionDef:
    """`partition = [9, 10, 9, 6]`: the model's layers per virtual stage, in stage order; or `partition = "..."`, a
    Megatron-LM layout (read by `ppdsl.analysis.layers`); `allow_empty`: a stage without layers is meant."""

    counts: tuple[int, ...] | None
    layout: str | None
    allow_empty: bool
    span: Span


@dataclass(frozen=True)
class ScheduleDef:
    """A resolved schedule: everything the file declares, names resolved, expressions and the order checked and
    typed. Data only: nothing executable and no AST (`ppdsl.language.runnable.compiled` is its executable form,
    `ppdsl.language.readable_order` its plan-module form)."""

    name: str
    doc: str
    path: str
    params: dict[str, ParamDef]
    requires: tuple[Require, ...]
    job_types: tuple[JobType, ...]
    placement_kind: str  # looped | vshape | expr
    placement: Expr | None  # the stage of (rank, chunk) when placement_kind is expr
    costs: dict[str, Expr]
    comm: dict[str, Expr]
    memory: dict[str, tuple[str, Expr]]  # job -> (allocates | frees, amount)
    memory_limit: Expr | None
    rules: tuple[StreamRule, ...]
    rule_priorities: tuple[Expr | None, ...]
    order: OrderDef | None
    tables: tuple[TableDef, ...]  # literal orders, the first whose `when` holds is used
    sites: tuple[Site, ...]
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, every file read
    functions: tuple[Function, ...] = ()
    host_limit: Expr | None = None  # `memory host limit = ...`: all ranks' offloaded memory, at `rank` 0
    partition: PartitionDef | None = None  # `partition = [...]`: the layers each virtual stage holds

    def type_index(self, name: str) -> int:
        for i, jt in enumerate(self.job_types):
            if jt.name == name or jt.alias == name:
                return i
        raise KeyError(name)

    @property
    def summary(self) -> str:
        """The docstring's first paragraph on one line: its summary sentence, whole however it was wrapped."""
        return " ".join(self.doc.split("\n\n")[0].split()) if self.doc else ""
