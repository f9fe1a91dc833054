"""A schedule's functions (`fn name(params) = body`) before they are compiled: the calls between them (no
recursion), their cost in calls and their depth, the sizes and parameters each reads, what each parameter takes.
Also the walk over an expression every pass uses (`walk`, without recursion: an expression may nest deeper than
Python recurses).
"""

from __future__ import annotations

from dataclasses import dataclass

from ppdsl.common.diagnostics import Diagnostic
from ppdsl.language import ast
from ppdsl.language.types import ANY, BOOL, NUMBER

FN_COST_LIMIT = 10_000  # function calls one call may make, the calls inside it included
MAX_CALL_DEPTH = 100  # functions calling functions: each is a Python call, so this bounds the stack they take


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
    for name in _callees_first(defs, calls, out, diagnostics):
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


def _callees_first(
    defs: dict[str, ast.FnDef], calls: dict[str, list[str]], out: dict[str, FunctionDef], diagnostics: list[Diagnostic]
) -> list[str]:
    """The functions, each after the functions it calls; a function reached again while its own calls are being
    followed calls itself: reported (E014) and marked in `out`."""
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
    return order


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


def signature(fn: ast.FnDef) -> str:
    return f"fn {fn.name}({', '.join(fn.params)})"
