"""AST -> ScheduleDef: follow includes, resolve names, check declarations, compile expressions.

Size-independent: everything here is true of the file whatever pp / vpp / microbatches are.
Errors are collected (E0xx) and raised together at the end.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.files import SCHEDULE_BYTES, read_text
from ppdsl.common.rule_settings import attribute_problem, stream_template_problem
from ppdsl.language import ast, types
from ppdsl.language.functions import FunctionDef, analyse_functions, walk
from ppdsl.language.includes import IncludeBudget, IncludeRefused
from ppdsl.language.ir import (
    Expr,
    Function,
    JobType,
    OrderDef,
    ParamDef,
    PartitionDef,
    Require,
    ScheduleDef,
    Site,
    StreamRule,
    TableDef,
)
from ppdsl.language.library import missing_schedule_help
from ppdsl.language.parser import parse, paused_gc
from ppdsl.language.pysource import site_text
from ppdsl.language.runnable import compiled
from ppdsl.language.typecheck import FUNCTIONS, ExprCompiler, OrderChecker, Scope
from ppdsl.language.types import BOOL, INT, NUMBER
from ppdsl.plan.kinds import (
    ALWAYS,
    COMPUTE_TYPES,
    KINDS,
    REGIONS,
    Memory,
    collectives,
    kind,
    letters,
    memory_actions,
    memory_of,
    per_step,
)

COMM_KEYS = ("latency", "bandwidth")
PER_JOB = ("rank", "chunk", "stage")  # what a cost or memory expression reads besides the sizes and parameters
Parse = Callable[[str, str], ast.SchedFile]  # (text, file) -> its syntax tree; raises DiagnosticError
# The host link of the copy stream (offload / reload): its time per byte, its latency, and whether it copies both
# ways at once (full duplex: a stream per direction) or one copy at a time (the default).
COPY_COMM_KEYS = ("offload bandwidth", "offload latency", "offload duplex")
# the collectives' link: a reduction takes the latency plus its bytes over the bandwidth, times the ring's share
REDUCE_COMM_KEYS = ("reduce bandwidth", "reduce latency", "reduce size")
# `memory <job> <verb> ...`: the verbs a memory action takes by what it does (the compute types and a schedule's
# own: allocates/frees)
MEMORY_VERBS = {Memory.REBUILDS: ("keeps",), Memory.MOVES_OUT: ("moves",), Memory.RESTORES: ()}
# `memory <job> fraction = ...`: the actions that take one; a restore moves what its `after` moved
FRACTION_ROLES = (Memory.REBUILDS, Memory.MOVES_OUT)
_CELL = re.compile(r"^([A-Za-z_]+?)(\d+)?(?:\.c(\d+))?$")


def load(path: str | Path) -> ScheduleDef:
    """Read, parse and resolve a `.sched` file (and what it includes)."""
    path = Path(path)
    try:
        text = read_text(path, SCHEDULE_BYTES, help="check the path")
    except DiagnosticError as err:
        if not path.exists() and path.parent == Path("."):  # a bare name: perhaps a shipped schedule, mistyped
            for d in err.diagnostics:
                d.help = missing_schedule_help(str(path))
        raise
    return resolve_text(text, str(path))


def _reason(err: Exception) -> str:
    if isinstance(err, UnicodeDecodeError):
        return "not UTF-8 text"
    return getattr(err, "strerror", None) or str(err)


def resolve_text(text: str, file: str = "<string>", parse_file: Parse = parse) -> ScheduleDef:
    """Resolve `text` as the file `file`. `parse_file` parses it and each include (the language server passes
    one that reuses the items of an edit's previous text; it must give what `parse` gives, errors too)."""
    with paused_gc():  # as the parser: the resolution's objects hold no cycles worth collecting on the way
        return _Resolver(parse_file).resolve(text, file)


@dataclass
class _Declarations:
    """What the top-level items of a file and its includes declare, before anything is compiled."""

    name: str
    doc: str = ""
    params: dict[str, ParamDef] = field(default_factory=dict)
    functions: dict[str, ast.FnDef] = field(default_factory=dict)
    jobs: list[ast.JobDecl] = field(default_factory=list)
    costs: dict[str, ast.Cost] = field(default_factory=dict)
    comm: dict[str, ast.Comm] = field(default_factory=dict)
    memory: dict[str, ast.Memory] = field(default_factory=dict)
    memory_limit: ast.MemoryLimit | None = None
    memory_settings: dict[tuple[str, str], ast.MemorySetting] = field(default_factory=dict)
    requires: list[ast.Require] = field(default_factory=list)
    rules: list[ast.Rule] = field(default_factory=list)
    placement: ast.Placement | None = None
    partition: ast.Partition | None = None
    order: ast.Order | None = None
    tables: list[ast.Table] = field(default_factory=list)
    seen: dict[tuple, tuple[str, Span]] = field(default_factory=dict)  # keyed item -> (file, span) of its definition


class _Environment:
    """The names declarations are compiled against: sizes, parameters (typed by their defaults), job types."""

    def __init__(self, params: dict[str, ParamDef], job_types: list[JobType]):
        self.params = params
        self.job_types = job_types
        self.type_index = {jt.name: i for i, jt in enumerate(job_types)}
        self.type_index.update({jt.alias: i for i, jt in enumerate(job_types) if jt.alias})
        self.param_types = [(p.name, types.type_of(p.default)) for p in params.values()]
        self.globals = Scope({n: INT for n in ("pp", "vpp", "microbatches")}, "a top-level expression")
        self.globals.names.update(dict(self.param_types))
        self.per_job = self.scope("a cost or memory expression", "rank", "chunk", "stage")

    def scope(self, context: str, *extra: str) -> Scope:
        """The top-level names plus `extra` integers (`rank`, `chunk`, `stage`), for `context`."""
        return Scope({**self.globals.names, **dict.fromkeys(extra, INT)}, context)

    def canonical(self, name: str) -> str:
        """A job type's name for its name or alias."""
        return self.job_types[self.type_index[name]].name


class _IncludesStopped(Exception):
    """An include bound (E066) was reached: the resolution stops with the diagnostics so far."""


class _Resolver:
    def __init__(self, parse_file: Parse = parse) -> None:
        self.parse_file = parse_file
        self.sources: dict[str, str] = {}
        self.includes = IncludeBudget()
        self.exprs = ExprCompiler(sources=self.sources)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.exprs.diagnostics

    def error(self, code: str, message: str, span: Span | None, label: str = "", help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))

    # ------------------------------------------------------------------ includes

    def _items(self, text: str, file: str, stack: tuple[str, ...]) -> list[tuple[str, ast.Item]]:
        """Items of `file` with those of its includes spliced in where the include stands."""
        self.sources[file] = text
        tree = self.parse_file(text, file)
        out: list[tuple[str, ast.Item]] = []
        for item in tree.items:
            if not isinstance(item, ast.Include):
                out.append((file, item))
                continue
            try:
                target = (Path(file).parent / item.path).resolve()
            except (OSError, ValueError, RuntimeError) as err:  # e.g. a NUL byte in the path
                self.error("E005", f"cannot include `{item.path}`: {_reason(err)}", item.span)
                continue
            if str(target) in stack:
                self.error("E005", f"`{item.path}` includes itself", item.span, help="remove the cycle")
                continue
            try:
                self.includes.admit(item.path, stack, item.span)
                inc_text = self.includes.read(target, item.path, item.span)
            except IncludeRefused as err:
                self.diagnostics.append(err.diagnostic)
                if err.diagnostic.code == "E066":
                    raise _IncludesStopped from None  # a bound is reported once: expand no more includes
                continue
            if inc_text is None:
                continue  # read already in this resolution: its definitions are in once
            try:
                for inc_file, inc_item in self._items(inc_text, str(target), (*stack, str(target))):
                    if isinstance(inc_item, (ast.Docstring, ast.ScheduleName)):
                        continue  # the including file names and documents the schedule
                    out.append((inc_file, inc_item))
            except DiagnosticError as err:
                self.diagnostics.extend(err.diagnostics)
        return out

    # ------------------------------------------------------------------ resolve

    def resolve(self, text: str, file: str) -> ScheduleDef:
        decls = _Declarations(name=Path(file).stem)
        try:
            items = self._items(text, file, (str(Path(file).resolve()),))
        except _IncludesStopped:
            raise DiagnosticError(self.diagnostics) from None
        for item_file, item in items:
            _COLLECT[type(item)](self, decls, item_file, item)
        return self._compile(decls, file)

    def _single(self, decls: _Declarations, key: tuple, item_file: str, span: Span, what: str) -> bool:
        """Keyed items may be overridden by a later file, never repeated in the same one."""
        prev = decls.seen.get(key)
        if prev and prev[0] == item_file:
            self.error(
                "E003",
                f"{what} is defined twice",
                span,
                label="second definition",
                help=f"the first is at {prev[1].file}:{prev[1].line}; remove one",
            )
            return False
        decls.seen[key] = (item_file, span)
        return True

    # One collector per item kind (`_COLLECT` below): what each top-level item declares, before anything is
    # compiled, so that a later file (an including one) can override what an earlier one declared.

    def _docstring(self, decls: _Declarations, item_file: str, item: ast.Docstring) -> None:
        decls.doc = decls.doc or item.text

    def _schedule_name(self, decls: _Declarations, item_file: str, item: ast.ScheduleName) -> None:
        if self._single(decls, ("schedule",), item_file, item.span, "the schedule name"):
            decls.name = item.name

    def _param(self, decls: _Declarations, item_file: str, item: ast.Param) -> None:
        if item.name in ("pp", "vpp", "microbatches", "rank", "chunk", "stage"):
            self.error("E003", f"`{item.name}` is built in", item.span, help="choose another name")
        elif self._single(decls, ("param", item.name), item_file, item.span, f"parameter `{item.name}`"):
            decls.params[item.name] = ParamDef(item.name, self._const(item.name, item.default), item.span)

    def _fn_def(self, decls: _Declarations, item_file: str, item: ast.FnDef) -> None:
        if self._single(decls, ("fn", item.name), item_file, item.span, f"function `{item.name}`"):
            decls.functions[item.name] = item

    def _require(self, decls: _Declarations, item_file: str, item: ast.Require) -> None:
        decls.requires.append(item)

    def _job(self, decls: _Declarations, item_file: str, item: ast.JobDecl) -> None:
        if self._single(decls, ("job", item.name), item_file, item.span, f"job type `{item.name}`"):
            decls.jobs.append(item)

    def _placement(self, decls: _Declarations, item_file: str, item: ast.Placement) -> None:
        if self._single(decls, ("placement",), item_file, item.span, "the placement"):
            decls.placement = item

    def _partition(self, decls: _Declarations, item_file: str, item: ast.Partition) -> None:
        if self._single(decls, ("partition",), item_file, item.span, "the partition"):
            decls.partition = item

    def _cost(self, decls: _Declarations, item_file: str, item: ast.Cost) -> None:
        if self._single(decls, ("cost", item.job), item_file, item.span, f"the cost of `{item.job}`"):
            decls.costs[item.job] = item

    def _comm(self, decls: _Declarations, item_file: str, item: ast.Comm) -> None:
        if self._single(decls, ("comm", item.key), item_file, item.span, f"`comm {item.key}`"):
            decls.comm[item.key] = item

    def _memory(self, decls: _Declarations, item_file: str, item: ast.Memory) -> None:
        if self._single(decls, ("memory", item.job), item_file, item.span, f"the memory of `{item.job}`"):
            decls.memory[item.job] = item

    def _memory_limit(self, decls: _Declarations, item_file: str, item: ast.MemoryLimit) -> None:
        if self._single(decls, ("memory limit",), item_file, item.span, "the memory limit"):
            decls.memory_limit = item

    def _memory_setting(self, decls: _Declarations, item_file: str, item: ast.MemorySetting) -> None:
        key = (item.subject, item.key)
        if self._single(decls, ("memory", *key), item_file, item.span, f"`memory {item.subject} {item.key}`"):
            decls.memory_settings[key] = item

    def _rule(self, decls: _Declarations, item_file: str, item: ast.Rule) -> None:
        decls.rules.append(item)

    def _order(self, decls: _Declarations, item_file: str, item: ast.Order) -> None:
        if self._single(decls, ("order",), item_file, item.span, "the order"):
            decls.order = item

    def _table_item(self, decls: _Declarations, item_file: str, item: ast.Table) -> None:
        if decls.tables and decls.tables[-1].when is None:
            self.error(
                "E003",
                "a table follows a table without `when`",
                item.span,
                help="only the last table may leave out `when <condition>`",
            )
        decls.tables.append(item)

    # ------------------------------------------------------------------ compile

    def _compile(self, decls: _Declarations, file: str) -> ScheduleDef:
        """Every declaration compiled against the job types and parameters; all errors raised together."""
        actions = self._memory_actions(decls)  # checks every `memory <x> <setting>`, used or not
        named = (actions if _names_memory_action(decls) else []) + (
            [JobType(k.name, k.region, alias=k.letter) for k in collectives()] if _names_collective(decls) else []
        )
        job_types = self._job_types(decls.jobs, named)
        env = _Environment(decls.params, job_types)
        self.exprs.job_names = frozenset(env.type_index)
        functions = self._compile_functions(decls, env)
        requires = [self._compile_require(r, env) for r in decls.requires]
        placement_kind, placement = self._compile_placement(decls.placement, env)
        costs = self._compile_costs(decls.costs, env)
        comm = self._compile_comm(decls.comm, env)
        memory = self._compile_memory(decls.memory, env)
        limit = self._compile_memory_limit(decls.memory_limit, env)
        host = decls.memory_settings.get(("host", "limit"))
        host_limit = self._compile_memory_limit(host, env, "the host memory limit") if host else None
        rules, priorities = self._compile_rules(decls.rules, env)
        sites: list[Site] = [Site(Span(file, 1, 1, 1, 2), "")]
        order = self._compile_order(decls, file, env, sites)
        tables = tuple(
            TableDef(self._condition(tab.when, env), self._table(tab, env.type_index, job_types, sites), tab.span)
            for tab in decls.tables
        )
        if self.diagnostics:
            raise DiagnosticError(self.diagnostics)
        defn = ScheduleDef(
            name=decls.name,
            doc=decls.doc,
            path=file,
            params=decls.params,
            requires=tuple(requires),
            job_types=tuple(job_types),
            placement_kind=placement_kind,
            placement=placement,
            costs=costs,
            comm=comm,
            memory=memory,
            memory_limit=limit,
            rules=tuple(rules),
            rule_priorities=tuple(priorities),
            order=order,
            tables=tables,
            sites=tuple(sites),
            sources=self.sources,
            functions=tuple(self._function_ir(*fn) for fn in functions),
            host_limit=host_limit,
            partition=_partition_def(decls.partition),
        )
        problems = compiled(defn).problems  # what Python cannot compile (nesting), found once here
        if problems:
            raise DiagnosticError(problems)
        return defn

    def _compile_functions(
        self, decls: _Declarations, env: _Environment
    ) -> list[tuple[FunctionDef, str, tuple[str, ...]]]:
        """The schedule's `fn`s: checked (names, recursion, cost, their bodies) and defined, as Python functions,
        in the namespace every compiled expression runs in."""
        taken = {"pp", "vpp", "microbatches", "rank", "chunk", "stage", *decls.params}
        defs = {}
        for name, d in decls.functions.items():
            clash = (
                "a built-in function"
                if name in FUNCTIONS
                else "a size or parameter"
                if name in taken
                else "a job type"
                if name in env.type_index
                else None
            )
            if clash:
                self.error("E003", f"`{name}` is {clash}", d.name_span, help="give the function another name")
                continue
            seen: set[str] = set()
            for p in d.params:
                problem = (
                    "is given twice"
                    if p in seen
                    else "is a function"
                    if p in decls.functions
                    else "is a size or parameter"
                    if p in taken - {"rank", "chunk", "stage"}
                    else None
                )
                seen.add(p)
                if problem:
                    self.error(
                        "E003", f"parameter `{p}` of `{name}` {problem}", d.span, help="give the parameter another name"
                    )
            defs[name] = d
        functions = analyse_functions(defs, dict(env.globals.names), self.diagnostics)
        self.exprs.functions = functions
        self.exprs.function_scope = env.globals
        checked = []
        for fn in functions.values():
            if fn.error:
                continue
            definition = tuple(INT if k in (NUMBER, types.ANY) else k for k in fn.kinds)
            src, _ = self.exprs.instance(fn, definition)
            checked.append((fn, src, definition))
        return checked

    def _function_ir(self, fn: FunctionDef, src: str, definition: tuple[str, ...]) -> Function:
        """A function as codegen writes it, once every call is compiled: its parameters' types over the calls (an
        int parameter some call gives a float is a float), and its result's likewise."""
        calls = self.exprs.calls.get(fn.name) or {definition}
        seen = [(t, self.exprs.instances[(fn.name, t)][1]) for t in calls]
        param_types = tuple(_annotation({t[i] for t, _ in seen}) for i in range(len(fn.kinds)))
        result = _annotation({r for _, r in seen})
        return Function(
            fn.name,
            fn.node.params,
            fn.globals,
            src,
            param_types,
            result,
            self._snippet(fn.node.span),
            fn.node.span,
        )

    def _compile_require(self, req: ast.Require, env: _Environment) -> Require:
        text = self._snippet(req.condition.span)
        condition = self.exprs.checked(req.condition, env.globals, BOOL, "a `require`", text=text)
        return Require(condition, req.message, text, req.span)

    def _condition(self, expr: ast.Expr | None, env: _Environment) -> Expr | None:
        if expr is None:
            return None
        return self.exprs.checked(expr, env.globals, BOOL, "a table's `when`", text=self._snippet(expr.span))

    def _compile_placement(self, placement: ast.Placement | None, env: _Environment) -> tuple[str, Expr | None]:
        if placement is None:
            return "looped", None
        if placement.kind != "expr":
            return placement.kind, None
        scope = env.scope("a placement", "rank", "chunk")
        text = self._snippet(placement.expr.span)
        return "expr", self.exprs.checked(placement.expr, scope, INT, "a stage", text=text, extra=("rank", "chunk"))

    def _compile_costs(self, costs: dict[str, ast.Cost], env: _Environment) -> dict[str, Expr]:
        out = {}
        for job, cost in costs.items():
            if self._known_type(job, env.type_index, cost.span):
                out[env.canonical(job)] = self.exprs.checked(
                    cost.value,
                    env.per_job,
                    NUMBER,
                    "a cost",
                    text=self._snippet(cost.value.span),
                    span=cost.span,
                    extra=PER_JOB,
                )
        return out

    def _compile_comm(self, comm: dict[str, ast.Comm], env: _Environment) -> dict[str, Expr]:
        out = {}
        for key, item in comm.items():
            if key not in COMM_KEYS and key not in COPY_COMM_KEYS and key not in REDUCE_COMM_KEYS:
                self.error(
                    "E002",
                    f"unknown communication setting `{key}`",
                    item.span,
                    help="use `comm latency = <time>` or `comm bandwidth = <units per time>`"
                    + (
                        "; the host link: `comm offload bandwidth`, `latency` or `duplex`; the collectives' link: "
                        "`comm reduce bandwidth` or `latency`"
                        if " " in key
                        else ""
                    ),
                )
                continue
            text = self._snippet(item.value.span)
            kind, what = (BOOL, "`offload duplex`") if key == "offload duplex" else (NUMBER, f"a {key}")
            out[key] = self.exprs.checked(item.value, env.globals, kind, what, text=text, span=item.span)
        return out

    def _compile_memory(self, memory: dict[str, ast.Memory], env: _Environment) -> dict[str, tuple[str, Expr]]:
        out = {}
        for job, item in memory.items():
            if self._known_type(job, env.type_index, item.span):
                name = env.canonical(job)
                verbs = MEMORY_VERBS.get(memory_of(name), ("allocates", "frees"))
                if item.verb not in verbs:
                    self.error(
                        "E080",
                        f"`{name}` does not take `memory {name} {item.verb}`",
                        item.span,
                        help=_memory_verb_help(name),
                    )
                    continue
                amount = self.exprs.checked(
                    item.value,
                    env.per_job,
                    NUMBER,
                    "an amount of memory",
                    text=self._snippet(item.value.span),
                    span=item.value.span,  # a wrong amount is reported at the number, not the statement
                    extra=PER_JOB,
                )
                out[name] = (item.verb, amount)
        return out

    def _compile_memory_limit(
        self, limit: ast.MemoryLimit | ast.MemorySetting | None, env: _Environment, what: str = "the memory limit"
    ) -> Expr | None:
        if limit is None:
            return None
        scope = env.scope(what, "rank")
        text = self._snippet(limit.value.span)
        return self.exprs.checked(
            limit.value, scope, NUMBER, "a memory limit", text=text, span=limit.value.span, extra=("rank",)
        )

    def _compile_rules(self, rules: list[ast.Rule], env: _Environment) -> tuple[list[StreamRule], list[Expr | None]]:
        stream_rules, priorities = [], []
        for rule in rules:
            if rule.job is not None:
                self._known_type(rule.job, env.type_index, rule.span)
            self._check_rule_settings(rule)
            prio = None
            if rule.priority is not None:
                text = self._snippet(rule.priority.span)
                prio = self.exprs.checked(rule.priority, env.globals, INT, "a priority", text=text)
            stream_rules.append(StreamRule(rule.pattern, rule.job, rule.stream, None, rule.attrs, rule.span))
            priorities.append(prio)
        return stream_rules, priorities

    def _check_rule_settings(self, rule: ast.Rule) -> None:
        """Only the attributes that do not change what an op computes, with Paddle's types; a bounded stream."""
        for (name, value), span in zip(rule.attrs, rule.attr_spans or [rule.span] * len(rule.attrs), strict=True):
            if problem := attribute_problem(name, value, span):
                self.diagnostics.append(problem)
        if rule.stream is not None and (problem := stream_template_problem(rule.stream, rule.stream_span or rule.span)):
            self.diagnostics.append(problem)

    def _compile_order(self, decls: _Declarations, file: str, env: _Environment, sites: list[Site]) -> OrderDef | None:
        """`order { ... }`, checked, if there is one."""
        body, tables = decls.order, decls.tables
        if body is not None and tables:
            self.error(
                "E003",
                "the schedule has both an `order` and a `table`",
                tables[0].span,
                help="keep one of them",
            )
        elif body is None and not tables:
            self.error(
                "E006",
                "the schedule has no `order` or `table`",
                Span(file, 1, 1, 1, 2),
                help="add `order { ... }` with the job order of a rank",
            )
        if body is None or tables:
            return None
        names = [jt.name for jt in env.job_types]
        checker = OrderChecker(self.exprs, env.type_index, names, env.param_types, sites, self.sources)
        return checker.check(body.body, body.span)

    # ------------------------------------------------------------------ pieces

    def _snippet(self, span: Span) -> str:
        return site_text(self.sources.get(span.file, ""), span)

    def _const(self, name: str, e: ast.Expr) -> int | float | bool:
        """A parameter's default: a literal, whose type is the parameter's."""
        if isinstance(e, (ast.Num, ast.Bool)):
            return e.value
        if isinstance(e, ast.Unary) and e.op == "-" and isinstance(e.operand, ast.Num):
            return -e.operand.value
        per_rank = next((n for n in walk(e) if isinstance(n, ast.Var) and n.name in ("rank", "chunk", "stage")), None)
        if per_rank is not None:
            self.error(
                "E013",
                f"the default of parameter `{name}` uses `{per_rank.name}`",
                per_rank.span,
                label=f"`{per_rank.name}` differs from job to job",
                help=f"a parameter has one value for the whole schedule: write `let {name} = ...` in the order",
            )
        else:
            self.error(
                "E012",
                f"the default of parameter `{name}` must be a number or `true` / `false`",
                e.span,
                label="not a literal",
                help="a parameter is set on the command line (`--param NAME=VALUE`); compute values from the sizes "
                "with `let` in the order, or with a `fn`",
            )
        return 0

    def _known_type(self, name: str, type_index: dict[str, int], span: Span) -> bool:
        if name in type_index:
            return True
        close = difflib.get_close_matches(name, list(type_index), n=1)
        self.error(
            "E002",
            f"unknown job type `{name}`",
            span,
            help=f"did you mean `{close[0]}`?" if close else "declare it with `job <name> : <region> ...`",
        )
        return False

    def _memory_actions(self, decls: _Declarations) -> list[JobType]:
        """The memory actions' job types, with their declared fractions, and every other `memory <x> <key>`
        setting checked (the host limit is compiled with the other limits)."""
        actions = memory_actions()
        fractions: dict[str, float | None] = {k.name: None for k in actions}
        for (subject, key), item in decls.memory_settings.items():
            if (subject, key) == ("host", "limit"):
                continue
            name = letters().get(subject, subject)
            if key != "fraction" or memory_of(name) not in FRACTION_ROLES:
                self.error(
                    "E081",
                    f"unknown memory setting `memory {subject} {key}`",
                    item.span,
                    help="memory settings are `memory host limit = ...`, `memory recompute fraction = ...` and "
                    "`memory offload fraction = ...` (a reload moves what its offload moved)",
                )
                continue
            value = item.value
            number = value.value if isinstance(value, ast.Num) else None
            if not isinstance(number, (int, float)) or isinstance(number, bool) or not 0 < number <= 1:
                self.error(
                    "E082",
                    f"the fraction of `{name}` must be a number in (0, 1]",
                    item.span,
                    label="a fraction of a micro-batch's activations",
                    help="write a literal such as `0.5`; which micro-batches are partial is the order's choice",
                )
                continue
            fractions[name] = float(number)
        for k in actions:
            if k.memory is Memory.RESTORES:  # it moves back what its offload moved
                fractions[k.name] = fractions[k.after]
        return [JobType(k.name, k.region, alias=k.letter, fraction=fractions[k.name]) for k in actions]

    def _job_types(self, decls: list[ast.JobDecl], actions: list[JobType]) -> list[JobType]:
        types = [JobType(k.name, k.region, alias=k.letter) for k in ALWAYS] + actions
        names = set(KINDS) | set(letters())
        for d in decls:
            if d.name in KINDS:
                self.error("E003", f"`{d.name}` is a predefined job type", d.span, help="choose another name")
                continue
            if d.name[-1].isdigit() or (d.alias and d.alias[-1].isdigit()):
                self.error(
                    "E003",
                    f"job type `{d.name}` ends in a digit",
                    d.span,
                    help="digits after a job name are micro-batch ids in tables (`F3`); rename it",
                )
                continue
            if d.alias and d.alias in names:
                self.error("E003", f"alias `{d.alias}` is taken", d.span, help="choose another alias")
                continue
            if d.region not in REGIONS:
                close = difflib.get_close_matches(d.region, REGIONS, n=1)
                self.error(
                    "E002",
                    f"unknown region `{d.region}`",
                    d.region_span,
                    help=f"did you mean `{close[0]}`?" if close else "regions are " + ", ".join(REGIONS),
                )
                continue
            for anchor in (d.before, d.after):
                if anchor is not None and anchor not in COMPUTE_TYPES:
                    self.error(
                        "E002",
                        f"`{d.name}` is tied to `{anchor}`, which is not forward, backward, backward_b or backward_w",
                        d.span,
                    )
            if d.receives and d.before is None:
                self.error(
                    "E004",
                    f"`{d.name}` receives for a job, so it must run `before` that job",
                    d.span,
                    help="add `before forward` (or the job whose input it receives)",
                )
            if d.sends and d.after is None:
                self.error(
                    "E004",
                    f"`{d.name}` sends for a job, so it must run `after` that job",
                    d.span,
                    help="add `after backward` (or the job whose output it sends)",
                )
            names.add(d.name)
            if d.alias:
                names.add(d.alias)
            types.append(
                JobType(
                    d.name,
                    d.region,
                    d.ops or ("*",),
                    d.alias,
                    d.before,
                    d.after,
                    d.receives,
                    d.sends,
                    d.span,
                )
            )
        return types

    def _table(
        self, table: ast.Table, type_index: dict[str, int], job_types: list[JobType], sites: list[Site]
    ) -> tuple[tuple[int, tuple[tuple[int, int, int, int], ...]], ...]:
        rows = []
        seen_ranks: dict[int, Span] = {}
        for row in table.rows:
            if row.rank in seen_ranks:
                self.error("E003", f"rank {row.rank} has two rows", row.span, help="merge them into one row")
                continue
            seen_ranks[row.rank] = row.span
            jobs = []
            for cell in row.cells:
                m = _CELL.match(cell.text)
                name = m.group(1) if m else cell.text
                t = type_index.get(name)
                if m is None or t is None:
                    close = difflib.get_close_matches(name, list(type_index), n=1)
                    self.error(
                        "E002",
                        f"unknown job `{cell.text}`",
                        cell.span,
                        help=(f"did you mean `{close[0]}`? " if close else "")
                        + "a cell is a job name and micro-batch, with `.c<chunk>` when vpp > 1: `F3`, `B0.c1`",
                    )
                    continue
                if max(len(m.group(2) or ""), len(m.group(3) or "")) > 1000:  # int() refuses over 4300 digits
                    self.error("E004", "a micro-batch or chunk number has too many digits", cell.span)
                    continue
                mb = int(m.group(2)) if m.group(2) else 0
                chunk = int(m.group(3)) if m.group(3) else 0
                # a collective runs once a chunk a step (its micro-batch is always 0): `reduce_grads.c1` names it
                once = per_step(job_types[t].name) or (job_types[t].kind is not None and job_types[t].kind.collective)
                if m.group(2) is None and not once:
                    self.error(
                        "E004",
                        f"`{cell.text}` needs a micro-batch number",
                        cell.span,
                        help=f"write `{m.group(1)}0{cell.text[len(m.group(1)) :]}` for micro-batch 0",
                    )
                    continue
                sites.append(Site(cell.span, cell.text))
                jobs.append((t, chunk, mb, len(sites) - 1))
            rows.append((row.rank, tuple(jobs)))
        return tuple(rows)


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def _memory_verb_help(name: str) -> str:
    k = kind(name)
    role = k.memory if k is not None else Memory.NONE
    if role is Memory.REBUILDS:
        return f"write `memory {name} keeps <amount>`: what a recomputed forward keeps (its stage input)"
    if role is Memory.MOVES_OUT:
        return f"write `memory {name} moves <amount>`: what {_article(name)} {name} copies to the host"
    if role is Memory.RESTORES:
        return (
            f"{_article(name)} {name} brings back what its {k.after} moved: declare `memory {k.after} moves <amount>`"
        )
    return f"write `memory {name} allocates <amount>` or `memory {name} frees <amount>`"


