"""The plan module's backend of the order compiler: a checked order -> the body of a plan module's
`job_list(rank, pp, vpp, microbatches, ...)` (`readable_job_list`), with `jobs.append(("forward", chunk, k))`,
counters in a dict named `next_mb`, user names as written where Python allows them (`readable_name`), expressions
with only the parentheses a person writes (`readable_expr`), no site ids, and each source line as a comment.
`PLAN_NAMES` are the names a plan module keeps for itself, which no user name may take.
"""

from __future__ import annotations

import ast as pyast
import builtins
import keyword
import re
import textwrap
from collections.abc import Callable

from ppdsl.common.diagnostics import Span
from ppdsl.language.ir import EmitJob, ForRange, Let, Repeat, ScheduleDef, Stmt
from ppdsl.language.lowering import OrderLowering
from ppdsl.language.pysource import LINE_LENGTH, file_lines, py_str, py_text, site_text
from ppdsl.plan.kinds import Members, counter_of

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


def readable_job_list(defn: ScheduleDef, location: Callable[[Span], str] | None = None) -> tuple[str, set[str]]:
    """The body of `job_list` for `defn`'s order, and the plan module's helper functions it calls (`_count`,
    `_check_chunk`, `_micro_batch`, `_ceildiv`). `location` names a statement's source line in its comments and
    error messages (default `file:line`)."""
    lowering = ReadableOrder(defn, location)
    return lowering.lower(), lowering.helpers


