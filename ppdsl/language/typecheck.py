"""Type checking of expressions: AST expressions -> Python source with their static types, every name and type
error collected as a diagnostic (E002, E004, E010, E011) instead of stopping.

Every user name `x` becomes `v_x` in the generated code (`mangle`), a user function `f` becomes `u_f`, so no user
name can shadow a Python name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Diagnostic, Span
from ppdsl.common.text import count
from ppdsl.language import ast, types
from ppdsl.language.functions import FunctionDef, call_cost, signature
from ppdsl.language.ir import EmitJob, Expr, ForRange, IfElse, Let, OrderDef, Repeat, Site, Stmt
from ppdsl.language.pysource import file_lines, mangle, site_text
from ppdsl.language.types import BOOL, FLOAT, INT, NUMBER
from ppdsl.plan.kinds import counter_of, per_step

FUNCTIONS = {"min": (2, None), "max": (2, None), "abs": (1, 1), "ceildiv": (2, 2)}
BUILTIN_NAMES = ("pp", "vpp", "microbatches", "rank", "chunk", "stage")
PY_OPS = {"and": " and ", "or": " or "}


@dataclass
class Scope:
    """Names visible to an expression, with their static types."""

    names: dict[str, str]
    context: str  # what the expression is part of, for error messages

    def child(self) -> Scope:
        return Scope(dict(self.names), self.context)


@dataclass
class ExprCompiler:
    """Compiles expressions to Python source with their static types; collects diagnostics instead of stopping.

    `checked(e, scope, want, what)` is the way in: `want` is INT, NUMBER or BOOL (None: any type), `what` names the
    place (`a repeat count`) for messages. `sources` (file -> text) lets help lines quote what was written;
    `job_names` are the job types, which are not values; `functions` the schedule's `fn`s.
    """

    diagnostics: list[Diagnostic] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    job_names: frozenset[str] = frozenset()
    functions: dict[str, FunctionDef] = field(default_factory=dict)
    function_scope: Scope | None = None  # what a function body sees besides its parameters: sizes, parameters
    instances: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = field(default_factory=dict)  # -> (body, type)
    calls: dict[str, set[tuple[str, ...]]] = field(default_factory=dict)  # fn -> the argument types calls give
    _root: ast.Expr | None = None  # the outermost expression being compiled, for "not finished" help

    def error(self, code: str, message: str, span: Span, label: str = "", help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))

    def checked(
        self,
        e: ast.Expr,
        scope: Scope,
        want: str | None,
        what: str,
        *,
        text: str = "",
        span: Span | None = None,
        extra: tuple[str, ...] = (),
    ) -> Expr:
        """`e` as an IR expression, checked to be of type `want` where it stands as `what` (see `Expr` for the
        declaration's `text`, `span` and `extra` names)."""
        src, ty = self.typed(e, scope)
        self.check_type(e, ty, want, what)
        return Expr(src, ty, self.calls_of(e), text, span, extra)

    def calls_of(self, e: ast.Expr) -> int:
        """The function calls one evaluation of `e` makes (none without user functions: no walk then)."""
        return call_cost(e, self.functions) if self.functions else 0

    def typed(self, e: ast.Expr, scope: Scope) -> tuple[str, str]:
        """Python source and static type of `e`, an outermost expression."""
        outer, self._root = self._root, e
        try:
            return self.compile(e, scope)
        finally:
            self._root = outer

    def check_type(self, e: ast.Expr, ty: str, want: str | None, what: str) -> bool:
        if want is None or types.accepts(want, ty):
            return True
        if ty == FLOAT and want == INT:
            self.error("E010", f"{what} must be an integer", e.span, label="this is a real number", help=INTEGER_HELP)
        elif want == BOOL:
            self.error(
                "E011",
                f"{what} must be a condition, not a number",
                e.span,
                label=f"this is {types.describe(ty)}",
                help=self._compare_help(e),
            )
        else:
            self.error(
                "E011",
                f"{what} must be {'an integer' if want == INT else 'a number'}, not a condition",
                e.span,
                label=f"this is {types.describe(BOOL)}",
                help=self._count_help(e),
            )
        return False

    def _operand(self, e: ast.Expr, ty: str, want: str, op: str) -> None:
        """An operator's operand: numbers for arithmetic and ordering, conditions for `and`, `or`, `not`."""
        if types.accepts(want, ty):
            return
        if want == BOOL:
            self.error(
                "E011",
                f"`{op}` takes conditions, not numbers",
                e.span,
                label=f"this is {types.describe(ty)}",
                help=self._compare_help(e),
            )
        else:
            self.error(
                "E011",
                f"`{op}` takes numbers, not conditions",
                e.span,
                label=f"this is {types.describe(ty)}",
                help=self._count_help(e),
            )

    def _text(self, e: ast.Expr) -> str | None:
        """What was written for `e`, if it is on one line."""
        span = e.span
        if span.end_line != span.line or span.file not in self.sources:
            return None
        return site_text(self.sources[span.file], span) or None

    def _compare_help(self, e: ast.Expr) -> str:
        text = self._text(e)
        if text is None:
            return "write a comparison, e.g. `x > 0`"
        return f"write a comparison, e.g. `{f'({text})' if isinstance(e, ast.Cond) else text} > 0`"

    def _count_help(self, e: ast.Expr) -> str:
        if isinstance(e, ast.Bool):
            return f"write `{int(e.value)}`: a condition is not a number"
        text = self._text(e) or "<condition>"
        return f"write `if {text} then 1 else 0` to make a number of it"

    def compile(self, e: ast.Expr, scope: Scope) -> tuple[str, str]:
        """Python source and static type of `e` (a subexpression: see `typed` for an outermost one)."""
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
                self._operand(e.operand, ty, BOOL, "not")
                return f"(not {src})", BOOL
            self._operand(e.operand, ty, NUMBER, "-")
            return f"(-{src})", INT if ty == BOOL else ty
        if isinstance(e, ast.BinOp):
            return self._binop(e, scope)
        if isinstance(e, ast.Cond):
            test, tt = self.compile(e.test, scope)
            self.check_type(e.test, tt, BOOL, "the test of `if ... then ... else`")
            then, ty = self.compile(e.then, scope)
            orelse, ey = self.compile(e.orelse, scope)
            if (ty == BOOL) != (ey == BOOL):
                self.error(
                    "E011",
                    "the two branches of `if ... then ... else` have different types",
                    e.span,
                    label=f"`then` gives {types.describe(ty)}, `else` {types.describe(ey)}",
                    help="give both branches numbers, or both conditions",
                )
                return f"({then} if {test} else {orelse})", INT
            return f"({then} if {test} else {orelse})", _number_type(ty, ey) if ty != BOOL else BOOL
        if isinstance(e, ast.Call):
            return self._call(e, scope)
        raise TypeError(f"not an expression: {e!r}")

    def _binop(self, e: ast.BinOp, scope: Scope) -> tuple[str, str]:
        left, lt = self.compile(e.left, scope)
        right, rt = self.compile(e.right, scope)
        op = e.op
        if op in ("and", "or"):
            self._operand(e.left, lt, BOOL, op)
            self._operand(e.right, rt, BOOL, op)
            return f"({left}{PY_OPS[op]}{right})", BOOL
        if op in ("==", "!="):
            if (lt == BOOL) != (rt == BOOL):
                self.error(
                    "E011",
                    f"`{op}` compares two numbers or two conditions, not a number and a condition",
                    e.span,
                    label=f"{types.describe(lt)} `{op}` {types.describe(rt)}",
                    help="compare values of one type",
                )
            return f"({left} {op} {right})", BOOL
        self._operand(e.left, lt, NUMBER, op)
        self._operand(e.right, rt, NUMBER, op)
        if op in ("<", "<=", ">", ">="):
            return f"({left} {op} {right})", BOOL
        if op == "/":
            return f"({left} / {right})", FLOAT
        return f"({left} {op} {right})", _number_type(lt, rt)

    def _call(self, e: ast.Call, scope: Scope) -> tuple[str, str]:
        if e.func in self.functions:
            return self._user_call(self.functions[e.func], e, scope)
        if e.func not in FUNCTIONS:
            known = [*FUNCTIONS, *self.functions]
            close = difflib.get_close_matches(e.func, known, n=1)
            self.error(
                "E002",
                f"unknown function `{e.func}`",
                e.func_span,
                label="not a function",
                help=f"did you mean `{close[0]}`?"
                if close
                else "functions are " + ", ".join(f"`{f}`" for f in known) + "; define one with `fn name(x) = ...`",
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
        for arg, (_, ty) in zip(e.args, compiled, strict=True):
            self._operand(arg, ty, NUMBER, e.func)
        srcs = ", ".join(s for s, _ in compiled)
        arg_types = {t for _, t in compiled}
        if e.func == "ceildiv":
            if FLOAT in arg_types:
                self.error("E010", "`ceildiv` takes integers", e.span, help="use `/` for real division")
            return f"_ceildiv({srcs})", INT
        return f"{e.func}({srcs})", FLOAT if FLOAT in arg_types else INT

    def _user_call(self, fn: FunctionDef, e: ast.Call, scope: Scope) -> tuple[str, str]:
        """A call of a user function: arguments checked against its parameters' kinds; the result's type is the
        body's for these argument types (an int or float parameter takes either, as the built-in functions do)."""
        params = fn.node.params
        if len(e.args) != len(params):
            self.error(
                "E004",
                f"`{fn.name}` takes {count(len(params), 'argument')}, found {len(e.args)}",
                e.span,
                help=f"it is defined as `{signature(fn.node)}` at line {fn.node.span.line}",
            )
            return "0", INT
        compiled = [self.compile(a, scope) for a in e.args]
        arg_types = []
        for arg, (_, ty), kind, name in zip(e.args, compiled, fn.kinds, params, strict=True):
            if not types.accepts(kind, ty):
                self.error(
                    "E011",
                    f"`{fn.name}`'s parameter `{name}` is {types.describe(kind)}, not {types.describe(ty)}",
                    arg.span,
                    label=f"this is {types.describe(ty)}",
                    help=self._compare_help(arg) if kind == BOOL else self._count_help(arg),
                )
                ty = BOOL if kind == BOOL else INT
            arg_types.append(ty)
        self.calls.setdefault(fn.name, set()).add(tuple(arg_types))
        _, result = self.instance(fn, tuple(arg_types), e)
        args = [s for s, _ in compiled] + [mangle(g) for g in fn.globals]
        return f"{fn.python}({', '.join(args)})", result

    def instance(self, fn: FunctionDef, arg_types: tuple[str, ...], call: ast.Call | None = None) -> tuple[str, str]:
        """Source and type of `fn`'s body for these argument types; its diagnostics once, noting the call they come
        from (None: the definition itself, its parameters as their uses in the body suggest)."""
        key = (fn.name, arg_types)
        if key in self.instances:
            return self.instances[key]
        self.instances[key] = ("0", INT)  # while the body compiles (a recursive function is refused before this)
        if fn.error or self.function_scope is None:
            return self.instances[key]
        scope = Scope({**self.function_scope.names, **dict(zip(fn.node.params, arg_types, strict=True))}, "")
        scope.context = f"the body of `{fn.name}`"
        before = len(self.diagnostics)
        outer, self._root = self._root, fn.node.body
        try:
            src, result = self.compile(fn.node.body, scope)
        finally:
            self._root = outer
        seen = {(d.code, d.message, d.span) for d in self.diagnostics[:before]}
        fresh = []
        for diag in self.diagnostics[before:]:
            if (diag.code, diag.message, diag.span) in seen:
                continue
            seen.add((diag.code, diag.message, diag.span))
            if call is not None:
                shown = ", ".join(types.describe(t) for t in arg_types) or "no arguments"
                diag.notes.append(f"with {shown}, as at line {call.span.line}")
            fresh.append(diag)
        self.diagnostics[before:] = fresh
        self.instances[key] = (src, result)
        return src, result

    def _unknown_name(self, name: str, span: Span, scope: Scope) -> None:
        if name in self.job_names:
            root = self._root
            if root is not None and root.span.line < span.line and root.span.file in self.sources:
                lines = file_lines(self.sources[root.span.file])
                start = lines[root.span.line - 1][root.span.col - 1 :].strip() if root.span.line <= len(lines) else ""
                help_text = (
                    f"the expression `{start}` on line {root.span.line} is not finished, so it runs on into "
                    f"this line: complete it"
                )
            else:
                help_text = f"a job runs as a statement of its own: `{name}`"
            self.error("E002", f"`{name}` is a job type, not a value", span, label="a job type", help=help_text)
            return
        close = difflib.get_close_matches(name, list(scope.names), n=1)
        if close:
            help_text = f"did you mean `{close[0]}`?"
        elif name in BUILTIN_NAMES:
            help_text = f"`{name}` is not available in {scope.context}"
            if scope.context.startswith("the body of"):
                help_text += ": pass it as an argument"
        else:
            help_text = f"declare it with `param {name} = <default>` or `let {name} = <value>`"
        self.error("E002", f"unknown name `{name}`", span, label=f"not defined in {scope.context}", help=help_text)


INTEGER_HELP = "use `//` for integer division"


def _number_type(a: str, b: str) -> str:
    return FLOAT if FLOAT in (a, b) else INT


# Python allows 20 statically nested loops in a function; an order's `repeat`, `for` and `job * n` each compile
# to one (in the checker's function and in a plan's `job_list`), so deeper loops are refused at the loop.
MAX_LOOP_DEPTH = 20


class OrderChecker:
    """Checks an `order { ... }` body (names, types, job types, arguments, loop depth) into the IR (`OrderDef`),
    a site per statement appended to `sites`; diagnostics go to `exprs.diagnostics`. `params` are the schedule's
    parameters with their types."""

    def __init__(
        self,
        exprs: ExprCompiler,
        type_index: dict[str, int],
        type_names: list[str],
        params: list[tuple[str, str]],
        sites: list[Site],
        file_texts: dict[str, str],
    ):
        self.exprs = exprs
        self.type_index = type_index
        self.type_names = type_names
        self.params = params
        self.param_names = frozenset(p for p, _ in params)
        self.sites = sites
        self.file_texts = file_texts
        self._loops = 0  # loops around the statement being checked

    def check(self, body: tuple[ast.Stmt, ...], span: Span) -> OrderDef:
        scope = Scope({n: INT for n in ("pp", "vpp", "microbatches", "rank")}, "the order")
        scope.names.update(dict(self.params))
        header = self._site(span)
        return OrderDef(self._block(body, scope), span, header)

    def _site(self, span: Span) -> int:
        self.sites.append(Site(span, site_text(self.file_texts.get(span.file, ""), span)))
        return len(self.sites) - 1

    def _block(self, body: tuple[ast.Stmt, ...], scope: Scope) -> tuple[Stmt, ...]:
        out = []
        for stmt in body:
            checked = self._stmt(stmt, scope)
            if checked is not None:
                out.append(checked)
        return tuple(out)

    def _loop_block(self, body: tuple[ast.Stmt, ...], scope: Scope) -> tuple[Stmt, ...]:
        self._loops += 1
        try:
            return self._block(body, scope)
        finally:
            self._loops -= 1

    @staticmethod
    def _is_loop(stmt: ast.Stmt) -> bool:
        """Compiled as a Python `for` loop."""
        return isinstance(stmt, (ast.Repeat, ast.For)) or (isinstance(stmt, ast.JobStmt) and stmt.times is not None)

    def _stmt(self, stmt: ast.Stmt, scope: Scope) -> Stmt | None:
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
            return None
        exprs = self.exprs
        if isinstance(stmt, ast.Let):
            value = exprs.checked(stmt.value, scope, None, "")
            self._bind(stmt.name, stmt.span, scope, value.type)
            return Let(stmt.name, value, stmt.span, site)
        if isinstance(stmt, ast.JobStmt):
            return self._job(stmt, scope, site)
        if isinstance(stmt, ast.Repeat):
            count = exprs.checked(stmt.count, scope, INT, "a repeat count")
            return Repeat(count, self._loop_block(stmt.body, scope.child()), stmt.span, site)
        if isinstance(stmt, ast.For):
            start = exprs.checked(stmt.start, scope, INT, "a loop bound")
            stop = exprs.checked(stmt.stop, scope, INT, "a loop bound")
            inner = scope.child()
            self._bind(stmt.var, stmt.span, inner, INT)
            return ForRange(stmt.var, start, stop, self._loop_block(stmt.body, inner), stmt.span, site)
        if isinstance(stmt, ast.If):
            branches = []
            for test, body in stmt.branches:
                checked_test = exprs.checked(test, scope, BOOL, "an `if` test")
                branches.append((checked_test, self._block(body, scope.child())))
            orelse = self._block(stmt.orelse, scope.child()) if stmt.orelse else ()
            return IfElse(tuple(branches), orelse, stmt.span, site)
        raise TypeError(stmt)  # pragma: no cover - the parser builds no other statement

    def _bind(self, name: str, span: Span, scope: Scope, ty: str) -> None:
        """`name` bound to a value of type `ty` from here on. A name keeps its type (an integer may go into a real
        variable): after a block that may not have run, its type must be the same either way."""
        if name in ("pp", "vpp", "microbatches", "rank", "stage") or name in self.param_names:
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

    def _job(self, stmt: ast.JobStmt, scope: Scope, site: int) -> EmitJob | None:
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
            return None
        counter = self.type_index[counter_of(self.type_names[t])]
        chunk = _CURRENT_CHUNK if "chunk" in scope.names else _CHUNK_ZERO
        mb = None
        for key, value, key_span in stmt.kwargs:
            if key == "chunk":
                chunk = self.exprs.checked(value, scope, INT, "a chunk")
            elif key == "mb":
                mb = self.exprs.checked(value, scope, INT, "a micro-batch")
            else:
                self.exprs.error(
                    "E004",
                    f"unknown argument `{key}`",
                    key_span,
                    help="a job takes `chunk = <expr>` and `mb = <expr>`",
                )
        if per_step(self.type_names[t]):  # once a step on each rank: no chunk of its own
            chunk = _CHUNK_ZERO
        times = None if stmt.times is None else self.exprs.checked(stmt.times, scope, INT, "a repeat count")
        return EmitJob(t, counter, chunk, mb, times, stmt.span, site)


_CURRENT_CHUNK = Expr(mangle("chunk"), INT)  # a job in a `for chunk in ...` loop runs on that chunk
_CHUNK_ZERO = Expr("0", INT)
