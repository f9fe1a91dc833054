"""AST expressions and order bodies -> Python source, with static name and type checks.

Why Python source: an order body runs once per rank and may emit hundreds of thousands of jobs; compiled to a
plain Python function (loops stay loops, counters are list cells) it runs at interpreter speed with no tree
walking, and the same text is what `ppdsl compile` puts into a generated plan module.

Every user name `x` becomes `v_x` in the generated code, so no user name can shadow a Python name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ppdsl import ast
from ppdsl.diagnostics import Diagnostic, Span
from ppdsl.ir import Site

INT, FLOAT, BOOL = "int", "float", "bool"
FUNCTIONS = {"min": (2, None), "max": (2, None), "abs": (1, 1), "ceildiv": (2, 2)}
BUILTIN_NAMES = ("pp", "vpp", "microbatches", "rank", "chunk", "stage")
PY_OPS = {"and": " and ", "or": " or "}
# The backward of a micro-batch is whole or split, so `backward` and `backward_b` draw micro-batches from one
# counter: `backward_b backward` takes micro-batches k and k + 1 (Paddle's ZBH1 and DualPipe rely on this).
COUNTER_SLOT = {"backward_b": 1}


def mangle(name: str) -> str:
    return f"v_{name}"


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


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
    """

    def __init__(
        self,
        exprs: ExprCompiler,
        type_index: dict[str, int],
        type_names: list[str],
        params: list[str],
        sites: list[Site],
        file_texts: dict[str, str],
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
        if not body:
            self._emit(indent, "pass", 0)
        for stmt in body:
            self._stmt(stmt, scope, indent)

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
        if isinstance(stmt, ast.Let):
            src, ty = self.exprs.compile(stmt.value, scope)
            self._bind(stmt.name, stmt.span, scope, ty)
            self._emit(indent, f"{mangle(stmt.name)} = {src}", site)
        elif isinstance(stmt, ast.JobStmt):
            self._job(stmt, scope, indent, site)
        elif isinstance(stmt, ast.Repeat):
            count = self.exprs.compile_int(stmt.count, scope, "a repeat count")
            var = self._counted_loop(count, indent, site)
            self._emit(indent, f"for {var} in range({var}):", site)
            self._block(stmt.body, scope.child(), indent + 1)
        elif isinstance(stmt, ast.For):
            start = self.exprs.compile_int(stmt.start, scope, "a loop bound")
            stop = self.exprs.compile_int(stmt.stop, scope, "a loop bound")
            inner = scope.child()
            self._bind(stmt.var, stmt.span, inner, INT)
            bound = self._fresh("n")
            self._emit(indent, f"{bound} = {stop} - ({start})", site)
            self._emit(indent, f"if {bound} > _cap: _fail({site}, 'loop', {bound})", site)
            self._emit(indent, f"for {mangle(stmt.var)} in range({start}, {stop}):", site)
            self._block(stmt.body, inner, indent + 1)
        elif isinstance(stmt, ast.If):
            for i, (test, body) in enumerate(stmt.branches):
                src, _ = self.exprs.compile(test, scope)
                self._emit(indent, f"{'if' if i == 0 else 'elif'} {src}:", site)
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
        slot = COUNTER_SLOT.get(self.type_names[t], t)
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
