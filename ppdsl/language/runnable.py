"""A `ScheduleDef`'s executable form: its functions, declared expressions and order compiled to Python callables
(the order through the checker's backend, `fast_order`), once per schedule (`compiled(defn)`).

The IR stays data; this is the one place that turns it into code, so resolution (which compiles it once to find
what Python cannot compile, E065) and `ppdsl.analysis.expand` (which runs it) share the result.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Diagnostic, Span
from ppdsl.language.fast_order import fast_order_source
from ppdsl.language.ir import Expr, ScheduleDef
from ppdsl.language.parser import MAX_EXPR_DEPTH
from ppdsl.language.pysource import mangle
from ppdsl.language.typecheck import MAX_LOOP_DEPTH

BIG = 1 << 62  # no schedule counts past this; a value rebound in a loop that does is growing without end


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def checked(value):
    """A function's result: an integer past any count is a function growing without end (`x * x` nested)."""
    if value.__class__ is int and (value > BIG or value < -BIG):
        raise OverflowError(value)
    return value


def namespace() -> dict:
    """A fresh namespace for compiled code: the helpers it calls by name."""
    return {"_ceildiv": ceildiv, "_BIG": BIG, "_checked": checked}


Formula = Callable[[dict], object]  # an expression over an environment: {"pp": 4, ..., "rank": 0}


@dataclass
class Compiled:
    """`order(pp, vpp, microbatches, rank, *params, jobs, sites, counters, V, T, cap, fail, budget)` appends one
    rank's packed jobs and sites (see `fast_order`); `line_sites` maps a line of `order_source` to the site it
    runs; `formula(expr)` evaluates a declared expression at an environment. `problems` are what Python could not
    compile (E065), which resolution reports."""

    order: Callable[..., int] | None = None
    order_source: str = ""
    line_sites: dict[int, int] = field(default_factory=dict)
    problems: list[Diagnostic] = field(default_factory=list)
    _namespace: dict = field(default_factory=namespace)
    _params: tuple[str, ...] = ()
    _formulas: dict[Expr, Formula] = field(default_factory=dict)

    def formula(self, expr: Expr) -> Formula:
        fn = self._formulas.get(expr)
        if fn is None:
            fn = self._formulas[expr] = self._compile_formula(expr)
        return fn

    def _compile_formula(self, expr: Expr) -> Formula:
        names = ("pp", "vpp", "microbatches", *self._params, *expr.extra)
        args = ", ".join(mangle(n) for n in names)
        self._namespace.pop("_f", None)
        self._define(f"def _f({args}):\n    return {expr.source}\n", None)
        inner = self._namespace.pop("_f", lambda *args: 0)

        def call(env: dict):
            return inner(*(env[n] for n in names))

        return call

    def _define(self, code: str, span: Span | None) -> None:
        try:
            exec(compile(code, "<ppdsl>", "exec"), self._namespace)
        except (SyntaxError, RecursionError, MemoryError):  # Python's own nesting limits
            self.problems.append(
                Diagnostic(
                    "E065",
                    "expression nested too deeply for Python to compile",
                    span,
                    help="split it with `let` or a `fn`",
                )
            )


def compiled(defn: ScheduleDef) -> Compiled:
    """The executable form of `defn`, compiled on first use and kept while `defn` lives."""
    entry = _CACHE.get(id(defn))
    if entry is not None and entry[0]() is defn:
        return entry[1]
    result = _compile(defn)
    key = id(defn)
    _CACHE[key] = (weakref.ref(defn, lambda _, key=key: _CACHE.pop(key, None)), result)
    return result


# id(defn) -> (a weak reference to it, its compiled form): a ScheduleDef is data (it compares by value and need not
# hash cheaply), and its compiled form is dropped with it.
_CACHE: dict[int, tuple[weakref.ref, Compiled]] = {}


def _compile(defn: ScheduleDef) -> Compiled:
    """Everything, in the order resolution declares it: functions (which every expression may call), `require`s,
    the placement, costs, communication, memory, the limit, rule priorities, the order, the tables' `when`s."""
    out = Compiled(_params=tuple(defn.params))
    for fn in defn.functions:
        args = ", ".join(mangle(a) for a in (*fn.params, *fn.globals))
        out._define(f"def u_{fn.name}({args}):\n    return _checked({fn.source})\n", fn.span)
    exprs = [r.condition for r in defn.requires]
    exprs += [defn.placement] if defn.placement is not None else []
    exprs += [*defn.costs.values(), *defn.comm.values(), *(e for _, e in defn.memory.values())]
    exprs += [defn.memory_limit] if defn.memory_limit is not None else []
    exprs += [p for p in defn.rule_priorities if p is not None]
    for expr in exprs:
        out.formula(expr)
    if defn.order is not None:
        out.order_source, out.line_sites = fast_order_source(defn)
    if defn.order is not None and not out.problems:  # an order calling what did not compile would not run
        try:
            exec(compile(out.order_source, f"<order of {defn.path}>", "exec"), out._namespace)
            out.order = out._namespace["_order"]
        except (SyntaxError, RecursionError, MemoryError):  # Python's own nesting limits
            out.problems.append(
                Diagnostic(
                    "E065",
                    "the order is nested too deeply for Python to compile",
                    defn.order.span,
                    help=f"keep loops under {MAX_LOOP_DEPTH} levels and expressions under {MAX_EXPR_DEPTH}",
                )
            )
    for table in defn.tables:
        if table.when is not None:
            out.formula(table.when)
    return out
