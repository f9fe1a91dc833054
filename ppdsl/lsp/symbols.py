"""Every name a schedule defines and every place it is used: the index behind go to definition, find references,
rename, hover and completion.

Built from syntax trees alone (`ppdsl.lsp.syntax`), so it works on a file that does not resolve or does not even
parse as a whole. A file and the files it includes are one scope, as `include` splices them: a `param` of an
included file is found from the including one, and a rename edits both.

Names defined: `param`, `fn` (and its arguments, inside its body), `let` and `for` variables (inside their
block), job types (`job NAME (ALIAS)` and the built-in five), and `include`d files. The sizes (`pp`, `rank`, ...)
are symbols without a definition.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ppdsl.common.diagnostics import Span
from ppdsl.common.files import SCHEDULE_BYTES, InputError, read_input_text
from ppdsl.language import ast
from ppdsl.language.functions import walk
from ppdsl.language.includes import SCHED_SUFFIX
from ppdsl.language.typecheck import BUILTIN_NAMES as SIZE_NAMES
from ppdsl.lsp.syntax import ItemCache
from ppdsl.plan.kinds import KINDS, letters

MAX_FILES = 32  # a file and its includes, as far as the index follows them (the resolver's chain bound)
MAX_READS = 2 * MAX_FILES  # paths the index tries to read, those that cannot be read (a typo, a FIFO) included
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# the job-type part of a table cell (`F3`, `B0.c1`, `recv_forward2`, `optimizer`), as the resolver reads a cell
CELL_TYPE = re.compile(r"[A-Za-z_]+?(?=\d|\.c\d|$)")
KEYWORDS = (
    "schedule include param fn require job placement partition allow empty cost comm memory limit rule order table "
    "when in ops before "
    "after receives sends looped vshape stage allocates frees stream priority attr rank let repeat for if elif "
    "else then and or not true false"
).split()


@dataclass(frozen=True)
class Symbol:
    """A defined name. `span` is the name where it is defined (None for built-ins and sizes); `node` the AST
    node that defines it."""

    kind: str  # param | fn | arg | let | for | job | include | size
    name: str
    span: Span | None = None
    node: object = field(default=None, compare=False, hash=False, repr=False)
    target: str | None = None  # an include's file, resolved

    @property
    def builtin(self) -> bool:
        return self.span is None


@dataclass(frozen=True)
class Occurrence:
    span: Span
    symbol: Symbol
    definition: bool = False


class Source:
    """One file's text, for turning spans into offsets and back."""

    def __init__(self, file: str, text: str):
        self.file, self.text = file, text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.lines = text.split("\n")

    def offset(self, line: int, col: int) -> int:
        line = min(max(line, 1), len(self.starts))
        return min(self.starts[line - 1] + col - 1, len(self.text))

    def span(self, start: int, end: int) -> Span:
        a, b = self._pos(start), self._pos(end)
        return Span(self.file, a[0], a[1], b[0], b[1])

    def _pos(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:  # the last line starting at or before offset
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.starts[lo] + 1

    def text_of(self, span: Span) -> str:
        return self.text[self.offset(span.line, span.col) : self.offset(span.end_line, span.end_col)]

    def name_in(self, span: Span, pattern: str, group: int = 1) -> Span | None:
        """The span of `pattern`'s group inside `span` (the name after a keyword: `param (NAME)`)."""
        start = self.offset(span.line, span.col)
        m = re.compile(pattern).search(self.text, start, self.offset(span.end_line, span.end_col))
        return self.span(m.start(group), m.end(group)) if m and m.group(group) else None


def contains(span: Span, line: int, col: int) -> bool:
    """`(line, col)` (1-based) is in the span, its end included (a cursor just after a name is on it)."""
    return (span.line, span.col) <= (line, col) <= (span.end_line, span.end_col)


@dataclass
class FileIndex:
    file: str
    source: Source
    items: list[ast.Item]
    parsed: bool  # the whole file parses


@dataclass
class Index:
    """The names of a file and its includes."""

    root: str
    files: dict[str, FileIndex]
    occurrences: list[Occurrence] = field(default_factory=list)
    params: dict[str, Symbol] = field(default_factory=dict)
    functions: dict[str, Symbol] = field(default_factory=dict)
    jobs: dict[str, Symbol] = field(default_factory=dict)  # by name and by alias
    locals: list[Symbol] = field(default_factory=list)  # let / for / fn arguments
    statements: list[tuple[Span, ast.Stmt]] = field(default_factory=list)  # every order statement
    _by_line: dict[tuple[str, int], list[Occurrence]] | None = field(default=None, repr=False)

    def at(self, file: str, line: int, col: int) -> Occurrence | None:
        """The name at a position (the innermost, shortest, when spans nest)."""
        if self._by_line is None:  # names are on one line: look among those of the position's line
            self._by_line = {}
            for o in self.occurrences:
                self._by_line.setdefault((o.span.file, o.span.line), []).append(o)
        found = [o for o in self._by_line.get((file, line), ()) if contains(o.span, line, col)]
        return min(found, key=lambda o: _length(o.span), default=None)

    def references(self, symbol: Symbol) -> list[Occurrence]:
        return [o for o in self.occurrences if o.symbol == symbol]

    def statement_at(self, file: str, line: int, col: int) -> ast.Stmt | None:
        found = [(span, s) for span, s in self.statements if span.file == file and contains(span, line, col)]
        return min(found, key=lambda f: _length(f[0]), default=(None, None))[1]


def _length(span: Span) -> tuple[int, int]:
    return (span.end_line - span.line, span.end_col - span.col)


SIZES = {name: Symbol("size", name) for name in SIZE_NAMES}
BUILTIN_JOBS = {name: Symbol("job", name) for name in KINDS}


def build_index(root: str, text: str, read: Callable[[str], str | None], cache: ItemCache | None = None) -> Index:
    """The index of `root` (whose text is `text`) and of the files it includes, read with `read(path)` (an
    open editor buffer, else the file; None when it cannot be read); `cache` holds the items parsed before."""
    cache = cache or ItemCache()
    files: dict[str, FileIndex] = {}
    order: list[str] = []
    # each file is read once per index, by its resolved path (a symlink and its target are one), whatever the
    # include statements naming it; one that cannot be read is tried once too
    tried: dict[str, str | None] = {}

    def text_of(target: str) -> str | None:
        if target not in tried and len(tried) < MAX_READS:
            tried[target] = read(target)
        return tried.get(target)

    def visit(file: str, content: str) -> None:
        items, parsed = cache.items(content, file)
        files[file] = FileIndex(file, Source(file, content), items, parsed)
        order.append(file)
        for item in items:
            if isinstance(item, ast.Include):
                target = include_target(file, item.path)
                if target is None or target in files or len(files) >= MAX_FILES:
                    continue
                inc = text_of(target)
                if inc is not None:
                    visit(target, inc)

    visit(root, text)
    index = Index(root, files)
    _Builder(index).build([files[f] for f in order])
    return index


def read_saved(path: str) -> str | None:
    """A schedule file's text as saved, read as the resolver reads an include: a regular `.sched` file under the
    size cap, never waited on (`ppdsl.common.files`); None for anything else (a FIFO, `/dev/zero`, a `.py`)."""
    if Path(path).suffix != SCHED_SUFFIX:
        return None
    try:
        return read_input_text(path, SCHEDULE_BYTES)
    except InputError:
        return None


def include_target(file: str, path: str) -> str | None:
    """The file an `include` names, as the resolver finds it: relative to the including file."""
    try:
        return str((Path(file).parent / path).resolve())
    except (OSError, ValueError, RuntimeError):
        return None


class _Builder:
    def __init__(self, index: Index):
        self.index = index
        self.jobs: dict[str, Symbol] = index.jobs
        self.jobs.update(BUILTIN_JOBS)
        self.jobs.update({letter: BUILTIN_JOBS[name] for letter, name in letters().items()})

    def add(self, span: Span | None, symbol: Symbol, definition: bool = False) -> None:
        if span is not None:
            self.index.occurrences.append(Occurrence(span, symbol, definition))

    def build(self, files: list[FileIndex]) -> None:
        # definitions first (a use may come before its definition, in another file or later in this one)
        for f in files:
            for item in f.items:
                self.define(f.source, item)
        for f in files:
            for item in f.items:
                self.uses(f.source, item)

    def define(self, src: Source, item: ast.Item) -> None:
        ix = self.index
        if isinstance(item, ast.Param):
            span = src.name_in(item.span, r"param\s+([A-Za-z_]\w*)")
            ix.params[item.name] = sym = Symbol("param", item.name, span, item)
            self.add(span, sym, True)
        elif isinstance(item, ast.FnDef):
            ix.functions[item.name] = sym = Symbol("fn", item.name, item.name_span, item)
            self.add(item.name_span, sym, True)
        elif isinstance(item, ast.JobDecl):
            span = src.name_in(item.span, r"job\s+([A-Za-z_]\w*)")
            self.jobs[item.name] = sym = Symbol("job", item.name, span, item)
            self.add(span, sym, True)
            if item.alias:
                self.jobs[item.alias] = sym
                self.add(src.name_in(item.span, r"job\s+\w+\s*\(\s*([A-Za-z_]\w*)"), sym)
        elif isinstance(item, ast.Include):
            span = src.name_in(item.span, r'"([^"\n]*)"')
            target = include_target(src.file, item.path)
            self.add(span, Symbol("include", item.path, span, item, target), True)

    def uses(self, src: Source, item: ast.Item) -> None:
        scope = Scope(self, None)
        if isinstance(item, ast.Param):
            self.expr(item.default, scope)
        elif isinstance(item, ast.FnDef):
            inner = Scope(self, scope)
            header = src.name_in(item.span, r"fn\s+\w+\s*\(([^)]*)\)")
            if header is not None:
                start = src.offset(header.line, header.col)
                for m in NAME.finditer(src.text_of(header)):
                    span = src.span(start + m.start(), start + m.end())
                    inner.define(Symbol("arg", m.group(), span, item))
            self.expr(item.body, inner)
        elif isinstance(item, (ast.Require, ast.MemoryLimit, ast.Comm)):
            self.expr(item.condition if isinstance(item, ast.Require) else item.value, scope)
        elif isinstance(item, ast.Placement) and item.expr is not None:
            self.expr(item.expr, scope)
        elif isinstance(item, ast.Cost):
            self.job_name(src.name_in(item.span, r"cost\s+([A-Za-z_]\w*)"), item.job)
            self.expr(item.value, scope)
        elif isinstance(item, ast.Memory):
            self.job_name(src.name_in(item.span, r"memory\s+([A-Za-z_]\w*)"), item.job)
            self.expr(item.value, scope)
        elif isinstance(item, ast.JobDecl):
            for clause in ("before", "after"):
                name = getattr(item, clause)
                if name:
                    self.job_name(src.name_in(item.span, rf"\b{clause}\s+([A-Za-z_]\w*)"), name)
        elif isinstance(item, ast.Rule):
            if item.job:
                self.job_name(src.name_in(item.span, r'"[^"\n]*"\s*in\s+([A-Za-z_]\w*)'), item.job)
            if item.priority is not None:
                self.expr(item.priority, scope)
        elif isinstance(item, ast.Order):
            self.block(item.body, Scope(self, scope))
        elif isinstance(item, ast.Table):
            if item.when is not None:
                self.expr(item.when, scope)
            for row in item.rows:
                for cell in row.cells:
                    m = CELL_TYPE.match(cell.text)
                    if m:
                        s = cell.span
                        self.job_name(Span(s.file, s.line, s.col, s.line, s.col + m.end()), m.group())

    def job_name(self, span: Span | None, name: str) -> None:
        sym = self.jobs.get(name)
        if sym is not None:
            self.add(span, sym)

    def block(self, body: Iterable[ast.Stmt], scope: Scope) -> None:
        for stmt in body:
            self.index.statements.append((stmt.span, stmt))
            if isinstance(stmt, ast.Let):
                self.expr(stmt.value, scope)
                src = self.index.files[stmt.span.file].source
                span = src.name_in(stmt.span, r"let\s+([A-Za-z_]\w*)")
                known = scope.lookup(stmt.name)
                if known is not None and known.kind == "let":
                    self.add(span, known, True)  # a let bound again is the same variable (a rename renames both)
                else:
                    scope.define(Symbol("let", stmt.name, span, stmt))
            elif isinstance(stmt, ast.JobStmt):
                self.job_name(stmt.name_span, stmt.name)
                for _, value, _ in stmt.kwargs:
                    self.expr(value, scope)
                if stmt.times is not None:
                    self.expr(stmt.times, scope)
            elif isinstance(stmt, ast.Repeat):
                self.expr(stmt.count, scope)
                self.block(stmt.body, Scope(self, scope))
            elif isinstance(stmt, ast.For):
                self.expr(stmt.start, scope)
                self.expr(stmt.stop, scope)
                inner = Scope(self, scope)
                src = self.index.files[stmt.span.file].source
                inner.define(Symbol("for", stmt.var, src.name_in(stmt.span, r"for\s+([A-Za-z_]\w*)"), stmt))
                self.block(stmt.body, inner)
            elif isinstance(stmt, ast.If):
                for test, body in stmt.branches:
                    self.expr(test, scope)
                    self.block(body, Scope(self, scope))
                self.block(stmt.orelse, Scope(self, scope))

    def expr(self, e: ast.Expr, scope: Scope) -> None:
        for node in walk(e):
            if isinstance(node, ast.Var):
                sym = scope.lookup(node.name) or self.index.params.get(node.name) or SIZES.get(node.name)
                if sym is not None:
                    self.add(node.span, sym)
            elif isinstance(node, ast.Call):
                sym = self.index.functions.get(node.func)
                if sym is not None:
                    self.add(node.func_span, sym)


class Scope:
    """Names bound in a block (or a function's arguments), over those of the enclosing one."""

    def __init__(self, builder: _Builder, parent: Scope | None):
        self.builder, self.parent, self.names = builder, parent, {}

    def define(self, symbol: Symbol) -> None:
        self.names[symbol.name] = symbol
        self.builder.index.locals.append(symbol)
        self.builder.add(symbol.span, symbol, True)

    def lookup(self, name: str) -> Symbol | None:
        scope = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None
