"""The order compiler: an `order { ... }` body -> Python source, with its statements' name and type checks.

Why Python source: an order body runs once per rank and may emit hundreds of thousands of jobs; compiled to a
plain Python function (loops stay loops, counters are list cells) it runs at interpreter speed with no tree
walking, and the same text is what `ppdsl compile` puts into a generated plan module. Expressions are typed and
compiled by `typecheck.ExprCompiler`.

The same compiler has a second, readable backend (`OrderCompiler(..., readable=True)`) for `ppdsl compile`: the
order becomes the body of a plan module's `job_list`, with `jobs.append(("forward", chunk, k))`, counters in a
dict named `next_mb`, user names as written (`readable_order.readable_name`), no site ids, and each source line as
a comment.
"""

import difflib
import re
import textwrap
from collections.abc import Callable

from ppdsl.common.diagnostics import Span
from ppdsl.language import ast, types
from ppdsl.language.functions import call_cost
from ppdsl.language.ir import Site
from ppdsl.language.jobs import JobCodec
from ppdsl.language.jobtypes import SHARED_COUNTER
from ppdsl.language.pysource import LINE_LENGTH, file_lines, mangle, py_str, py_text, site_text
from ppdsl.language.readable_order import readable_expr, readable_name
from ppdsl.language.typecheck import BUILTIN_NAMES, INTEGER_HELP, ExprCompiler, Scope
from ppdsl.language.types import BOOL, FLOAT, INT

# Python allows 20 statically nested loops in a function; an order's `repeat`, `for` and `job * n` each compile
# to one (in the checker's function and in a plan's `job_list`), so deeper loops are refused at the loop.
MAX_LOOP_DEPTH = 20


