"""AST expressions and order bodies -> Python source, with static name and type checks.

Why Python source: an order body runs once per rank and may emit hundreds of thousands of jobs; compiled to a
plain Python function (loops stay loops, counters are list cells) it runs at interpreter speed with no tree
walking, and the same text is what `ppdsl compile` puts into a generated plan module.

Every user name `x` becomes `v_x` in the generated code, so no user name can shadow a Python name.

The same compiler has a second, readable backend (`OrderCompiler(..., readable=True)`) for `ppdsl compile`: the
order becomes the body of a plan module's `job_list`, with `jobs.append(("forward", chunk, k))`, counters in a
dict named `next_mb`, user names as written (`readable_name`), no site ids, and each source line as a comment.
"""

from __future__ import annotations

import ast as pyast
import builtins
import difflib
import keyword
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Diagnostic, Span
from ppdsl.language import ast
from ppdsl.language.ir import Site
from ppdsl.language.jobtypes import SHARED_COUNTER

INT, FLOAT, BOOL = "int", "float", "bool"
FUNCTIONS = {"min": (2, None), "max": (2, None), "abs": (1, 1), "ceildiv": (2, 2)}
BUILTIN_NAMES = ("pp", "vpp", "microbatches", "rank", "chunk", "stage")
PY_OPS = {"and": " and ", "or": " or "}
LINE_LENGTH = 120  # of readable code, as the project's ruff settings


def mangle(name: str) -> str:
    return f"v_{name}"


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


# What a generated plan module defines or uses itself (`ppdsl/codegen/templates/`): no user name may take these.
PLAN_NAMES = frozenset(
    "SCHEDULE SOURCE SOURCE_SHA256 INCLUDED_SHA256 PPDSL_VERSION PARAMS JOB_TYPES PLACEMENT STREAM_RULES REQUIRES "
    "TYPE_CHECKING annotations paddle stage_of stream_rules check_requires job_list build_plan main_program "
    "startup_program params jobs next_mb holds broken req ok sizes rules rule priority".split()
)
_RESERVED = PLAN_NAMES | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
_EXPONENT = re.compile(r"(\d)e\+(\d)")


def readable_name(name: str) -> str:
    """The Python name of user name `name` in readable code: `name` itself where that is safe, else `name_`.

    Unsafe: a Python keyword or builtin, a name the plan module uses, or one starting or ending with `_`. The
    result ends in `_` exactly when `name` is unsafe or already ends in `_`, so two user names never meet.
    """
    unsafe = name in _RESERVED or name.startswith("_") or name.endswith("_")
    return f"{name}_" if unsafe else name


def readable_expr(src: str) -> str:
    """An expression from `ExprCompiler` as a person writes it: user names unmangled, only the needed parentheses."""
    tree = pyast.parse(src, mode="eval")
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Name) and node.id.startswith("v_"):
            node.id = readable_name(node.id[2:])
    return _EXPONENT.sub(r"\1e\2", pyast.unparse(tree))  # `1e+20` as ruff format writes it, `1e20`


