"""What the editor asks about a document, answered from its check (`ppdsl.lsp.checking`) and its names
(`ppdsl.lsp.symbols`): hover text, code lenses, completion, the outline, definitions, references and renames.

Pure functions over a `Document` (no server state), so each works on whatever the last check and the syntax
tree give: a file with a syntax error keeps its outline and hovers on the items that parse, and one that does
not resolve keeps everything but the figures of a check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types as lsp

from ppdsl.common import codes
from ppdsl.common.diagnostics import Span
from ppdsl.common.text import count
from ppdsl.common.units import format_bytes
from ppdsl.language import ast
from ppdsl.language.resolve import COMM_KEYS, COPY_COMM_KEYS, FRACTION_ROLES, MEMORY_VERBS
from ppdsl.language.typecheck import FUNCTIONS
from ppdsl.language.types import show
from ppdsl.lsp.checking import Checked
from ppdsl.lsp.convert import Units, to_range, uri_of
from ppdsl.lsp.symbols import KEYWORDS, NAME, SIZES, Index, Occurrence, Symbol, read_saved
from ppdsl.plan.kinds import KINDS, by_letter, default_cost, memory_of

MAX_SHOWN_JOBS = 32  # of one rank, in a statement's hover
SIZE_MEANINGS = {
    "pp": "the pipeline degree (number of ranks)",
    "microbatches": "micro-batches per step",
    "vpp": "chunks (virtual stages) per rank",
    "rank": "the rank running this order, 0 .. pp - 1",
    "chunk": "the chunk of a job, 0 .. vpp - 1",
    "stage": "the global stage of a chunk, 0 .. pp * vpp - 1",
}


@dataclass
class Document:
    """One open file as the features see it: its text, its last check and its names."""

    path: str
    text: str
    checked: Checked
    index: Index
    units: Units
    diagnostics: list[lsp.Diagnostic]

    def lines(self, file: str) -> list[str] | None:
        f = self.index.files.get(file)
        if f is not None:
            return f.source.lines
        text = read_saved(file)
        return text.split("\n") if text is not None else None

    def range(self, span: Span) -> lsp.Range:
        return to_range(span, self.lines(span.file), self.units)

    def location(self, span: Span) -> lsp.Location:
        return lsp.Location(uri_of(span.file), self.range(span))


# ----------------------------------------------------------------------------------------------- hover


def hover(doc: Document, line: int, col: int, pos: lsp.Position) -> lsp.Hover | None:
    """Markdown for the position: the diagnostics there with their `ppdsl explain` text, the name there, and
    the jobs of the statement there, rank by rank."""
    parts = [diagnostic_hover(d) for d in doc.diagnostics if _in_range(d.range, pos)]
    occ = doc.index.at(doc.path, line, col)
    if occ is not None:
        parts.append(symbol_hover(doc, occ.symbol))
    stmt = doc.index.statement_at(doc.path, line, col)
    if stmt is not None:
        jobs = statement_jobs(doc, stmt)
        if jobs:
            parts.append(jobs)
    parts = [p for p in parts if p]
    if not parts:
        return None
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, "\n\n---\n\n".join(parts)))


def _in_range(r: lsp.Range, pos: lsp.Position) -> bool:
    return (r.start.line, r.start.character) <= (pos.line, pos.character) <= (r.end.line, r.end.character)


def diagnostic_hover(diag: lsp.Diagnostic) -> str:
    data = diag.data if isinstance(diag.data, dict) else {}
    grid = "".join(f"\n```text\n{note}\n```\n" for note in data.get("notes", []) if "\n" in note)
    entry = codes.lookup(str(diag.code))
    explain = f"\n```text\n{codes.explain(entry)}```" if entry is not None else ""
    return f"**{diag.code}**: {data.get('message', diag.message)}\n{grid}{explain}"


def symbol_hover(doc: Document, sym: Symbol) -> str:
    return _HOVERS[sym.kind](doc, sym)


def _param_hover(doc: Document, sym: Symbol) -> str:
    node = sym.node
    src = doc.index.files[sym.span.file].source
    text = f"```sched\n{src.text_of(node.span)}\n```"
    defn, result = doc.checked.defn, doc.checked.result
    if defn is not None and sym.name in defn.params:
        default = defn.params[sym.name].default
    elif isinstance(node.default, (ast.Num, ast.Bool)):  # the file does not resolve: the default as written
        default = node.default.value
    else:
        return text
    kind = "bool" if isinstance(default, bool) else type(default).__name__
    text += f"\nparameter of type `{kind}`, default `{show(default)}`"
    if result is not None and result.expansion is not None and sym.name in result.expansion.params:
        text += f"; `{show(result.expansion.params[sym.name])}` at {doc.checked.size_text}"
    return text


def _fn_hover(doc: Document, sym: Symbol) -> str:
    src = doc.index.files[sym.span.file].source
    text = f"```sched\n{src.text_of(sym.node.span)}\n```"
    defn = doc.checked.defn
    fn = next((f for f in defn.functions if f.name == sym.name), None) if defn else None
    if fn is not None:
        args = ", ".join(f"{a}: {t}" for a, t in zip(fn.params, fn.param_types, strict=False))
        text += f"\n`{fn.name}({args}) -> {fn.result_type}`"
    return text


def _local_hover(doc: Document, sym: Symbol) -> str:
    if sym.kind == "arg":
        return f"argument `{sym.name}` of `fn {sym.node.name}`"
    src = doc.index.files[sym.span.file].source
    node = sym.node
    if isinstance(node, ast.For):
        header = src.text_of(node.span).split("{", 1)[0].strip()
        return f"loop variable\n```sched\n{header}\n```"
    return f"```sched\n{src.text_of(node.span)}\n```"


def _size_hover(doc: Document, sym: Symbol) -> str:
    r = doc.checked.result
    value = {"pp": r.pp, "vpp": r.vpp, "microbatches": r.microbatches}.get(sym.name) if r else None
    at = f": `{value}` here ({doc.checked.sizes.source})" if value is not None else ""
    return f"`{sym.name}`, {SIZE_MEANINGS.get(sym.name, 'a size')}{at}"


def _include_hover(doc: Document, sym: Symbol) -> str:
    target = sym.target or sym.name
    state = "" if Path(target).is_file() else " (missing)"
    return f"include `{target}`{state}"


def _job_hover(doc: Document, sym: Symbol) -> str:
    name = sym.name
    decl = sym.node if isinstance(sym.node, ast.JobDecl) else None
    if decl is not None:
        src = doc.index.files[sym.span.file].source
        head = f"```sched\n{src.text_of(decl.span)}\n```"
    else:
        builtin = KINDS[name]
        letter = f" (`{builtin.letter}`)" if builtin.letter else ""
        head = f"built-in job type `{name}`{letter}, region `{builtin.region}`, default cost {builtin.default_cost:g}"
    lines = [head]
    result = doc.checked.result
    exp = result.expansion if result is not None else None
    if exp is not None and name in exp.type_names:
        t = exp.type_names.index(name)
        unit = exp.memory_unit
        lines.append(f"at {doc.checked.size_text}:")
        lines.append(f"- cost: {_per_rank(exp.cost[t], lambda v: f'{v:g}')}")
        amount = format_bytes if unit == "bytes" else (lambda v: count(v, "activation"))
        lines.append(f"- memory: {_per_rank(exp.mem_delta[t], lambda v: _signed(v, amount))} per job")
    else:
        declared = _declared(doc, name)
        lines.append(f"- cost: {declared.get('cost', f'{default_cost(name):g} (default)')}")
        if "memory" in declared:
            lines.append(f"- memory: {declared['memory']}")
    return "\n".join(lines)


def _signed(value: float, amount) -> str:
    if value == 0:
        return "none"
    return ("allocates " if value > 0 else "frees ") + amount(abs(value))


def _per_rank(table: list[list[float]], show) -> str:
    """One value when every rank and chunk has it, else each rank's (chunks separated by `/`)."""
    values = {v for row in table for v in row}
    if len(values) == 1:
        return show(values.pop())
    return "; ".join(f"rank {r}: " + " / ".join(show(v) for v in row) for r, row in enumerate(table))


