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
import functools
import keyword
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Diagnostic, Span
from ppdsl.common.text import count, source_lines
from ppdsl.language import ast, types
from ppdsl.language.ir import ScheduleDef, Site
from ppdsl.language.jobs import JobCodec
from ppdsl.language.jobtypes import SHARED_COUNTER
from ppdsl.language.types import ANY, BOOL, FLOAT, INT, NUMBER

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
# The commonest expressions, a value or `(a op b)` of two values (a user's name or a small integer): what
# `readable_expr` makes of them is known without Python's parser, which was a third of a long `compile`.
_ATOM = r"[vu]_[A-Za-z0-9_]+|0|[1-9][0-9]{0,17}"
_SIMPLE_EXPR = re.compile(rf"({_ATOM})|\(({_ATOM}) (\+|-|\*|//|%|==|!=|<=|>=|<|>) ({_ATOM})\)")


def readable_name(name: str) -> str:
    """The Python name of user name `name` in readable code: `name` itself where that is safe, else `name_`.

    Unsafe: a Python keyword or builtin, a name the plan module uses, or one starting or ending with `_`. The
    result ends in `_` exactly when `name` is unsafe or already ends in `_`, so two user names never meet.
    """
    unsafe = name in _RESERVED or name.startswith("_") or name.endswith("_")
    return f"{name}_" if unsafe else name


def readable_expr(src: str) -> str:
    """An expression from `ExprCompiler` as a person writes it: user names unmangled, only the needed parentheses."""
    simple = _SIMPLE_EXPR.fullmatch(src)
    if simple is not None:
        alone, left, op, right = simple.groups()
        if alone is not None:
            return _readable_atom(alone)
        return f"{_readable_atom(left)} {op} {_readable_atom(right)}"
    return _readable_by_python(src)


def _readable_by_python(src: str) -> str:
    """`readable_expr` of any expression: Python's parser, the names renamed, Python's unparser."""
    tree = pyast.parse(src, mode="eval")
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Name) and node.id.startswith(("v_", "u_")):  # a user's value or function
            node.id = readable_name(node.id[2:])
    return _EXPONENT.sub(r"\1e\2", pyast.unparse(tree))  # `1e+20` as ruff format writes it, `1e20`


def _readable_atom(atom: str) -> str:
    return readable_name(atom[2:]) if atom[0] in "vu" else atom