def py_str(text: str) -> str:
    """A Python string literal for `text`, double-quoted unless that would need escapes (as ruff format does)."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:  # then `'` is not in it either: repr escaped no quote
        literal = '"' + literal[1:-1] + '"'
    return literal


@dataclass
class Scope:
    """Names visible to an expression, with their static types."""

    names: dict[str, str]
    context: str  # what the expression is part of, for error messages

    def child(self) -> Scope:
        return Scope(dict(self.names), self.context)


@dataclass
class ExprCompiler:
    """Compiles expressions; collects diagnostics instead of stopping at the first."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def error(self, code: str, message: str, span: Span, label: str = "", help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))

    def compile(self, e: ast.Expr, scope: Scope) -> tuple[str, str]:
        """Python source and static type of `e`."""
        if isinstance(e, ast.Num):
            if isinstance(e.value, float) and e.value == float("inf"):  # repr would be `inf`, not Python
                self.error("E010", "the number is too large", e.span, label="not a finite real number")
                return "0.0", FLOAT
            return repr(e.value), INT if isinstance(e.value, int) else FLOAT
        if isinstance(e, ast.Bool):
            return repr(e.value), BOOL
        if isinstance(e, ast.Var):
            if e.name not in scope.names:
                self._unknown_name(e.name, e.span, scope)
                return "0", INT
            return mangle(e.name), scope.names[e.name]
        if isinstance(e, ast.Unary):
            src, ty = self.compile(e.operand, scope)
            if e.op == "not":
                return f"(not {src})", BOOL
            return f"(-{src})", INT if ty == BOOL else ty
        if isinstance(e, ast.BinOp):
            left, lt = self.compile(e.left, scope)
            right, rt = self.compile(e.right, scope)
            if e.op in ("and", "or"):
                return f"({left}{PY_OPS[e.op]}{right})", BOOL
            if e.op in ("==", "!=", "<", "<=", ">", ">="):
                return f"({left} {e.op} {right})", BOOL
            if e.op == "/":
                return f"({left} / {right})", FLOAT
            ty = FLOAT if FLOAT in (lt, rt) else INT
            return f"({left} {e.op} {right})", ty
        if isinstance(e, ast.Cond):
            test, _ = self.compile(e.test, scope)
            then, tt = self.compile(e.then, scope)
            orelse, et = self.compile(e.orelse, scope)
            ty = FLOAT if FLOAT in (tt, et) else (BOOL if tt == et == BOOL else INT)
            return f"({then} if {test} else {orelse})", ty
        if isinstance(e, ast.Call):
            return self._call(e, scope)
        raise TypeError(f"not an expression: {e!r}")

    def _call(self, e: ast.Call, scope: Scope) -> tuple[str, str]:
        if e.func not in FUNCTIONS:
            close = difflib.get_close_matches(e.func, FUNCTIONS, n=1)
            self.error(
                "E002",
                f"unknown function `{e.func}`",
                e.func_span,
                label="not a function",
                help=f"did you mean `{close[0]}`?"
                if close
                else "functions are " + ", ".join(f"`{f}`" for f in FUNCTIONS),
            )
            return "0", INT
        lo, hi = FUNCTIONS[e.func]
        if len(e.args) < lo or (hi is not None and len(e.args) > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}"
            self.error(
                "E004",
                f"`{e.func}` takes {want} argument{'s' if lo != 1 else ''}, found {len(e.args)}",
                e.span,
            )
            return "0", INT
        compiled = [self.compile(a, scope) for a in e.args]
        srcs = ", ".join(s for s, _ in compiled)
        types = {t for _, t in compiled}
        if e.func == "ceildiv":
            if FLOAT in types:
                self.error("E010", "`ceildiv` takes integers", e.span, help="use `/` for real division")
            return f"_ceildiv({srcs})", INT
        return f"{e.func}({srcs})", FLOAT if FLOAT in types else INT

    def _unknown_name(self, name: str, span: Span, scope: Scope) -> None:
        close = difflib.get_close_matches(name, list(scope.names), n=1)
        if close:
            help_text = f"did you mean `{close[0]}`?"
        elif name in BUILTIN_NAMES:
            help_text = f"`{name}` is not available in {scope.context}"
        else:
            help_text = f"declare it with `param {name} = <default>` or `let {name} = <value>`"
        self.error("E002", f"unknown name `{name}`", span, label=f"not defined in {scope.context}", help=help_text)

    def compile_int(self, e: ast.Expr, scope: Scope, what: str) -> str:
        src, ty = self.compile(e, scope)
        if ty == FLOAT:
            self.error(
                "E010",
                f"{what} must be an integer",
                e.span,
                label="this is a real number",
                help="use `//` for integer division",
            )
        return src


def site_text(file_text: str, span: Span) -> str:
    lines = file_text.splitlines()
    if 1 <= span.line <= len(lines):
        line = lines[span.line - 1]
        end = span.end_col - 1 if span.end_line == span.line else len(line)
        return line[span.col - 1 : end].strip()
    return ""