def _partition_def(item: ast.Partition | None) -> PartitionDef | None:
    """The file's partition as the IR holds it; what it means for sizes and a profile is checked where those are
    known (`ppdsl.analysis.layers`)."""
    return None if item is None else PartitionDef(item.counts, item.layout, item.allow_empty, item.span)


def _names_memory_action(decls: _Declarations) -> bool:
    """Does the schedule name a memory action anywhere (a job, a table cell, a declaration)? Only then does its
    job-type list hold them, so every other schedule's types, indices and codes are what they always were."""
    names = {name for k in memory_actions() for name in (k.name, k.letter) if name}
    if any(subject in names for subject, _ in decls.memory_settings) or ("host", "limit") in decls.memory_settings:
        return True
    if names & decls.memory.keys() or any(key in COPY_COMM_KEYS for key in decls.comm):
        return True
    return _names_any(decls, names)


def _names_collective(decls: _Declarations) -> bool:
    """Does the schedule name a collective (`reduce_grads`, `sync_shared`) anywhere, or declare what one costs
    (`comm reduce ...`)? Only then does its job-type list hold them, as with the memory actions."""
    names = {name for k in collectives() for name in (k.name, k.letter) if name}
    return any(key in REDUCE_COMM_KEYS for key in decls.comm) or _names_any(decls, names)