def _declared(doc: Document, name: str) -> dict[str, str]:
    """The `cost` and `memory` declarations of a job type, as written (when the file does not check)."""
    found = {}
    for f in doc.index.files.values():
        for item in f.items:
            if isinstance(item, ast.Cost) and item.job == name:
                found["cost"] = f"`{f.source.text_of(item.span)}`"
            elif isinstance(item, ast.Memory) and item.job == name:
                found["memory"] = f"`{f.source.text_of(item.span)}`"
    return found


_HOVERS = {
    "param": _param_hover,
    "fn": _fn_hover,
    "arg": _local_hover,
    "let": _local_hover,
    "for": _local_hover,
    "size": _size_hover,
    "include": _include_hover,
    "job": _job_hover,
}


def statement_jobs(doc: Document, stmt: ast.Stmt) -> str:
    """The jobs an order statement emits at the checked sizes, rank by rank."""
    result = doc.checked.result
    exp = result.expansion if result is not None else None
    if exp is None:
        return ""
    inside = {
        i for i, site in enumerate(exp.defn.sites) if site.span.file == stmt.span.file and _within(site.span, stmt.span)
    }
    if not inside:
        return ""
    rows = []
    for rank, sites in enumerate(exp.sites):
        labels = [exp.label(exp.jobs[rank][step]) for step, s in enumerate(sites) if s in inside]
        shown = " ".join(labels[:MAX_SHOWN_JOBS]) + (" ..." if len(labels) > MAX_SHOWN_JOBS else "")
        rows.append(f"rank {rank}: {count(len(labels), 'job')}" + (f": {shown}" if labels else ""))
    return f"jobs of this statement at {doc.checked.size_text}:\n```text\n" + "\n".join(rows) + "\n```"


