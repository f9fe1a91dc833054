"""ppdsl's spans and diagnostics as LSP values.

A `Span` is 1-based, in characters; an LSP position is 0-based, in the code units the client and server agreed on
(UTF-16 unless the client offers another), which a `Units` counts. A diagnostic keeps its code, its
span and its message; its label and help follow the message on lines of their own (an editor shows the message
alone in its list of problems), the whole diagnostic is in `data` (as `ppdsl check --format json` gives it), and a
deadlock names every rank's waiting statement as related information.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from lsprotocol import types as lsp

from ppdsl.analysis.check import CheckResult, deadlock_cycle
from ppdsl.common.diagnostics import Diagnostic, Span

Lines = Callable[[str], list[str] | None]  # a file's lines (an open buffer, else the file), None if unreadable
DEADLOCK_CODES = ("S103", "S105", "E074")  # E074: a deadlock through a collective


@functools.lru_cache(maxsize=4096)
def uri_of(path: str) -> str:
    """The file URI of a path (resolved once: a rename's thousand edits in one file name it a thousand times)."""
    return Path(path).resolve().as_uri()


def same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError, RuntimeError):
        return a == b


_WIDE = {"utf-16": re.compile("[\U00010000-\U0010ffff]"), "utf-8": re.compile("[^\x00-\x7f]")}
_CACHED_LINES = 256  # the wide-character tables of this many non-ASCII lines, most recently used


class Units:
    """The client's code units (`utf-16`, `utf-8` or `utf-32`): how many a text takes, and the conversions of a
    column between code points and code units. Each conversion is a binary search in a table of the line's wide
    characters (those of more than one unit), made in one pass when a line is first converted and kept while
    the line is among the last few converted; an ASCII line needs no table. (pygls' codec counts a prefix char
    by char, and converting a position counted every prefix: a 32k-character line took seconds a request.)"""

    def __init__(self, encoding: str = "utf-16"):
        self.encoding = encoding if encoding in ("utf-8", "utf-16", "utf-32") else "utf-16"
        self._tables: OrderedDict[str, tuple[list[int], list[int]]] = OrderedDict()

    def __call__(self, text: str) -> int:
        if self.encoding == "utf-32" or text.isascii():
            return len(text)
        if self.encoding == "utf-8":
            return len(text.encode("utf-8", "surrogatepass"))
        return len(text) + len(_WIDE["utf-16"].findall(text))

    def _table(self, line: str) -> tuple[list[int], list[int]]:
        """The code-point indices of the line's wide characters and, for each, the extra units before and with
        it: `extra[k]` is what the first k wide characters add to a column (extra[0] = 0)."""
        found = self._tables.get(line)
        if found is not None:
            self._tables.move_to_end(line)
            return found
        where, extra = [], [0]
        for m in _WIDE[self.encoding].finditer(line):
            width = self(m.group()) - 1
            if width:
                where.append(m.start())
                extra.append(extra[-1] + width)
        self._tables[line] = found = (where, extra)
        if len(self._tables) > _CACHED_LINES:
            self._tables.popitem(last=False)
        return found

    def column(self, line: str, chars: int) -> int:
        """The code units of the line's first `chars` code points."""
        if self.encoding == "utf-32" or line.isascii():
            return chars
        where, extra = self._table(line)
        return chars + extra[bisect.bisect_left(where, chars)]

    def chars(self, line: str, units: int) -> int:
        """How many of the line's code points end at or before the column `units` (a column inside a wide
        character stays before it)."""
        if self.encoding == "utf-32" or line.isascii():
            return min(max(units, 0), len(line))
        lo, hi = 0, len(line)
        while lo < hi:  # the largest count whose units are within `units`
            mid = (lo + hi + 1) // 2
            if self.column(line, mid) <= units:
                lo = mid
            else:
                hi = mid - 1
        return lo


def position(lines: list[str] | None, line: int, col: int, units: Units) -> lsp.Position:
    """The LSP position of a 1-based (line, character column)."""
    text = lines[line - 1] if lines is not None and 1 <= line <= len(lines) else ""
    chars = max(col - 1, 0)
    return lsp.Position(max(line - 1, 0), units.column(text, min(chars, len(text))) if text else chars)


def to_range(span: Span, lines: list[str] | None, units: Units) -> lsp.Range:
    return lsp.Range(position(lines, span.line, span.col, units), position(lines, span.end_line, span.end_col, units))


def from_position(lines: list[str], pos: lsp.Position, units: Units) -> tuple[int, int]:
    """The 1-based (line, character column) of an LSP position."""
    text = lines[pos.line] if 0 <= pos.line < len(lines) else ""
    return pos.line + 1, units.chars(text, pos.character) + 1


def message_of(diag: Diagnostic) -> str:
    """The message, then the label and the help: what `ppdsl check` prints beside the source line."""
    parts = [diag.message]
    if diag.label:
        parts.append(diag.label)
    parts += [f"note: {note}" for note in diag.notes if "\n" not in note]  # a grid is shown on hover
    if diag.help:
        parts.append(f"help: {diag.help}")
    return "\n".join(parts)


def to_diagnostic(
    diag: Diagnostic,
    path: str,
    lines: Lines,
    units: Units,
    result: CheckResult | None,
    elsewhere: Callable[[str | None], lsp.Range],
) -> lsp.Diagnostic:
    """One ppdsl diagnostic on the document `path`. One without a span (a command-line value) or in another
    file (an include) goes at `elsewhere(its file or None)`, with its place in that file as related information."""
    related: list[lsp.DiagnosticRelatedInformation] = []
    span = diag.span
    if span is not None and same_file(span.file, path):
        where = to_range(span, lines(path), units)
    else:
        where = elsewhere(span.file if span is not None else None)
        if span is not None:
            there = to_range(span, lines(span.file), units)
            related.append(lsp.DiagnosticRelatedInformation(lsp.Location(uri_of(span.file), there), diag.message))
    if diag.code in DEADLOCK_CODES and result is not None:
        related += deadlock_related(diag, result, lines, units)
    return lsp.Diagnostic(
        range=where,
        message=message_of(diag),
        severity=lsp.DiagnosticSeverity.Error,
        code=diag.code,
        source="ppdsl",
        related_information=related or None,
        data=diag.to_dict(),
    )


def deadlock_related(
    diag: Diagnostic, result: CheckResult, lines: Lines, units: Units
) -> list[lsp.DiagnosticRelatedInformation]:
    """Each rank of the cycle at the statement it waits in, with what it waits for (the diagnostic's notes say
    the same, one per rank, in the cycle's order)."""
    exp, ex = result.expansion, result.execution
    if exp is None or ex is None or ex.completed:
        return []
    out = []
    for wait, note in zip(deadlock_cycle(ex), diag.notes, strict=False):
        site = exp.defn.sites[exp.sites[wait.rank][wait.step]].span
        where = lsp.Location(uri_of(site.file), to_range(site, lines(site.file), units))
        out.append(lsp.DiagnosticRelatedInformation(where, note))
    return out
