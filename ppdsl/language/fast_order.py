"""The checker's backend of the order compiler: a checked order -> the source of

    def _order(v_pp, v_vpp, v_microbatches, v_rank, <params>, _jobs, _sites, _ctr, _V, _T, _cap, _fail, _bud)

which appends packed job codes (`JobCodec`) and site ids for one rank. `_ctr[t][c]` is the per-job-type,
per-chunk micro-batch counter (shared by backward and backward_b) that gives `forward` "the next micro-batch".
Every loop is charged to the evaluation budget `_bud` before it runs and bounded by `_cap`; a chunk or a
micro-batch out of range, or a value growing without end, calls `_fail(site, kind, value)`.
"""

from __future__ import annotations

from ppdsl.language.ir import EmitJob, ForRange, IfElse, Let, Repeat, ScheduleDef, Stmt
from ppdsl.language.lowering import OrderLowering
from ppdsl.language.pysource import mangle
from ppdsl.language.types import INT
from ppdsl.plan.jobs import JobCodec


def fast_order_source(defn: ScheduleDef) -> tuple[str, dict[int, int]]:
    """The source of `_order` for `defn`'s order, and its generated line -> site table (to place runtime errors)."""
    lowering = FastOrder(defn)
    return lowering.lower(), lowering.line_sites


class FastOrder(OrderLowering):
    def __init__(self, defn: ScheduleDef):
        super().__init__(defn)
        self.used_counters: set[int] = set()
        self._tmp = 0

    def _fresh(self, stem: str) -> str:
        self._tmp += 1
        return f"_{stem}{self._tmp}"

    def lower(self) -> str:
        header_site = self.order.site
        args = ", ".join(mangle(n) for n in ("pp", "vpp", "microbatches", "rank"))
        pnames = "".join(f", {mangle(p)}" for p in self.defn.params)
        self.emit(0, f"def _order({args}{pnames}, _jobs, _sites, _ctr, _V, _T, _cap, _fail, _bud):", header_site)
        self.emit(1, "_ja = _jobs.append", header_site)
        self.emit(1, "_sa = _sites.append", header_site)
        counters_at = len(self.lines)
        self.block(self.order.body, 1)
        # Bind the counter rows of the job types used, once, as locals (fast access in loops).
        binds = [f"    _ctr_{t} = _ctr[{t}]" for t in sorted(self.used_counters)]
        self.lines[counters_at:counters_at] = binds
        shifted = {}
        for line_no, site in self.line_sites.items():
            shifted[line_no + (len(binds) if line_no > counters_at else 0)] = site
        self.line_sites = shifted
        self.emit(1, "return _bud", header_site)  # what is left of the budget (tests measure what the library needs)
        return "\n".join(self.lines) + "\n"

    def expr(self, source: str) -> str:
        return source

    def let(self, stmt: Let, indent: int) -> None:
        var = mangle(stmt.name)
        self.emit(indent, f"{var} = {stmt.value.source}", stmt.site)
        if self.loops and stmt.value.type == INT:
            # a value rebound in a loop can grow without end (`let x = x * x`): stop it while it is small
            self.emit(indent, f"if {var} > _BIG or {var} < -_BIG: _fail({stmt.site}, 'big', {var})", stmt.site)

    def repeat(self, stmt: Repeat, indent: int) -> None:
        var = self._counted_loop(stmt.count.source, indent, stmt.site, weight(stmt.body))
        self.emit(indent, f"for {var} in range({var}):", stmt.site)
        self.loop_block(stmt.body, indent + 1)

    def for_range(self, stmt: ForRange, indent: int) -> None:
        site, start, stop = stmt.site, stmt.start.source, stmt.stop.source
        bound = self._fresh("n")
        self.emit(indent, f"{bound} = {stop} - ({start})", site)
        self.emit(indent, f"if {bound} > 0:", site)
        self.emit(indent + 1, f"_bud -= {bound} * {weight(stmt.body)}", site)
        self.emit(indent + 1, f"if {bound} > _cap or _bud < 0: _fail({site}, 'loop', {bound}, _bud)", site)
        self.emit(indent, f"for {mangle(stmt.var)} in range({start}, {stop}):", site)
        self.loop_block(stmt.body, indent + 1)

    def _counted_loop(self, count_src: str, indent: int, site: int, steps: int) -> str:
        """A repeat count, checked, and charged to the evaluation budget `_bud` before the loop runs."""
        var = self._fresh("n")
        self.emit(indent, f"{var} = {count_src}", site)
        self.emit(indent, f"_bud -= {var} * {steps}", site)
        self.emit(indent, f"if {var} < 0 or {var} > _cap or _bud < 0: _fail({site}, 'count', {var}, _bud)", site)
        return var

    def job(self, stmt: EmitJob, indent: int) -> None:
        site = stmt.site
        self.used_counters.add(stmt.counter)
        if stmt.times is not None:
            var = self._counted_loop(stmt.times.source, indent, site, 1)
            self.emit(indent, f"for {var} in range({var}):", site)
            indent += 1
        if stmt.chunk.source == "0":
            c = "0"
        else:
            c = "_c"
            self.emit(indent, f"_c = {stmt.chunk.source}", site)
            self.emit(indent, f"if not 0 <= _c < _V: _fail({site}, 'chunk', _c)", site)
        if stmt.mb is None:
            self.emit(indent, f"_k = _ctr_{stmt.counter}[{c}]", site)
            self.emit(indent, f"_ctr_{stmt.counter}[{c}] = _k + 1", site)
        else:
            self.emit(indent, f"_k = {stmt.mb.source}", site)
            self.emit(indent, f"if _k < 0: _fail({site}, 'mb', _k)", site)
        code = JobCodec.pack_source(stmt.type, c, "_k", "_V", "_T")
        self.emit(indent, f"_ja({code}); _sa({site})", site)


def weight(body: tuple[Stmt, ...]) -> int:
    """Evaluation steps of one run of `body`: a step per statement and per function call its expressions make
    (a nested loop's own iterations are charged when it starts)."""
    steps = 0
    for stmt in body:
        steps += 1
        if isinstance(stmt, Let):
            steps += stmt.value.calls
        elif isinstance(stmt, EmitJob):
            steps += stmt.chunk.calls + (stmt.mb.calls if stmt.mb else 0) + (stmt.times.calls if stmt.times else 0)
        elif isinstance(stmt, Repeat):
            steps += stmt.count.calls
        elif isinstance(stmt, ForRange):
            steps += stmt.start.calls + stmt.stop.calls
        elif isinstance(stmt, IfElse):
            steps += sum(test.calls + weight(b) for test, b in stmt.branches)
            steps += weight(stmt.orelse)
    return max(steps, 1)