def _within(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and (inner.end_line, inner.end_col) <= (
        outer.end_line,
        outer.end_col,
    )


# ----------------------------------------------------------------------------------------------- code lenses


def code_lenses(doc: Document) -> list[lsp.CodeLens]:
    """Above the order (or the first table): the sizes checked with the makespan and bubble, then each rank's
    finish time and peak memory. A schedule that does not check says why in one lens."""
    anchor = next((i.span for i in doc.index.files[doc.path].items if isinstance(i, (ast.Order, ast.Table))), None)
    at = lsp.Range(lsp.Position(anchor.line - 1 if anchor else 0, 0), lsp.Position(anchor.line - 1 if anchor else 0, 0))
    checked = doc.checked
    result = checked.result

    def lens(title: str) -> lsp.CodeLens:
        return lsp.CodeLens(at, lsp.Command(title, ""))

    if result is None or not result.completed:
        problems = checked.diagnostics
        why = f"{problems[0].code} {problems[0].message}" if problems else "not checked"
        return [lens(f"{checked.size_text}: {why}")]
    ex, exp = result.execution, result.expansion
    amount = format_bytes if exp.memory_unit == "bytes" else (lambda v: f"{v:g}")
    lenses = [lens(f"{checked.size_text}: makespan {ex.makespan:g}, bubble {ex.bubble_ratio:.1%}")]
    for stats in ex.ranks:
        end = max(ex.end[stats.rank], default=0.0)
        limit = exp.memory_limit[stats.rank]
        over = f" (limit {amount(limit)})" if limit is not None else ""
        lenses.append(lens(f"rank {stats.rank}: makespan {end:g}, peak {amount(stats.peak_activations)}{over}"))
    return lenses


# ----------------------------------------------------------------------------------------------- completion


# What fits where: the text of the line before the word being typed decides (a lexical reading, so a file that
# does not parse still completes). `memory recompute |` takes recompute's verbs, `rule "..." { |` a rule's keys.
_WORD_BEFORE = re.compile(r"\w*$")
_MEMORY_SUBJECT = re.compile(r"^\s*memory\s+$")
_MEMORY_VERB = re.compile(r"^\s*memory\s+(\w+)\s+$")
_JOB_TYPE_SLOT = re.compile(r"(?:^\s*cost\s+|\brule\s+\"[^\"]*\"\s+in\s+|\b(?:before|after)\s+)$")
_COMM_KEY = re.compile(r"^\s*comm\s+$")
_COMM_OFFLOAD_KEY = re.compile(r"^\s*comm\s+offload\s+$")
_RULE_OPEN = re.compile(r"\brule\s+\"[^\"\n]*\"(?:\s+in\s+\w+)?\s*\{")
RULE_KEYS = {
    "stream": 'the op\'s execution stream: `stream = "name_{attr}"`',
    "priority": "the op's scheduling priority: `priority = EXPR`",
    "attr": "an op attribute: `attr NAME = VALUE`",
}
MEMORY_SETTINGS = {
    "allocates": "activation units a job of this type holds from its start",
    "frees": "activation units a job of this type releases at its end",
    "keeps": "what the forward of a recomputed micro-batch keeps for its recompute",
    "moves": "what an offload copies to the host and frees, and its reload brings back",
    "fraction": "the part of a micro-batch's activations each one rebuilds or moves: `fraction = X`, X in (0, 1]",
    "limit": "`memory limit = EXPR`: the most activation units a rank may hold",
}


def completions(doc: Document, line: int | None = None, col: int | None = None) -> list[lsp.CompletionItem]:
    """What fits at the 1-based (line, col): after `memory`, the job types and `limit` / `host`; after `memory
    T`, the verbs and settings T takes (`keeps` for recompute, `moves` for offload, `allocates` / `frees` for the
    others); in a `rule { }`, its keys; after `cost`, `in`, `before`, `after`, the job types; after `comm`, its
    keys. Anywhere else (or with no position): keywords, job types, parameters, functions, sizes and the file's
    variables. Job types come in the schedule's order (forward, backward, ..., then the file's own), which the
    items' `sort_text` keeps."""
    before = _text_before(doc.text, line, col)
    if before is None:
        return _everything(doc)
    current = before.split("\n")[-1]
    current = current[: len(current) - len(_WORD_BEFORE.search(current).group())]
    K = lsp.CompletionItemKind
    if _MEMORY_SUBJECT.search(current):
        host = _item("host", K.Keyword, "`memory host limit = EXPR`: what all ranks' offloads may hold")
        return _ordered([*_job_type_items(doc), _item("limit", K.Keyword, MEMORY_SETTINGS["limit"]), host])
    if (verb := _MEMORY_VERB.search(current)) is not None:
        return _ordered(_memory_settings(verb.group(1)))
    if _JOB_TYPE_SLOT.search(current):
        return _ordered(_job_type_items(doc))
    if _COMM_OFFLOAD_KEY.search(current):
        keys = [key.split()[1] for key in COPY_COMM_KEYS]
        return _ordered([_item(k, K.Property, f"`comm offload {k} = EXPR`: the host link's {k}") for k in keys])
    if _COMM_KEY.search(current):
        keys = [*COMM_KEYS, "offload"]
        return _ordered([_item(k, K.Property, f"`comm {k} ...`") for k in keys])
    if _in_rule(before):
        return _ordered([_item(k, K.Property, text) for k, text in RULE_KEYS.items()])
    return _everything(doc)


def _text_before(text: str, line: int | None, col: int | None) -> str | None:
    if line is None or col is None:
        return None
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    return "\n".join([*lines[: line - 1], lines[line - 1][: max(col - 1, 0)]])


def _in_rule(before: str) -> bool:
    """Whether the text ends inside a `rule "..." { ... }` block (after its `{`, before its `}`)."""
    blocks = list(_RULE_OPEN.finditer(before))
    return bool(blocks) and "}" not in before[blocks[-1].end() :]


def _item(label: str, kind: lsp.CompletionItemKind, detail: str) -> lsp.CompletionItem:
    return lsp.CompletionItem(label, kind=kind, detail=detail)


def _ordered(items: list[lsp.CompletionItem]) -> list[lsp.CompletionItem]:
    """The items in the order given, which an editor keeps by `sort_text` (it sorts by label otherwise)."""
    for i, item in enumerate(items):
        item.sort_text = f"{i:04d}"
    return items


def _job_type_items(doc: Document, aliases: bool = False) -> list[lsp.CompletionItem]:
    """The job types in the schedule's order: the built-in ones as the language lists them, then the file's own
    (and, with `aliases`, the short names the file declares for them, after them all)."""
    order = {name: i for i, name in enumerate(KINDS)}
    own = [name for name, sym in doc.index.jobs.items() if by_letter(name) is None and sym.name == name]
    names = sorted(own, key=lambda n: (n not in order, order.get(n, 0)))  # stable: the file's own keep their order
    K = lsp.CompletionItemKind
    items = [
        _item(name, K.Class, "job type" if doc.index.jobs[name].builtin else "job type (declared)") for name in names
    ]
    if aliases:
        short = [(name, sym) for name, sym in doc.index.jobs.items() if by_letter(name) is None and sym.name != name]
        items += [_item(name, K.Class, f"job type `{sym.name}` (its alias)") for name, sym in short]
    return items


def _memory_settings(subject: str) -> list[lsp.CompletionItem]:
    """What `memory <subject>` takes next: `host` its `limit`; a memory action its own verb and `fraction`; any other
    job type `allocates` and `frees` (what ppdsl.language.resolve accepts, E080 / E081 otherwise)."""
    K = lsp.CompletionItemKind
    if subject == "limit":
        return []  # `memory limit = EXPR`: an `=` comes next
    if subject == "host":
        return [_item("limit", K.Keyword, "`memory host limit = EXPR`: what all ranks' offloads may hold")]
    role = memory_of(subject)
    names = [*MEMORY_VERBS.get(role, ("allocates", "frees")), *(("fraction",) if role in FRACTION_ROLES else ())]
    return [_item(name, K.Keyword, MEMORY_SETTINGS[name]) for name in names]


def _everything(doc: Document) -> list[lsp.CompletionItem]:
    """Job types (in their order), keywords, parameters, functions, sizes and the file's variables."""
    K = lsp.CompletionItemKind
    # a rule's keys and the memory verbs fit only after what introduces them, where they are offered alone
    keywords = [k for k in KEYWORDS if k not in RULE_KEYS and k not in MEMORY_SETTINGS]
    items = [*_job_type_items(doc, aliases=True), *(lsp.CompletionItem(k, kind=K.Keyword) for k in keywords)]
    seen = {item.label for item in items}

    def add(label: str, kind: lsp.CompletionItemKind, detail: str) -> None:
        if label not in seen:
            seen.add(label)
            items.append(lsp.CompletionItem(label, kind=kind, detail=detail))

    for name in doc.index.params:
        add(name, K.Constant, "parameter")
    for name, sym in doc.index.functions.items():
        add(name, K.Function, "function: " + doc.index.files[sym.span.file].source.text_of(sym.node.span))
    for name in FUNCTIONS:
        add(name, K.Function, "built-in function")
    for name in SIZES:
        add(name, K.Variable, SIZE_MEANINGS.get(name, "size"))
    for sym in doc.index.locals:
        add(sym.name, K.Variable, sym.kind)
    return _ordered(items)


# ----------------------------------------------------------------------------------------------- outline


def document_symbols(doc: Document) -> list[lsp.DocumentSymbol]:
    """The outline: the top-level items of the file, the order's variables under it."""
    K = lsp.SymbolKind
    out = []
    index = doc.index
    names = {o.span: o for o in index.occurrences if o.definition and o.span.file == doc.path}
    for item in index.files[doc.path].items:
        entry = _OUTLINE.get(type(item))
        if entry is None:
            continue
        kind, title = entry
        name_span = _name_span(item, names) or item.span
        children = []
        if isinstance(item, ast.Order):
            children = [
                lsp.DocumentSymbol(
                    name=f"{s.kind} {s.name}",
                    kind=K.Variable,
                    range=doc.range(s.node.span),
                    selection_range=doc.range(s.span),
                )
                for s in index.locals
                if s.kind in ("let", "for") and s.span is not None and _within(s.span, item.span)
            ]
        out.append(
            lsp.DocumentSymbol(
                name=title(item),
                kind=kind,
                range=doc.range(item.span),
                selection_range=doc.range(name_span),
                children=children or None,
            )
        )
    return out


def _name_span(item: ast.Item, names: dict[Span, Occurrence]) -> Span | None:
    for span in names:
        if _within(span, item.span):
            return span
    return None


_OUTLINE = {
    ast.ScheduleName: (lsp.SymbolKind.Module, lambda i: f"schedule {i.name}"),
    ast.Include: (lsp.SymbolKind.File, lambda i: f"include {i.path}"),
    ast.Param: (lsp.SymbolKind.Constant, lambda i: f"param {i.name}"),
    ast.FnDef: (lsp.SymbolKind.Function, lambda i: f"fn {i.name}({', '.join(i.params)})"),
    ast.JobDecl: (lsp.SymbolKind.Class, lambda i: f"job {i.name}"),
    ast.Require: (lsp.SymbolKind.Boolean, lambda i: f"require: {i.message}"),
    ast.Placement: (lsp.SymbolKind.Property, lambda i: f"placement {i.kind}"),
    ast.Cost: (lsp.SymbolKind.Property, lambda i: f"cost {i.job}"),
    ast.Comm: (lsp.SymbolKind.Property, lambda i: f"comm {i.key}"),
    ast.Memory: (lsp.SymbolKind.Property, lambda i: f"memory {i.job} {i.verb}"),
    ast.MemoryLimit: (lsp.SymbolKind.Property, lambda i: "memory limit"),
    ast.Partition: (lsp.SymbolKind.Property, lambda i: "partition"),
    ast.Rule: (lsp.SymbolKind.Event, lambda i: f"rule {i.pattern}"),
    ast.Order: (lsp.SymbolKind.Namespace, lambda i: "order"),
    ast.Table: (lsp.SymbolKind.Namespace, lambda i: "table"),
}


# ----------------------------------------------------------------------------------------------- definitions


def definition(doc: Document, line: int, col: int) -> lsp.Location | None:
    occ = doc.index.at(doc.path, line, col)
    if occ is None:
        return None
    sym = occ.symbol
    if sym.kind == "include":
        if sym.target is None or not Path(sym.target).is_file():
            return None
        return lsp.Location(uri_of(sym.target), lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)))
    return doc.location(sym.span) if sym.span is not None else None


