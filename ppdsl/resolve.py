"""AST -> ScheduleDef: follow includes, resolve names, check declarations, compile expressions.

Size-independent: everything here is true of the file whatever pp / vpp / microbatches are.
Errors are collected (E0xx) and raised together at the end.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from ppdsl import ast
from ppdsl.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.grammar.parser import parse
from ppdsl.ir import (
    BUILTIN_ALIASES,
    BUILTIN_JOB_TYPES,
    REGIONS,
    JobType,
    ParamDef,
    Require,
    ScheduleDef,
    Site,
    StreamRule,
    TableDef,
)
from ppdsl.lowering import FLOAT, INT, ExprCompiler, OrderCompiler, Scope, ceildiv, mangle

COMM_KEYS = ("latency", "bandwidth")
_CELL = re.compile(r"^([A-Za-z_]+?)(\d+)?(?:\.c(\d+))?$")
MAX_INCLUDE_DEPTH = 16


def load(path: str | Path) -> ScheduleDef:
    """Read, parse and resolve a `.sched` file (and what it includes)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DiagnosticError(
            [Diagnostic("E000", f"cannot read `{path}`: {_reason(err)}", help="check the path")]
        ) from None
    return resolve_text(text, str(path))


def _reason(err: Exception) -> str:
    if isinstance(err, UnicodeDecodeError):
        return "not UTF-8 text"
    return getattr(err, "strerror", None) or str(err)


def resolve_text(text: str, file: str = "<string>") -> ScheduleDef:
    return _Resolver().resolve(text, file)


