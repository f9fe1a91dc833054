"""The abstract syntax tree of a `.sched` file: what was written, with where it was written.

Built by `ppdsl.language.parser`; nothing here checks meaning (see `ppdsl.language.resolve`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Span

# ---------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Num:
    value: int | float
    span: Span


@dataclass(frozen=True)
class Bool:
    value: bool
    span: Span


@dataclass(frozen=True)
class Var:
    name: str
    span: Span


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * // % / == != < <= > >= and or
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str  # - not
    operand: Expr
    span: Span


@dataclass(frozen=True)
class Cond:
    test: Expr
    then: Expr
    orelse: Expr
    span: Span


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Expr, ...]
    span: Span
    func_span: Span


Expr = Num | Bool | Var | BinOp | Unary | Cond | Call

# ---------------------------------------------------------------- order statements


@dataclass(frozen=True)
class Let:
    name: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class JobStmt:
    """`forward`, `forward(chunk = c, mb = i)`, `forward * n`."""

    name: str
    kwargs: tuple[tuple[str, Expr, Span], ...]
    times: Expr | None
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Repeat:
    count: Expr
    body: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True)
class For:
    var: str
    start: Expr
    stop: Expr
    body: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True)
class If:
    branches: tuple[tuple[Expr, tuple[Stmt, ...]], ...]
    orelse: tuple[Stmt, ...]
    span: Span


Stmt = Let | JobStmt | Repeat | For | If

# ---------------------------------------------------------------- top-level items


@dataclass(frozen=True)
class Docstring:
    text: str
    span: Span


@dataclass(frozen=True)
class ScheduleName:
    name: str
    span: Span


@dataclass(frozen=True)
class Include:
    path: str
    span: Span


@dataclass(frozen=True)
class Param:
    name: str
    default: Expr
    span: Span


@dataclass(frozen=True)
class FnDef:
    """`fn chunk_of(step) = step // per_round() % vpp`: a pure function over its arguments, the sizes and the
    parameters."""

    name: str
    params: tuple[str, ...]
    body: Expr
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Require:
    condition: Expr
    message: str
    span: Span


@dataclass(frozen=True)
class JobDecl:
    """`job recv_forward (RF) : forward ops "pd_op.recv_v2" before forward receives`."""

    name: str
    alias: str | None
    region: str
    ops: tuple[str, ...]
    before: str | None
    after: str | None
    receives: bool
    sends: bool
    span: Span
    region_span: Span


@dataclass(frozen=True)
class Placement:
    kind: str  # looped | vshape | expr
    expr: Expr | None
    span: Span


@dataclass(frozen=True)
class Cost:
    job: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class Comm:
    key: str  # latency | bandwidth | offload bandwidth | offload latency | offload duplex
    value: Expr
    span: Span


@dataclass(frozen=True)
class Memory:
    job: str
    verb: str  # allocates | frees | keeps (recompute) | moves (offload)
    value: Expr
    span: Span


@dataclass(frozen=True)
class MemoryLimit:
    value: Expr
    span: Span


@dataclass(frozen=True)
class MemorySetting:
    """`memory host limit = ...`, `memory recompute fraction = 0.5`: a named setting of memory."""

    subject: str
    key: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class Partition:
    """`partition = [9, 10, 9, 6]` (layers per virtual stage) or `partition = "Et*8|t*9|t*8|t*7L"` (a Megatron
    layout), optionally `allow empty`."""

    counts: tuple[int, ...] | None
    layout: str | None
    allow_empty: bool
    span: Span


@dataclass(frozen=True)
class Rule:
    """Stream / priority / attribute rule for program ops whose name matches `pattern`."""

    pattern: str
    job: str | None
    stream: str | None
    priority: Expr | None
    attrs: tuple[tuple[str, bool | int | float | str], ...]
    span: Span
    # where each item is written, for diagnostics about it: the stream's, then each attr's (in `attrs` order)
    stream_span: Span | None = None
    attr_spans: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Order:
    body: tuple[Stmt, ...]
    span: Span


@dataclass(frozen=True)
class Cell:
    """One table cell: `F3`, `B0.c1`, `backward_w2`, `optimizer`."""

    text: str
    span: Span


@dataclass(frozen=True)
class TableRow:
    rank: int
    cells: tuple[Cell, ...]
    span: Span


@dataclass(frozen=True)
class Table:
    """A literal order, one row per rank; `when` picks it among several tables by size."""

    rows: tuple[TableRow, ...]
    when: Expr | None
    span: Span


Item = (
    Docstring
    | ScheduleName
    | Include
    | Param
    | FnDef
    | Require
    | JobDecl
    | Placement
    | Cost
    | Comm
    | Memory
    | MemoryLimit
    | MemorySetting
    | Partition
    | Rule
    | Order
    | Table
)


@dataclass
class SchedFile:
    path: str
    text: str
    items: list[Item] = field(default_factory=list)