def references(doc: Document, line: int, col: int, declaration: bool) -> list[lsp.Location]:
    occ = doc.index.at(doc.path, line, col)
    if occ is None:
        return []
    sym = occ.symbol
    if sym.kind == "include":  # every include of the same file, in this file and what it includes
        found = [o for o in doc.index.occurrences if o.symbol.kind == "include" and o.symbol.target == sym.target]
    else:
        found = [o for o in doc.index.references(sym) if declaration or not o.definition]
    return [doc.location(o.span) for o in found]


class RenameRefused(Exception):
    """A rename that cannot be made: the message says why."""


def rename_target(doc: Document, line: int, col: int) -> Occurrence:
    occ = doc.index.at(doc.path, line, col)
    if occ is None:
        raise RenameRefused("no name to rename here")
    if occ.symbol.builtin:
        raise RenameRefused(f"`{occ.symbol.name}` is built in: it cannot be renamed")
    return occ


def rename(doc: Document, line: int, col: int, new_name: str) -> lsp.WorkspaceEdit:
    """Every use and definition of the name, renamed; for an include, every include of the file and the file."""
    occ = rename_target(doc, line, col)
    sym = occ.symbol
    if sym.kind == "include":
        return _rename_include(doc, sym, new_name)
    if not NAME.fullmatch(new_name) or new_name in KEYWORDS:
        raise RenameRefused(f"`{new_name}` is not a name the language allows (a keyword, or not a word)")
    if sym.kind == "job" and (new_name in KINDS or by_letter(new_name) is not None):
        raise RenameRefused(f"`{new_name}` is a built-in job type")
    changes: dict[str, list[lsp.TextEdit]] = {}
    for o in doc.index.references(sym):
        text = doc.index.files[o.span.file].source.text_of(o.span)
        # an alias (`RF`) or a table cell's letter is renamed only where the name itself is written
        if text != sym.name:
            continue
        changes.setdefault(uri_of(o.span.file), []).append(lsp.TextEdit(doc.range(o.span), new_name))
    return lsp.WorkspaceEdit(changes=changes)