def _names_any(decls: _Declarations, names: set[str]) -> bool:
    """Does a cost, a stream rule, a table cell or a job statement of the order name one of `names`?"""
    if names & decls.costs.keys() or any(rule.job in names for rule in decls.rules):
        return True
    for table in decls.tables:
        for row in table.rows:
            for cell in row.cells:
                m = _CELL.match(cell.text)
                if (m.group(1) if m else cell.text) in names:
                    return True
    stack = list(decls.order.body) if decls.order else []
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.JobStmt):
            if stmt.name in names:
                return True
        elif isinstance(stmt, (ast.Repeat, ast.For)):
            stack.extend(stmt.body)
        elif isinstance(stmt, ast.If):
            stack.extend(stmt.orelse)
            for _, body in stmt.branches:
                stack.extend(body)
    return False


def _annotation(seen: set[str]) -> str:
    """The Python annotation of values of these types: an int is a float where some call gives a float."""
    numbers = "float" if types.FLOAT in seen else "int" if INT in seen else None
    return " | ".join(t for t in ("bool" if BOOL in seen else None, numbers) if t) or "int"


_COLLECT = {
    ast.Docstring: _Resolver._docstring,
    ast.ScheduleName: _Resolver._schedule_name,
    ast.Param: _Resolver._param,
    ast.FnDef: _Resolver._fn_def,
    ast.Require: _Resolver._require,
    ast.JobDecl: _Resolver._job,
    ast.Placement: _Resolver._placement,
    ast.Partition: _Resolver._partition,
    ast.Cost: _Resolver._cost,
    ast.Comm: _Resolver._comm,
    ast.Memory: _Resolver._memory,
    ast.MemoryLimit: _Resolver._memory_limit,
    ast.MemorySetting: _Resolver._memory_setting,
    ast.Rule: _Resolver._rule,
    ast.Order: _Resolver._order,
    ast.Table: _Resolver._table_item,
}