class ReadableOrder(OrderLowering):
    def __init__(self, defn: ScheduleDef, location: Callable[[Span], str] | None = None):
        super().__init__(defn)
        self.location = location or (lambda span: f"{span.file}:{span.line}")
        self.file_texts = defn.sources
        self.type_index = {jt.name: i for i, jt in enumerate(defn.job_types)}
        self.helpers: set[str] = set()  # the plan module's helper functions the body calls
        self._counted: set[int] = set()  # counter slots used
        self._counted_types: set[int] = set()  # job types that took their micro-batch from a counter
        self._commented: tuple[str, int] | None = None  # the source line the last comment showed
        self._chunk_known = 0  # literal chunks up to this are proven to exist where we are

    def lower(self) -> str:
        """The body of `job_list`: `jobs`, the counters, the statements (each source line as a comment), `return`."""
        self.block(self.order.body, 1)
        head = ["    jobs: list[tuple[str, int, int]] = []"]
        if self._counted:
            head.append("    # next_mb[job][chunk]: the micro-batch the next job of that type takes on that chunk")
            head.append("    next_mb = {")
            for slot in sorted(self._counted):
                name = self.type_names[slot]
                sharers = [
                    n
                    for t, n in enumerate(self.type_names)
                    if n != name and counter_of(n) == name and t in self._counted_types
                ]
                note = f"  # {', '.join(sharers)}'s too: a micro-batch's {name} is whole or split" if sharers else ""
                head.append(f"        {py_str(self.type_names[slot])}: [0] * vpp,{note}")
            head.append("    }")
        return "\n".join([*head, *self.lines, "    return jobs"]) + "\n"

    def block(self, body: tuple[Stmt, ...], indent: int) -> None:
        chunk_known = self._chunk_known  # what a block proves may not have run: forget it after the block
        super().block(body, indent)
        self._chunk_known = chunk_known

    def statement(self, stmt: Stmt, indent: int) -> None:
        if not isinstance(stmt, Let):  # a `let` alone on its line reads as its code: the location can trail it
            self._source_comment(stmt.span, indent)
        super().statement(stmt, indent)

    def expr(self, source: str) -> str:
        if "_ceildiv(" in source:
            self.helpers.add("_ceildiv")
        return readable_expr(source)

    def let(self, stmt: Let, indent: int) -> None:
        code = f"{readable_name(stmt.name)} = {self.expr(stmt.value.source)}"
        self.emit(indent, self._source_comment(stmt.span, indent, code), stmt.site)

    def repeat(self, stmt: Repeat, indent: int) -> None:
        self.emit(indent, f"for _ in range({self._checked_count(stmt.count.source, stmt.span)}):", stmt.site)
        self.loop_block(stmt.body, indent + 1)

    def for_range(self, stmt: ForRange, indent: int) -> None:
        # no bound check: the checker's guard against hangs, not a property of a schedule
        start, stop = self.expr(stmt.start.source), self.expr(stmt.stop.source)
        bounds = stop if start == "0" else f"{start}, {stop}"
        self.emit(indent, f"for {readable_name(stmt.var)} in range({bounds}):", stmt.site)
        self.loop_block(stmt.body, indent + 1)

    def job(self, stmt: EmitJob, indent: int) -> None:
        """`jobs.append((type, chunk, micro-batch))`, the chunk checked to exist and the counter moved on."""
        site = stmt.site
        if self.defn.job_types[stmt.type].kind is not None and self.defn.job_types[stmt.type].kind.members is (
            Members.REPLICAS
        ):  # a plan module runs one replica's pipeline, where a reduction over the replicas is no work (dp 1)
            chunk = self.expr(stmt.chunk.source)  # named, so a loop around it reads as what it walks
            line = "pass" if chunk == "0" else f"_ = {chunk}"
            self.emit(indent, f"{line}  # {self.type_names[stmt.type]} of this chunk: no job at dp 1", site)
            return
        name = py_str(self.type_names[stmt.type])
        chunk_known = self._chunk_known
        if stmt.times is not None:
            self.emit(indent, f"for _ in range({self._checked_count(stmt.times.source, stmt.span)}):", site)
            indent += 1
        chunk = self.expr(stmt.chunk.source)
        if chunk != "0" and not (chunk.isdigit() and int(chunk) <= self._chunk_known):
            if not chunk.isidentifier() and not chunk.isdigit():
                self.emit(indent, f"chunk_ = {chunk}", site)
                chunk = "chunk_"
            self.helpers.add("_check_chunk")
            self.emit(indent, f"_check_chunk({chunk}, vpp, {self._where(stmt.span)})", site)
            if chunk.isdigit():  # vpp does not change: later literal chunks up to this one need no check
                self._chunk_known = int(chunk)
        if stmt.mb is None:
            counter = f"next_mb[{py_str(self.type_names[stmt.counter])}][{chunk}]"
            self._counted.add(stmt.counter)
            self._counted_types.add(stmt.type)
            self.emit(indent, f"jobs.append(({name}, {chunk}, {counter}))", site)
            self.emit(indent, f"{counter} += 1", site)
        else:
            mb = self.expr(stmt.mb.source)
            if not mb.isdigit():
                self.helpers.add("_micro_batch")
                mb = f"_micro_batch({mb}, {self._where(stmt.span)})"
            self.emit(indent, f"jobs.append(({name}, {chunk}, {mb}))", site)
        if stmt.times is not None:  # the loop may run no times: what it proved is not known after it
            self._chunk_known = chunk_known

    def _where(self, span: Span) -> str:
        return py_str(self.location(span))

    def _checked_count(self, src: str, span: Span) -> str:
        """A repeat count as the argument of `range`: a literal as it is, else checked not to be negative."""
        src = self.expr(src)
        if src.isdigit():
            return src
        self.helpers.add("_count")
        return f"_count({src}, {self._where(span)})"

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
                self.emit(indent, f"# {part}".rstrip(), 0)
        where = py_text(self.location(span))
        trailing = f"  # {where}"
        if code is not None and text == site_text(self.file_texts.get(span.file, ""), span):
            if len(code) + len(trailing) <= room:
                return code + trailing
        text = re.sub(r"\s{2,}#", "  #", text)  # a source comment, pulled in from its alignment column
        comment = f"# {where}: {py_text(text)}".rstrip()
        if len(comment) > room:
            comment = comment[: room - 3].rstrip() + "..."
        self.emit(indent, comment, 0)
        return code