def py_text(text: str) -> str:
    """`text` safe in a Python comment: each character Python or a reader could take for something else escaped
    as in a string literal (`\\n`, `\\x00`, `\\u2028`, `\\u202e`), the rest as it is. Not printable means a line break,
    a control or format character, a lone surrogate: what could end a comment, make the file unreadable (NUL), or
    show the code differently from what it is (bidi overrides)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)


def py_path(path: str) -> str:
    """A path as the plan's comments, docstrings and messages show it: as it is when every character is printable,
    else its `repr` string literal (`'dir\\n/x.sched'`), so no character of it is ever raw in the plan."""
    return path if path.isprintable() else repr(path)


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
class FunctionDef:
    """A user function (`fn name(params) = body`) as the compiler sees it: its parameters' kinds (`bool`, or `number`
    for an int or a float), the sizes and parameters its body reads (itself or through the functions it calls), and
    its static cost in function calls. `error` marks one that cannot be called (recursive, too costly)."""

    node: ast.FnDef
    kinds: tuple[str, ...]
    globals: tuple[str, ...] = ()
    cost: int = 1
    depth: int = 1  # the longest chain of calls one call of it makes, itself included
    error: bool = False

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def python(self) -> str:
        """Its name in compiled code (user functions cannot meet user values or ppdsl's own names there)."""
        return f"u_{self.node.name}"


@dataclass
class ExprCompiler:
    """Compiles expressions to Python source with their static types; collects diagnostics instead of stopping.

    `expect(e, scope, want, what)` is the way in: `want` is INT, NUMBER or BOOL (None: any type), `what` names the
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

    def expect(self, e: ast.Expr, scope: Scope, want: str | None, what: str) -> str:
        """Python source of `e`, checked to be of type `want` where it stands as `what`."""
        src, ty = self.typed(e, scope)
        self.check_type(e, ty, want, what)
        return src

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
            self.error("E010", f"{what} must be an integer", e.span, label="this is a real number", help=_INTEGER_HELP)
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
                help=f"it is defined as `{_signature(fn.node)}` at line {fn.node.span.line}",
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


_INTEGER_HELP = "use `//` for integer division"
FN_COST_LIMIT = 10_000  # function calls one call may make, the calls inside it included
MAX_CALL_DEPTH = 100  # functions calling functions: each is a Python call, so this bounds the stack they take
BIG = 1 << 62  # no schedule counts past this; a value rebound in a loop that does is growing without end


def subexpressions(e: ast.Expr) -> tuple[ast.Expr, ...]:
    if isinstance(e, ast.BinOp):
        return (e.left, e.right)
    if isinstance(e, ast.Unary):
        return (e.operand,)
    if isinstance(e, ast.Cond):
        return (e.test, e.then, e.orelse)
    if isinstance(e, ast.Call):
        return e.args
    return ()


def walk(e: ast.Expr):
    """Every node of `e`, without recursion (an expression may be nested deeper than Python recurses)."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(subexpressions(node))


def call_cost(e: ast.Expr, functions: dict[str, FunctionDef]) -> int:
    """The function calls one evaluation of `e` makes, those inside the functions included."""
    return sum(functions[n.func].cost for n in walk(e) if isinstance(n, ast.Call) and n.func in functions)


def analyse_functions(
    defs: dict[str, ast.FnDef], globals_: dict[str, str], diagnostics: list[Diagnostic]
) -> dict[str, FunctionDef]:
    """The schedule's functions, ready to compile: each one's parameter kinds, the sizes and parameters it reads,
    its cost in calls; a function that calls itself (directly or through others) or costs more than
    FN_COST_LIMIT calls is reported (E014) and marked, so no call of it is compiled."""
    calls = {
        name: [n.func for n in walk(d.body) if isinstance(n, ast.Call) and n.func in defs] for name, d in defs.items()
    }
    out = {name: FunctionDef(d, tuple(NUMBER for _ in d.params)) for name, d in defs.items()}
    state: dict[str, int] = {}  # 1: on the path being visited, 2: done
    order: list[str] = []
    for root in defs:  # depth first, without recursion: a chain of functions may be longer than Python recurses
        if root in state:
            continue
        state[root] = 1
        path = [root]
        stack = [(root, iter(calls[root]))]
        while stack:
            name, callees = stack[-1]
            for callee in callees:
                if state.get(callee) == 1:
                    cycle = [*path[path.index(callee) :], callee]
                    if not out[callee].error:
                        out[callee].error = True
                        diagnostics.append(
                            Diagnostic(
                                "E014",
                                f"`{callee}` calls itself" + ("" if len(cycle) <= 2 else f": {' -> '.join(cycle)}"),
                                defs[callee].name_span,
                                label="recursive",
                                help="a function is a formula: write the value it stands for without calling itself",
                            )
                        )
                elif callee not in state:
                    state[callee] = 1
                    path.append(callee)
                    stack.append((callee, iter(calls[callee])))
                    break
            else:
                state[name] = 2
                order.append(name)
                stack.pop()
                path.pop()
    for name in order:  # callees before callers
        fn = out[name]
        callees = [out[c] for c in calls[name]]
        if fn.error or any(c.error for c in callees):
            fn.error = True
            continue
        fn.cost = min(1 + sum(c.cost for c in callees), FN_COST_LIMIT + 1)
        fn.depth = 1 + max((c.depth for c in callees), default=0)
        if fn.depth > MAX_CALL_DEPTH:  # the compiled functions call each other as deep: Python's stack bounds it
            fn.error = True
            diagnostics.append(
                Diagnostic(
                    "E065",
                    f"functions call each other too deeply: a call of `{name}` goes more than {MAX_CALL_DEPTH} "
                    "calls deep",
                    defs[name].name_span,
                    label="too deep",
                    help="compute the inner values once and pass them as arguments",
                )
            )
            continue
        if fn.cost > FN_COST_LIMIT:
            fn.error = True
            diagnostics.append(
                Diagnostic(
                    "E014",
                    f"one call of `{name}` makes more than {FN_COST_LIMIT} function calls",
                    defs[name].name_span,
                    label="too costly to evaluate",
                    help="a function that calls another twice doubles its cost: pass a computed value instead",
                )
            )
            continue
        read = {n.name for n in walk(fn.node.body) if isinstance(n, ast.Var)} - set(fn.node.params)
        read |= {g for c in callees for g in c.globals}
        fn.globals = tuple(g for g in globals_ if g in read)
        fn.kinds = _infer_kinds(fn.node, globals_, out)
    return out


def _infer_kinds(fn: ast.FnDef, globals_: dict[str, str], functions: dict[str, FunctionDef]) -> tuple[str, ...]:
    """What each parameter takes, from how the body uses it: a condition (`a and b`, `not a`, `if a then`,
    `a == true`, passed where a function takes a condition), a number (arithmetic, ordering, `min`, passed where a
    function takes a number: an int or a float, as each call gives), or, only passed on, any value."""
    params = set(fn.params)
    kinds = dict.fromkeys(fn.params, ANY)

    def is_param(e: ast.Expr) -> bool:
        return isinstance(e, ast.Var) and e.name in params

    def boolish(e: ast.Expr) -> bool:
        if isinstance(e, ast.Bool):
            return True
        if isinstance(e, ast.BinOp):
            return e.op in ("and", "or", "==", "!=", "<", "<=", ">", ">=")
        if isinstance(e, ast.Unary):
            return e.op == "not"
        if isinstance(e, ast.Var):
            return kinds.get(e.name, globals_.get(e.name)) == BOOL
        return False

    for _ in range(2):  # a second pass sees parameters the first found to be conditions
        for node in walk(fn.body):
            conditions: list[ast.Expr] = []
            numbers: list[ast.Expr] = []
            if isinstance(node, ast.BinOp) and node.op in ("and", "or"):
                conditions += [node.left, node.right]
            elif isinstance(node, ast.BinOp) and node.op in ("==", "!="):
                if boolish(node.left):
                    conditions.append(node.right)
                if boolish(node.right):
                    conditions.append(node.left)
            elif isinstance(node, ast.Unary) and node.op == "not":
                conditions.append(node.operand)
            elif isinstance(node, ast.Cond):
                conditions.append(node.test)
                if boolish(node.then):
                    conditions.append(node.orelse)
                if boolish(node.orelse):
                    conditions.append(node.then)
            elif isinstance(node, ast.Call) and node.func in functions:
                callee = functions[node.func]
                conditions += [a for a, k in zip(node.args, callee.kinds, strict=False) if k == BOOL]
                numbers += [a for a, k in zip(node.args, callee.kinds, strict=False) if k == NUMBER]
            elif isinstance(node, ast.Call) or (isinstance(node, ast.Unary) and node.op == "-"):
                numbers += list(subexpressions(node))
            elif isinstance(node, ast.BinOp) and node.op not in ("==", "!="):
                numbers += [node.left, node.right]
            for e in conditions:
                if is_param(e):
                    kinds[e.name] = BOOL
            for e in numbers:
                if is_param(e) and kinds[e.name] == ANY:
                    kinds[e.name] = NUMBER
    return tuple(kinds[p] for p in fn.params)


def _number_type(a: str, b: str) -> str:
    return FLOAT if FLOAT in (a, b) else INT


def _signature(fn: ast.FnDef) -> str:
    return f"fn {fn.name}({', '.join(fn.params)})"


def expression_compiler(defn: ScheduleDef) -> ExprCompiler:
    """A compiler for expressions of a resolved schedule (its job types, sources and functions known), for code
    generation: the schedule compiled without errors, so none are expected."""
    exprs = ExprCompiler(sources=defn.sources)
    exprs.job_names = frozenset(jt.name for jt in defn.job_types) | {jt.alias for jt in defn.job_types if jt.alias}
    scope = Scope({n: INT for n in ("pp", "vpp", "microbatches")}, "a top-level expression")
    scope.names.update({p.name: types.type_of(p.default) for p in defn.params.values()})
    exprs.functions = analyse_functions(defn.function_nodes, dict(scope.names), exprs.diagnostics)
    exprs.function_scope = scope
    return exprs


# Python allows 20 statically nested loops in a function; an order's `repeat`, `for` and `job * n` each compile
# to one (in the checker's function and in a plan's `job_list`), so deeper loops are refused at the loop.
MAX_LOOP_DEPTH = 20


@functools.lru_cache(maxsize=16)
def file_lines(file_text: str) -> tuple[str, ...]:
    """The lines of a source text (as the parser numbers them), split once per text: a diagnostic, a site and a
    plan comment are taken for each statement, and splitting the whole file for each made a 40,000-line file
    quadratic."""
    return tuple(source_lines(file_text))


def site_text(file_text: str, span: Span) -> str:
    lines = file_lines(file_text)
    if 1 <= span.line <= len(lines):
        line = lines[span.line - 1]
        end = span.end_col - 1 if span.end_line == span.line else len(line)
        return line[span.col - 1 : end].strip()
    return ""


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
                help=_INTEGER_HELP if (old, ty) == (INT, FLOAT) else f"give the {ty} value another name",
            )
            return
        elif name == "chunk" and ty != INT:
            self.exprs.error(
                "E010" if ty == FLOAT else "E011",
                "`chunk` names the current chunk: it must be an integer",
                span,
                label=f"this is {types.describe(ty)}",
                help=_INTEGER_HELP if ty == FLOAT else "give the condition another name",
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