def _rename_include(doc: Document, sym: Symbol, new_path: str) -> lsp.WorkspaceEdit:
    if not new_path or any(c in new_path for c in '"\n\\') or not new_path.endswith(".sched"):
        raise RenameRefused("an included file's new name is a `.sched` path without quotes or backslashes")
    if sym.target is None:
        raise RenameRefused(f"`{sym.name}` cannot be resolved")
    including = Path(sym.span.file).parent
    # a symlinked include is renamed as the link: its target may be anyone's (outside the project, shared by
    # other links), and moving it would leave the link dangling; only the includes through that link change
    link = _named(sym.span.file, sym.name)
    linked = link is not None and link.is_symlink()
    new_target = _named(sym.span.file, new_path) if linked else (including / new_path).resolve()
    if new_target is None:
        raise RenameRefused(f"`{new_path}` cannot be resolved")
    edits: list = []
    for o in doc.index.occurrences:
        if o.symbol.kind != "include" or o.symbol.target != sym.target:
            continue
        if linked and _named(o.span.file, o.symbol.name) != link:  # the same file under its own or another name
            continue
        # the path as each including file must write it: relative to that file when the new one is below it
        base = Path(o.span.file).parent
        try:
            written = new_target.relative_to(base.resolve()).as_posix()
        except ValueError:
            written = str(new_target)
        edits.append(
            lsp.TextDocumentEdit(
                lsp.OptionalVersionedTextDocumentIdentifier(uri=uri_of(o.span.file), version=None),
                [lsp.TextEdit(doc.range(o.span), written)],
            )
        )
    if linked:
        edits.append(lsp.RenameFile(old_uri=link.as_uri(), new_uri=new_target.as_uri()))
    elif Path(sym.target).exists():
        edits.append(lsp.RenameFile(old_uri=uri_of(sym.target), new_uri=new_target.as_uri()))
    return lsp.WorkspaceEdit(document_changes=edits)


def _named(including: str, path: str) -> Path | None:
    """The file an include names, its directories resolved but not its last part: the link itself when that
    part is a symlink (`include_target` resolves it to the link's target)."""
    try:
        named = Path(including).parent / path
        return named.parent.resolve() / named.name
    except (OSError, ValueError, RuntimeError):
        return None
