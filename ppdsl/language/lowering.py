"""The order compiler's shared lowering: a checked `order { ... }` (the IR's `OrderDef`) -> Python statements.

Why Python source: an order body runs once per rank and may emit hundreds of thousands of jobs; compiled to a
plain Python function (loops stay loops, counters are list cells) it runs at interpreter speed with no tree
walking, and the same statements, written for a reader, are a plan module's `job_list`.

`OrderLowering` is the walk both backends share: blocks and their indentation, `if` / `elif` / `else`, the loops
around a statement, the generated line -> site table. Its two sibling backends say how a `let`, a job and a loop
are written: `fast_order.FastOrder`, the checker's function (`runnable.compiled` runs it), and
`readable_order.ReadableOrder`, a plan module's `job_list` (`ppdsl compile`). Sharing the walk, they cannot drift
apart in what a statement means (`tests/codegen/test_generate.py::test_job_list_equals_expand_over_the_sweep`
runs both on every library schedule over a sweep of sizes).
"""

from __future__ import annotations

from ppdsl.language.ir import EmitJob, ForRange, IfElse, Let, OrderDef, Repeat, ScheduleDef, Stmt


class OrderLowering:
    """Lowers the statements of `defn.order`; a backend implements `let`, `job`, `repeat`, `for_range` and
    `expr` (an expression's source as the backend writes it), and `lower` (the whole text)."""

    def __init__(self, defn: ScheduleDef):
        assert defn.order is not None, "a schedule with an order"
        self.defn = defn
        self.order: OrderDef = defn.order
        self.type_names = [jt.name for jt in defn.job_types]
        self.lines: list[str] = []
        self.line_sites: dict[int, int] = {}  # generated line (1-based) -> the site of the statement it is part of
        self.loops = 0  # loops around the statement being lowered

    def lower(self) -> str:
        raise NotImplementedError

    def emit(self, indent: int, line: str, site: int) -> None:
        self.lines.append("    " * indent + line)
        self.line_sites[len(self.lines)] = site

    def block(self, body: tuple[Stmt, ...], indent: int) -> None:
        if not body:
            self.emit(indent, "pass", 0)
        for stmt in body:
            self.statement(stmt, indent)

    def loop_block(self, body: tuple[Stmt, ...], indent: int) -> None:
        self.loops += 1
        self.block(body, indent)
        self.loops -= 1

    def statement(self, stmt: Stmt, indent: int) -> None:
        if isinstance(stmt, Let):
            self.let(stmt, indent)
        elif isinstance(stmt, EmitJob):
            self.job(stmt, indent)
        elif isinstance(stmt, Repeat):
            self.repeat(stmt, indent)
        elif isinstance(stmt, ForRange):
            self.for_range(stmt, indent)
        elif isinstance(stmt, IfElse):
            self.if_else(stmt, indent)
        else:  # pragma: no cover - the checker builds no other statement
            raise TypeError(stmt)

    def if_else(self, stmt: IfElse, indent: int) -> None:
        for i, (test, body) in enumerate(stmt.branches):
            self.emit(indent, f"{'if' if i == 0 else 'elif'} {self.expr(test.source)}:", stmt.site)
            self.block(body, indent + 1)
        if stmt.orelse:
            self.emit(indent, "else:", stmt.site)
            self.block(stmt.orelse, indent + 1)

    # ------------------------------------------------------------------ what each backend writes

    def expr(self, source: str) -> str:
        raise NotImplementedError

    def let(self, stmt: Let, indent: int) -> None:
        raise NotImplementedError

    def job(self, stmt: EmitJob, indent: int) -> None:
        raise NotImplementedError

    def repeat(self, stmt: Repeat, indent: int) -> None:
        raise NotImplementedError

    def for_range(self, stmt: ForRange, indent: int) -> None:
        raise NotImplementedError