class OrderCompiler:
    """Compiles an `order { ... }` body to the source of

        def _order(v_pp, v_vpp, v_microbatches, v_rank, <params>, _jobs, _sites, _ctr, _V, _T, _cap, _fail)

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
        self._emit(0, f"def _order({args}{pnames}, _jobs, _sites, _ctr, _V, _T, _cap, _fail):", header_site)
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
        self._emit(1, "return None", header_site)
        return "\n".join(self.lines) + "\n"

    def _block(self, body: tuple[ast.Stmt, ...], scope: Scope, indent: int) -> None:
        chunk_known = self._chunk_known  # what a block proves may not have run: forget it after the block
        if not body:
            self._emit(indent, "pass", 0)
        for stmt in body:
            self._stmt(stmt, scope, indent)
        self._chunk_known = chunk_known

    def _bind(self, name: str, span: Span, scope: Scope, ty: str) -> None:
        if name in ("pp", "vpp", "microbatches", "rank", "stage") or name in dict(self.params):
            self.exprs.error(
                "E003",
                f"`{name}` is {'a size' if name in BUILTIN_NAMES else 'a parameter'} and cannot be rebound",
                span,
                help="choose another name",
            )
        scope.names[name] = ty

    def _stmt(self, stmt: ast.Stmt, scope: Scope, indent: int) -> None:
        site = self._site(stmt.span)
        if self.readable and not isinstance(stmt, ast.Let):
            self._source_comment(stmt.span, indent)
        if isinstance(stmt, ast.Let):
            src, ty = self.exprs.compile(stmt.value, scope)
            self._bind(stmt.name, stmt.span, scope, ty)
            code = f"{self._var(stmt.name)} = {self._py(src)}"
            if self.readable:  # a `let` alone on its line reads as its code: the location can trail it
                code = self._source_comment(stmt.span, indent, code)
            self._emit(indent, code, site)
        elif isinstance(stmt, ast.JobStmt):
            self._job(stmt, scope, indent, site)
        elif isinstance(stmt, ast.Repeat):
            count = self.exprs.compile_int(stmt.count, scope, "a repeat count")
            if self.readable:
                self._emit(indent, f"for _ in range({self._checked_count(count, stmt.span)}):", site)
            else:
                var = self._counted_loop(count, indent, site)
                self._emit(indent, f"for {var} in range({var}):", site)
            self._block(stmt.body, scope.child(), indent + 1)
        elif isinstance(stmt, ast.For):
            start = self.exprs.compile_int(stmt.start, scope, "a loop bound")
            stop = self.exprs.compile_int(stmt.stop, scope, "a loop bound")
            inner = scope.child()
            self._bind(stmt.var, stmt.span, inner, INT)
            if self.readable:  # no bound check: the checker's guard against hangs, not a property of a schedule
                start, stop = self._py(start), self._py(stop)
                bounds = stop if start == "0" else f"{start}, {stop}"
                self._emit(indent, f"for {self._var(stmt.var)} in range({bounds}):", site)
            else:
                bound = self._fresh("n")
                self._emit(indent, f"{bound} = {stop} - ({start})", site)
                self._emit(indent, f"if {bound} > _cap: _fail({site}, 'loop', {bound})", site)
                self._emit(indent, f"for {mangle(stmt.var)} in range({start}, {stop}):", site)
            self._block(stmt.body, inner, indent + 1)
        elif isinstance(stmt, ast.If):
            for i, (test, body) in enumerate(stmt.branches):
                src, _ = self.exprs.compile(test, scope)
                self._emit(indent, f"{'if' if i == 0 else 'elif'} {self._py(src)}:", site)
                self._block(body, scope.child(), indent + 1)
            if stmt.orelse:
                self._emit(indent, "else:", site)
                self._block(stmt.orelse, scope.child(), indent + 1)
        else:  # pragma: no cover - the parser builds no other statement
            raise TypeError(stmt)

    def _counted_loop(self, count_src: str, indent: int, site: int) -> str:
        var = self._fresh("n")
        self._emit(indent, f"{var} = {count_src}", site)
        self._emit(indent, f"if {var} < 0 or {var} > _cap: _fail({site}, 'count', {var})", site)
        return var

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
                chunk_src = self.exprs.compile_int(value, scope, "a chunk")
            elif key == "mb":
                mb_src = self.exprs.compile_int(value, scope, "a micro-batch")
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
            count = self.exprs.compile_int(stmt.times, scope, "a repeat count")
            var = self._counted_loop(count, indent, site)
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
        code = f"_k * _V * _T + {t}" if c == "0" else f"(_k * _V + _c) * _T + {t}"
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
        lines = self.file_texts.get(span.file, "").splitlines()
        text = lines[span.line - 1].strip() if 1 <= span.line <= len(lines) else ""
        above = span.line - 1
        while above >= 1 and lines[above - 1].strip().startswith("#"):
            above -= 1
        if previous is not None and previous[0] == span.file:
            above = max(above, previous[1])
        room = LINE_LENGTH - 4 * indent
        for line in lines[above : span.line - 1]:
            for part in textwrap.wrap(line.strip().lstrip("#").strip(), room - 2) or [""]:
                self._emit(indent, f"# {part}".rstrip(), 0)
        trailing = f"  # {self.location(span)}"
        if code is not None and text == site_text(self.file_texts.get(span.file, ""), span):
            if len(code) + len(trailing) <= room:
                return code + trailing
        text = re.sub(r"\s{2,}#", "  #", text)  # a source comment, pulled in from its alignment column
        comment = f"# {self.location(span)}: {text}".rstrip()
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
            count = self.exprs.compile_int(stmt.times, scope, "a repeat count")
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