class _Resolver:
    def __init__(self) -> None:
        self.exprs = ExprCompiler()
        self.sources: dict[str, str] = {}

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return self.exprs.diagnostics

    def error(self, code: str, message: str, span: Span | None, label: str = "", help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, label=label, help=help))

    # ------------------------------------------------------------------ includes

    def _items(self, text: str, file: str, stack: tuple[str, ...]) -> list[tuple[str, ast.Item]]:
        """Items of `file` with those of its includes spliced in where the include stands."""
        self.sources[file] = text
        tree = parse(text, file)
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
            if str(target) in stack or len(stack) >= MAX_INCLUDE_DEPTH:
                self.error("E005", f"`{item.path}` includes itself", item.span, help="remove the cycle")
                continue
            try:
                inc_text = target.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                self.error(
                    "E005",
                    f"cannot include `{item.path}`: {_reason(err)}",
                    item.span,
                    help="paths are relative to the including file",
                )
                continue
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
        items = self._items(text, file, (str(Path(file).resolve()),))
        seen: dict[tuple, tuple[str, Span]] = {}

        def single(key: tuple, item_file: str, span: Span, what: str) -> bool:
            """Keyed items may be overridden by a later file, never repeated in the same one."""
            prev = seen.get(key)
            if prev and prev[0] == item_file:
                self.error(
                    "E003",
                    f"{what} is defined twice",
                    span,
                    label="second definition",
                    help=f"the first is at {prev[1].file}:{prev[1].line}; remove one",
                )
                return False
            seen[key] = (item_file, span)
            return True

        doc = ""
        name = Path(file).stem
        params: dict[str, ParamDef] = {}
        job_decls: list[ast.JobDecl] = []
        by_kind: dict[str, dict] = {"cost": {}, "comm": {}, "memory": {}}
        requires: list[ast.Require] = []
        rules: list[ast.Rule] = []
        placement: ast.Placement | None = None
        memory_limit: ast.MemoryLimit | None = None
        body: ast.Order | None = None
        tables: list[ast.Table] = []
        for item_file, item in items:
            if isinstance(item, ast.Docstring):
                if not doc:
                    doc = item.text
            elif isinstance(item, ast.ScheduleName):
                if single(("schedule",), item_file, item.span, "the schedule name"):
                    name = item.name
            elif isinstance(item, ast.Param):
                if item.name in ("pp", "vpp", "microbatches", "rank", "chunk", "stage"):
                    self.error("E003", f"`{item.name}` is built in", item.span, help="choose another name")
                elif single(("param", item.name), item_file, item.span, f"parameter `{item.name}`"):
                    default = self._const(item.default)
                    params[item.name] = ParamDef(item.name, default, item.span)
            elif isinstance(item, ast.Require):
                requires.append(item)
            elif isinstance(item, ast.JobDecl):
                if single(("job", item.name), item_file, item.span, f"job type `{item.name}`"):
                    job_decls.append(item)
            elif isinstance(item, ast.Placement):
                if single(("placement",), item_file, item.span, "the placement"):
                    placement = item
            elif isinstance(item, ast.Cost):
                if single(("cost", item.job), item_file, item.span, f"the cost of `{item.job}`"):
                    by_kind["cost"][item.job] = item
            elif isinstance(item, ast.Comm):
                if single(("comm", item.key), item_file, item.span, f"`comm {item.key}`"):
                    by_kind["comm"][item.key] = item
            elif isinstance(item, ast.Memory):
                if single(("memory", item.job), item_file, item.span, f"the memory of `{item.job}`"):
                    by_kind["memory"][item.job] = item
            elif isinstance(item, ast.MemoryLimit):
                if single(("memory limit",), item_file, item.span, "the memory limit"):
                    memory_limit = item
            elif isinstance(item, ast.Rule):
                rules.append(item)
            elif isinstance(item, ast.Order):
                if single(("order",), item_file, item.span, "the order"):
                    body = item
            elif isinstance(item, ast.Table):
                if tables and tables[-1].when is None:
                    self.error(
                        "E003",
                        "a table follows a table without `when`",
                        item.span,
                        help="only the last table may leave out `when <condition>`",
                    )
                tables.append(item)

        job_types = self._job_types(job_decls)
        type_index = {jt.name: i for i, jt in enumerate(job_types)}
        type_index.update({jt.alias: i for i, jt in enumerate(job_types) if jt.alias})
        param_types = [(p.name, _type_of(p.default)) for p in params.values()]
        globals_scope = Scope({n: INT for n in ("pp", "vpp", "microbatches")}, "a top-level expression")
        globals_scope.names.update(dict(param_types))
        job_scope = Scope(dict(globals_scope.names), "a cost or memory expression")
        job_scope.names.update({"rank": INT, "chunk": INT, "stage": INT})

        compiled_requires = []
        for req in requires:
            src, _ = self.exprs.compile(req.condition, globals_scope)
            compiled_requires.append(
                Require(self._fn(src, params), req.message, self._snippet(req.condition.span), req.span)
            )

        placement_kind, placement_fn = "looped", None
        if placement is not None:
            placement_kind = placement.kind
            if placement.kind == "expr":
                scope = Scope(dict(globals_scope.names), "a placement")
                scope.names.update({"rank": INT, "chunk": INT})
                src = self.exprs.compile_int(placement.expr, scope, "a stage")
                placement_fn = self._fn(src, params, extra=("rank", "chunk"))

        costs = {}
        for job, cost in by_kind["cost"].items():
            if self._known_type(job, type_index, cost.span):
                src, _ = self.exprs.compile(cost.value, job_scope)
                costs[job_types[type_index[job]].name] = self._fn(src, params, extra=("rank", "chunk", "stage"))
        comm = {}
        for key, item in by_kind["comm"].items():
            if key not in COMM_KEYS:
                self.error(
                    "E002",
                    f"unknown communication setting `{key}`",
                    item.span,
                    help="use `comm latency = <time>` or `comm bandwidth = <units per time>`",
                )
                continue
            src, _ = self.exprs.compile(item.value, globals_scope)
            comm[key] = self._fn(src, params)
        memory = {}
        for job, item in by_kind["memory"].items():
            if self._known_type(job, type_index, item.span):
                src, _ = self.exprs.compile(item.value, job_scope)
                memory[job_types[type_index[job]].name] = (
                    item.verb,
                    self._fn(src, params, extra=("rank", "chunk", "stage")),
                )
        limit_fn = None
        if memory_limit is not None:
            scope = Scope(dict(globals_scope.names), "the memory limit")
            scope.names["rank"] = INT
            src, _ = self.exprs.compile(memory_limit.value, scope)
            limit_fn = self._fn(src, params, extra=("rank",))

        stream_rules, priorities = [], []
        for rule in rules:
            if rule.job is not None:
                self._known_type(rule.job, type_index, rule.span)
            prio = None
            if rule.priority is not None:
                prio = self._fn(self.exprs.compile_int(rule.priority, globals_scope, "a priority"), params)
            stream_rules.append(StreamRule(rule.pattern, rule.job, rule.stream, None, rule.attrs, rule.span))
            priorities.append(prio)

        sites: list[Site] = [Site(Span(file, 1, 1, 1, 2), "")]
        order_fn, order_source, line_sites, table_defs = None, "", {}, []
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
        elif body is not None:
            oc = OrderCompiler(self.exprs, type_index, [jt.name for jt in job_types], param_types, sites, self.sources)
            order_source = oc.compile(body.body, body.span)
            line_sites = oc.line_sites
            if not self.diagnostics:
                namespace: dict = {"_ceildiv": ceildiv}
                try:
                    exec(compile(order_source, f"<order of {file}>", "exec"), namespace)
                    order_fn = namespace["_order"]
                except (SyntaxError, RecursionError, MemoryError):  # Python's own nesting limits
                    self.error(
                        "E001",
                        "the order is nested too deeply",
                        body.span,
                        help="Python compiles it: keep blocks under 20 levels and expressions under 200",
                    )
        for tab in tables:
            when = None
            if tab.when is not None:
                when = self._fn(self.exprs.compile(tab.when, globals_scope)[0], params)
            table_defs.append(TableDef(when, self._table(tab, type_index, job_types, sites), tab.span))

        if self.diagnostics:
            raise DiagnosticError(self.diagnostics)
        return ScheduleDef(
            name=name,
            doc=doc,
            path=file,
            params=params,
            requires=compiled_requires,
            job_types=job_types,
            placement_kind=placement_kind,
            placement_fn=placement_fn,
            costs=costs,
            comm=comm,
            memory=memory,
            memory_limit_fn=limit_fn,
            memory_limit_span=memory_limit.span if memory_limit else None,
            rules=stream_rules,
            rule_priorities=priorities,
            order_fn=order_fn,
            order_source=order_source,
            tables=table_defs,
            sites=sites,
            line_sites=line_sites,
            sources=self.sources,
            order_ast=body,
        )

    # ------------------------------------------------------------------ pieces

    def _snippet(self, span: Span) -> str:
        from ppdsl.lowering import site_text

        return site_text(self.sources.get(span.file, ""), span)

    def _const(self, e: ast.Expr) -> int | float | bool:
        if isinstance(e, (ast.Num, ast.Bool)):
            return e.value
        if isinstance(e, ast.Unary) and e.op == "-" and isinstance(e.operand, ast.Num):
            return -e.operand.value
        self.error("E010", "a parameter default must be a number or `true` / `false`", e.span)
        return 0

    def _fn(self, src: str, params: dict[str, ParamDef], extra: tuple[str, ...] = ()):
        """A callable over the size/parameter environment: fn(pp=, vpp=, microbatches=, <params>, <extra>)."""
        names = ["pp", "vpp", "microbatches", *params, *extra]
        args = ", ".join(mangle(n) for n in names)
        namespace: dict = {"_ceildiv": ceildiv}
        try:
            exec(f"def _f({args}):\n    return {src}\n", namespace)
        except (SyntaxError, RecursionError, MemoryError):  # Python's own nesting limits
            self.error("E001", "expression nested too deeply", None, help="split it, or simplify it")
            namespace["_f"] = lambda *args: 0
        inner = namespace["_f"]
        order = tuple(names)

        def call(env: dict):
            return inner(*(env[n] for n in order))

        call.source = src  # kept for code generation
        return call

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

    def _job_types(self, decls: list[ast.JobDecl]) -> list[JobType]:
        types = [
            JobType("forward", "forward", alias="F"),
            JobType("backward", "backward", alias="B"),
            JobType("backward_b", "backward_b", alias="I"),
            JobType("backward_w", "backward_w", alias="W"),
            JobType("optimizer", "optimize"),
        ]
        names = set(BUILTIN_JOB_TYPES) | set(BUILTIN_ALIASES)
        for d in decls:
            if d.name in BUILTIN_JOB_TYPES:
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
                if anchor is not None and anchor not in BUILTIN_JOB_TYPES[:4]:
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
    ) -> list[tuple[int, list[tuple[int, int, int, int]]]]:
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
                if m.group(2) is None and job_types[t].name != "optimizer":
                    self.error(
                        "E004",
                        f"`{cell.text}` needs a micro-batch number",
                        cell.span,
                        help=f"write `{cell.text}0` for micro-batch 0",
                    )
                    continue
                sites.append(Site(cell.span, cell.text))
                jobs.append((t, chunk, mb, len(sites) - 1))
            rows.append((row.rank, jobs))
        return rows


def _type_of(value: int | float | bool) -> str:
    return FLOAT if isinstance(value, float) else INT