class OrderCompiler:
    """Compiles an `order { ... }` body to the source of

        def _order(v_pp, v_vpp, v_microbatches, v_rank, <params>, _jobs, _sites, _ctr, _V, _T, _cap, _fail, _bud)

    which appends packed job codes and site ids for one rank. `_ctr[t][c]` is the per-job-type, per-chunk
    micro-batch counter (shared by backward and backward_b) that gives `forward` "the next micro-batch".

    With `readable=True` it compiles the same body, with the same checks and diagnostics, to the body of a plan
    module's `job_list(rank, pp, vpp, microbatches, ...)` instead (see `_compile_readable`); `location` names a
    statement's source line in its comments and error messages (default `file:line`).
    """

    def __init__(
        self,
        exprs: ExprCompiler,
        type_index: dict[str, int],
        type_names: list[str],
        params: list[str],
        sites: list[Site],
        file_texts: dict[str, str],
        readable: bool = False,
        location: Callable[[Span], str] | None = None,
    ):
        self.exprs = exprs
        self.type_index = type_index
        self.type_names = type_names
        self.params = params
        self.sites = sites
        self.file_texts = file_texts
        self.lines: list[str] = []
        self.line_sites: dict[int, int] = {}
        self.used_types: set[int] = set()
        self._tmp = 0
        self.readable = readable
        self.location = location or (lambda span: f"{span.file}:{span.line}")
        self.helpers: set[str] = set()  # readable: the plan module's helper functions the body calls
        self._counted: set[int] = set()  # readable: counter slots used
        self._counted_types: set[int] = set()  # readable: job types that took their micro-batch from a counter
        self._commented: tuple[str, int] | None = None  # readable: the source line the last comment showed
        self._chunk_known = 0  # readable: literal chunks up to this are proven to exist where we are
        self._loops = 0  # loops around the statement being compiled

    def _site(self, span: Span) -> int:
        self.sites.append(Site(span, site_text(self.file_texts.get(span.file, ""), span)))
        return len(self.sites) - 1

    def _emit(self, indent: int, line: str, site: int) -> None:
        self.lines.append("    " * indent + line)
        self.line_sites[len(self.lines)] = site

    def _fresh(self, stem: str) -> str:
        self._tmp += 1
        return f"_{stem}{self._tmp}"

    def compile(self, body: tuple[ast.Stmt, ...], span: Span) -> str:
        scope = Scope({n: INT for n in ("pp", "vpp", "microbatches", "rank")}, "the order")
        for p, ty in self.params:
            scope.names[p] = ty
        if self.readable:
            return self._compile_readable(body, scope)
        header_site = self._site(span)
        args = ", ".join(mangle(n) for n in ("pp", "vpp", "microbatches", "rank"))
        pnames = "".join(f", {mangle(p)}" for p, _ in self.params)
        self._emit(0, f"def _order({args}{pnames}, _jobs, _sites, _ctr, _V, _T, _cap, _fail, _bud):", header_site)
        self._emit(1, "_ja = _jobs.append", header_site)
        self._emit(1, "_sa = _sites.append", header_site)
        counters_at = len(self.lines)
        self._block(body, scope, 1)
        # Bind the counter rows of the job types used, once, as locals (fast access in loops).
        binds = [f"    _ctr_{t} = _ctr[{t}]" for t in sorted(self.used_types)]
        self.lines[counters_at:counters_at] = binds
        shifted = {}
        for line_no, site in self.line_sites.items():
            shifted[line_no + (len(binds) if line_no > counters_at else 0)] = site
        self.line_sites = shifted
        self._emit(1, "return _bud", header_site)  # what is left of the budget (tests measure what the library needs)
        return "\n".join(self.lines) + "\n"

    def _block(self, body: tuple[ast.Stmt, ...], scope: Scope, indent: int) -> None:
        chunk_known = self._chunk_known  # what a block proves may not have run: forget it after the block
        if not body:
            self._emit(indent, "pass", 0)
        for stmt in body:
            self._stmt(stmt, scope, indent)
        self._chunk_known = chunk_known

    def _bind(self, name: str, span: Span, scope: Scope, ty: str) -> None:
        """`name` bound to a value of type `ty` from here on. A name keeps its type (an integer may go into a real
        variable): after a block that may not have run, its type must be the same either way."""
        if name in ("pp", "vpp", "microbatches", "rank", "stage") or name in dict(self.params):
            self.exprs.error(
                "E003",
                f"`{name}` is {'a size' if name in BUILTIN_NAMES else 'a parameter'} and cannot be rebound",
                span,
                help="choose another name",
            )
        elif name in self.exprs.functions:
            self.exprs.error("E003", f"`{name}` is a function", span, help="give the value another name")
        elif name in scope.names and not types.accepts(scope.names[name], ty):
            old = scope.names[name]
            self.exprs.error(
                "E010" if (old, ty) == (INT, FLOAT) else "E011",
                f"`{name}` is {types.describe(old)}: `let` cannot make it {types.describe(ty)}",
                span,
                label=f"this is {types.describe(ty)}",
                help=INTEGER_HELP if (old, ty) == (INT, FLOAT) else f"give the {ty} value another name",
            )
            return
        elif name == "chunk" and ty != INT:
            self.exprs.error(
                "E010" if ty == FLOAT else "E011",
                "`chunk` names the current chunk: it must be an integer",
                span,
                label=f"this is {types.describe(ty)}",
                help=INTEGER_HELP if ty == FLOAT else "give the condition another name",
            )
        scope.names[name] = ty

    def _stmt(self, stmt: ast.Stmt, scope: Scope, indent: int) -> None:
        site = self._site(stmt.span)
        if self._loops >= MAX_LOOP_DEPTH and self._is_loop(stmt):
            self.exprs.error(
                "E065",
                f"loops are nested too deeply: more than {MAX_LOOP_DEPTH} levels",
                stmt.span,
                label=f"loop {MAX_LOOP_DEPTH + 1}",
                help=f"Python compiles the order and allows {MAX_LOOP_DEPTH} nested loops (a `job * n` is one): "
                "merge loops, or unroll the innermost",
            )
            return
        if self.readable and not isinstance(stmt, ast.Let):
            self._source_comment(stmt.span, indent)
        if isinstance(stmt, ast.Let):
            src, ty = self.exprs.typed(stmt.value, scope)
            self._bind(stmt.name, stmt.span, scope, ty)
            code = f"{self._var(stmt.name)} = {self._py(src)}"
            if self.readable:  # a `let` alone on its line reads as its code: the location can trail it
                code = self._source_comment(stmt.span, indent, code)
            self._emit(indent, code, site)
            if self._loops and ty == INT and not self.readable:
                # a value rebound in a loop can grow without end (`let x = x * x`): stop it while it is small
                var = mangle(stmt.name)
                self._emit(indent, f"if {var} > _BIG or {var} < -_BIG: _fail({site}, 'big', {var})", site)
        elif isinstance(stmt, ast.JobStmt):
            self._job(stmt, scope, indent, site)
        elif isinstance(stmt, ast.Repeat):
            count = self.exprs.expect(stmt.count, scope, INT, "a repeat count")
            if self.readable:
                self._emit(indent, f"for _ in range({self._checked_count(count, stmt.span)}):", site)
            else:
                var = self._counted_loop(count, indent, site, self._weight(stmt.body))
                self._emit(indent, f"for {var} in range({var}):", site)
            self._loop_block(stmt.body, scope.child(), indent + 1)
        elif isinstance(stmt, ast.For):
            start = self.exprs.expect(stmt.start, scope, INT, "a loop bound")
            stop = self.exprs.expect(stmt.stop, scope, INT, "a loop bound")
            inner = scope.child()
            self._bind(stmt.var, stmt.span, inner, INT)
            if self.readable:  # no bound check: the checker's guard against hangs, not a property of a schedule
                start, stop = self._py(start), self._py(stop)
                bounds = stop if start == "0" else f"{start}, {stop}"
                self._emit(indent, f"for {self._var(stmt.var)} in range({bounds}):", site)
            else:
                bound = self._fresh("n")
                self._emit(indent, f"{bound} = {stop} - ({start})", site)
                self._emit(indent, f"if {bound} > 0:", site)
                self._emit(indent + 1, f"_bud -= {bound} * {self._weight(stmt.body)}", site)
                self._emit(indent + 1, f"if {bound} > _cap or _bud < 0: _fail({site}, 'loop', {bound}, _bud)", site)
                self._emit(indent, f"for {mangle(stmt.var)} in range({start}, {stop}):", site)
            self._loop_block(stmt.body, inner, indent + 1)
        elif isinstance(stmt, ast.If):
            for i, (test, body) in enumerate(stmt.branches):
                src = self.exprs.expect(test, scope, BOOL, "an `if` test")
                self._emit(indent, f"{'if' if i == 0 else 'elif'} {self._py(src)}:", site)
                self._block(body, scope.child(), indent + 1)
            if stmt.orelse:
                self._emit(indent, "else:", site)
                self._block(stmt.orelse, scope.child(), indent + 1)
        else:  # pragma: no cover - the parser builds no other statement
            raise TypeError(stmt)

    def _counted_loop(self, count_src: str, indent: int, site: int, weight: int) -> str:
        """A repeat count, checked, and charged to the evaluation budget `_bud` before the loop runs."""
        var = self._fresh("n")
        self._emit(indent, f"{var} = {count_src}", site)
        self._emit(indent, f"_bud -= {var} * {weight}", site)
        self._emit(indent, f"if {var} < 0 or {var} > _cap or _bud < 0: _fail({site}, 'count', {var}, _bud)", site)
        return var

    @staticmethod
    def _is_loop(stmt: ast.Stmt) -> bool:
        """Compiled as a Python `for` loop."""
        return isinstance(stmt, (ast.Repeat, ast.For)) or (isinstance(stmt, ast.JobStmt) and stmt.times is not None)

    def _loop_block(self, body: tuple[ast.Stmt, ...], scope: Scope, indent: int) -> None:
        self._loops += 1
        self._block(body, scope, indent)
        self._loops -= 1

    def _weight(self, body: tuple[ast.Stmt, ...]) -> int:
        """Evaluation steps of one run of `body`: a step per statement and per function call its expressions make
        (a nested loop's own iterations are charged when it starts)."""
        functions = self.exprs.functions
        steps = 0
        for stmt in body:
            steps += 1
            if isinstance(stmt, ast.Let):
                steps += call_cost(stmt.value, functions)
            elif isinstance(stmt, ast.JobStmt):
                steps += sum(call_cost(v, functions) for _, v, _ in stmt.kwargs)
                steps += call_cost(stmt.times, functions) if stmt.times is not None else 0
            elif isinstance(stmt, ast.Repeat):
                steps += call_cost(stmt.count, functions)
            elif isinstance(stmt, ast.For):
                steps += call_cost(stmt.start, functions) + call_cost(stmt.stop, functions)
            elif isinstance(stmt, ast.If):
                steps += sum(call_cost(test, functions) + self._weight(b) for test, b in stmt.branches)
                steps += self._weight(stmt.orelse)
        return max(steps, 1)

    def _job(self, stmt: ast.JobStmt, scope: Scope, indent: int, site: int) -> None:
        t = self.type_index.get(stmt.name)
        if t is None:
            close = difflib.get_close_matches(stmt.name, list(self.type_index), n=1)
            self.exprs.error(
                "E002",
                f"unknown job type `{stmt.name}`",
                stmt.name_span,
                label="not a job type",
                help=f"did you mean `{close[0]}`?"
                if close
                else f'declare it with `job {stmt.name} : <region> ops "<pattern>"`',
            )
            return
        slot = self.type_index[SHARED_COUNTER.get(self.type_names[t], self.type_names[t])]
        self.used_types.add(slot)
        chunk_src = mangle("chunk") if "chunk" in scope.names else "0"
        mb_src = None
        for key, value, key_span in stmt.kwargs:
            if key == "chunk":
                chunk_src = self.exprs.expect(value, scope, INT, "a chunk")
            elif key == "mb":
                mb_src = self.exprs.expect(value, scope, INT, "a micro-batch")
            else:
                self.exprs.error(
                    "E004",
                    f"unknown argument `{key}`",
                    key_span,
                    help="a job takes `chunk = <expr>` and `mb = <expr>`",
                )
        if self.type_names[t] == "optimizer" and chunk_src != "0":
            chunk_src = "0"
        if self.readable:
            self._readable_job(stmt, t, slot, chunk_src, mb_src, scope, indent, site)
            return
        if stmt.times is not None:
            count = self.exprs.expect(stmt.times, scope, INT, "a repeat count")
            var = self._counted_loop(count, indent, site, 1)
            self._emit(indent, f"for {var} in range({var}):", site)
            indent += 1
        if chunk_src == "0":
            c = "0"
        else:
            c = "_c"
            self._emit(indent, f"_c = {chunk_src}", site)
            self._emit(indent, f"if not 0 <= _c < _V: _fail({site}, 'chunk', _c)", site)
        if mb_src is None:
            self._emit(indent, f"_k = _ctr_{slot}[{c}]", site)
            self._emit(indent, f"_ctr_{slot}[{c}] = _k + 1", site)
        else:
            self._emit(indent, f"_k = {mb_src}", site)
            self._emit(indent, f"if _k < 0: _fail({site}, 'mb', _k)", site)
        code = JobCodec.pack_source(t, c, "_k", "_V", "_T")
        self._emit(indent, f"_ja({code}); _sa({site})", site)

    # ------------------------------------------------------------------ the readable backend

    def _var(self, name: str) -> str:
        return readable_name(name) if self.readable else mangle(name)

    def _py(self, src: str) -> str:
        if not self.readable:
            return src
        if "_ceildiv(" in src:
            self.helpers.add("_ceildiv")
        return readable_expr(src)

    def _compile_readable(self, body: tuple[ast.Stmt, ...], scope: Scope) -> str:
        """The body of `job_list`: `jobs`, the counters, the statements (each source line as a comment), `return`."""
        self._block(body, scope, 1)
        head = ["    jobs: list[tuple[str, int, int]] = []"]
        if self._counted:
            head.append("    # next_mb[job][chunk]: the micro-batch the next job of that type takes on that chunk")
            head.append("    next_mb = {")
            for slot in sorted(self._counted):
                note = ""
                if self.type_names[slot] == "backward" and self.type_index.get("backward_b") in self._counted_types:
                    note = "  # backward_b's too: a micro-batch's backward is whole or split"
                head.append(f"        {py_str(self.type_names[slot])}: [0] * vpp,{note}")
            head.append("    }")
        return "\n".join([*head, *self.lines, "    return jobs"]) + "\n"

    def _source_comment(self, span: Span, indent: int, code: str | None = None) -> str | None:
        """Comments for the first statement of each source line: the comment lines just above it in the source (they
        say why), then `# file:line: <the line>`. Given the `code` of a statement alone on its line, the location
        trails the code instead (`total = microbatches * vpp  # vpp.sched:26`); returns the code."""
        previous = self._commented
        if previous == (span.file, span.line):
            return code
        self._commented = (span.file, span.line)
        lines = file_lines(self.file_texts.get(span.file, ""))
        text = lines[span.line - 1].strip() if 1 <= span.line <= len(lines) else ""
        above = span.line - 1
        while above >= 1 and lines[above - 1].strip().startswith("#"):
            above -= 1
        if previous is not None and previous[0] == span.file:
            above = max(above, previous[1])
        room = LINE_LENGTH - 4 * indent
        for line in lines[above : span.line - 1]:
            for part in textwrap.wrap(py_text(line.strip().lstrip("#").strip()), room - 2) or [""]:
                self._emit(indent, f"# {part}".rstrip(), 0)
        where = py_text(self.location(span))
        trailing = f"  # {where}"
        if code is not None and text == site_text(self.file_texts.get(span.file, ""), span):
            if len(code) + len(trailing) <= room:
                return code + trailing
        text = re.sub(r"\s{2,}#", "  #", text)  # a source comment, pulled in from its alignment column
        comment = f"# {where}: {py_text(text)}".rstrip()
        if len(comment) > room:
            comment = comment[: room - 3].rstrip() + "..."
        self._emit(indent, comment, 0)
        return code

    def _where(self, span: Span) -> str:
        return py_str(self.location(span))

    def _checked_count(self, src: str, span: Span) -> str:
        """A repeat count as the argument of `range`: a literal as it is, else checked not to be negative."""
        src = self._py(src)
        if src.isdigit():
            return src
        self.helpers.add("_count")
        return f"_count({src}, {self._where(span)})"

    def _readable_job(
        self,
        stmt: ast.JobStmt,
        t: int,
        slot: int,
        chunk_src: str,
        mb_src: str | None,
        scope: Scope,
        indent: int,
        site: int,
    ) -> None:
        """`jobs.append((type, chunk, micro-batch))`, the chunk checked to exist and the counter moved on."""
        name = py_str(self.type_names[t])
        chunk_known = self._chunk_known
        if stmt.times is not None:
            count = self.exprs.expect(stmt.times, scope, INT, "a repeat count")
            self._emit(indent, f"for _ in range({self._checked_count(count, stmt.span)}):", site)
            indent += 1
        chunk = self._py(chunk_src)
        if chunk != "0" and not (chunk.isdigit() and int(chunk) <= self._chunk_known):
            if not chunk.isidentifier() and not chunk.isdigit():
                self._emit(indent, f"chunk_ = {chunk}", site)
                chunk = "chunk_"
            self.helpers.add("_check_chunk")
            self._emit(indent, f"_check_chunk({chunk}, vpp, {self._where(stmt.span)})", site)
            if chunk.isdigit():  # vpp does not change: later literal chunks up to this one need no check
                self._chunk_known = int(chunk)
        if mb_src is None:
            counter = f"next_mb[{py_str(self.type_names[slot])}][{chunk}]"
            self._counted.add(slot)
            self._counted_types.add(t)
            self._emit(indent, f"jobs.append(({name}, {chunk}, {counter}))", site)
            self._emit(indent, f"{counter} += 1", site)
        else:
            mb = self._py(mb_src)
            if not mb.isdigit():
                self.helpers.add("_micro_batch")
                mb = f"_micro_batch({mb}, {self._where(stmt.span)})"
            self._emit(indent, f"jobs.append(({name}, {chunk}, {mb}))", site)
        if stmt.times is not None:  # the loop may run no times: what it proved is not known after it
            self._chunk_known = chunk_known
