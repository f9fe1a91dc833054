"""Diagnostics: every problem ppdsl reports, as a value with a source span.

Each diagnostic exists twice (as sqlglot does with its errors): rendered for a human, rustc style, with the
source line and a caret under the span, and as a plain dict for tools and tests (`--format json`). Every code
is in the registry (`ppdsl.common.codes`), which also gives the exit status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ppdsl.common.regular_files import NotRegular, TooLarge, read_regular
from ppdsl.common.text import escaped, source_lines
from ppdsl.common.text import number_text as number_text  # moved to text.py; still importable from here

# A diagnostic quotes a line of a file the reader (ppdsl.common.files, which imports this module) has already
# read under its cap; the same bound here keeps a file swapped in since from being read whole or waited on.
QUOTED_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Span:
    """A region of one source file: 1-based line and column, end exclusive on the same or a later line."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    @classmethod
    def from_meta(cls, file: str, meta: object) -> Span:
        """Span of a lark tree node or token (anything with line/column/end_line/end_column)."""
        try:  # the common case, a node or token with its position (a parse makes one span per node)
            if meta.line and meta.column and meta.end_line and meta.end_column:
                return cls(file, meta.line, meta.column, meta.end_line, meta.end_column)
        except AttributeError:
            pass
        line = getattr(meta, "line", 1) or 1
        col = getattr(meta, "column", 1) or 1
        end_line = getattr(meta, "end_line", line) or line
        end_col = getattr(meta, "end_column", col + 1) or col + 1
        return cls(file, line, col, end_line, end_col)


@dataclass
class Diagnostic:
    """One finding. `label` is printed under the caret, `notes` as `= note:` lines, `help` as `= help:`."""

    code: str
    message: str
    span: Span | None = None
    label: str = ""
    help: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        span = self.span
        return {
            "severity": "error",  # every finding is an error (the JSON field keeps room for warnings)
            "code": self.code,
            "message": self.message,
            "file": span.file if span else None,
            "line": span.line if span else None,
            "col": span.col if span else None,
            "end_line": span.end_line if span else None,
            "end_col": span.end_col if span else None,
            "label": self.label,
            "help": self.help,
            "notes": list(self.notes),
        }


class DiagnosticError(Exception):
    """Raised by a front-end stage that cannot go on; carries every diagnostic collected so far."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


class CallerError(DiagnosticError):
    """A caller's mistake in a Python API call (a mistyped keyword): `str()` is the rendered diagnostics with their
    help (`did you mean ...`), which is all a traceback shows."""

    def __str__(self) -> str:
        return render_all(self.diagnostics, SourceCache())


class SourceCache:
    """Source texts by file name, so a diagnostic can quote the line it points at."""

    def __init__(self) -> None:
        self._texts: dict[str, list[str]] = {}

    def add(self, file: str, text: str) -> None:
        self._texts[file] = source_lines(text)

    def line(self, file: str, line: int) -> str | None:
        lines = self._texts.get(file)
        if lines is None:
            text = _quoted_file_text(file)
            if text is None:
                return None
            lines = self._texts[file] = source_lines(text)
        if 1 <= line <= len(lines):
            return lines[line - 1]
        return None


MAX_QUOTED = 160  # characters of a source line quoted under a diagnostic
QUOTED_BEFORE = 40  # of them before the span, when the line is longer


def render(diag: Diagnostic, sources: SourceCache, color: bool = False) -> str:
    """rustc-style text for one diagnostic. User text in it (names, paths, the quoted line) has its control
    characters, line separators and direction overrides escaped (`\\u202e`), so it shows as written and
    cannot reorder or break the lines around it; the caret is placed under the escaped text."""

    def paint(text: str, style: str) -> str:
        if not color:
            return text
        codes = {"red": "31;1", "blue": "34;1", "bold": "1"}
        return f"\x1b[{codes[style]}m{text}\x1b[0m"

    head_style = "red"
    out = [paint(f"error[{diag.code}]", head_style) + paint(f": {escaped(diag.message)}", "bold")]
    span = diag.span
    gutter = len(str(span.line)) if span else 1
    pad = " " * gutter
    if span is not None:
        out.append(f"{pad}{paint('-->', 'blue')} {escaped(span.file)}:{span.line}:{span.col}")
        raw = sources.line(span.file, span.line)
        if raw is not None:
            text = escaped(raw)
            start = len(escaped(raw[: max(span.col - 1, 0)]))
            end = len(escaped(raw[: span.end_col - 1])) if span.end_line == span.line else len(text)
            if len(text) > MAX_QUOTED:  # a window around the span of a long line (a 5000-digit number)
                lo = max(0, min(start - QUOTED_BEFORE, len(text) - MAX_QUOTED))
                hi = lo + MAX_QUOTED
                before, after = ("..." if lo else ""), ("..." if hi < len(text) else "")
                text = before + text[lo:hi] + after
                start, end = start - lo + len(before), min(end, hi) - lo + len(before)
            out.append(f"{pad} {paint('|', 'blue')}")
            out.append(f"{paint(str(span.line).rjust(gutter), 'blue')} {paint('|', 'blue')} {text}")
            width = max(end - start, 1)
            caret = " " * start + "^" * width
            label = f" {escaped(diag.label)}" if diag.label else ""
            out.append(f"{pad} {paint('|', 'blue')} {paint(caret + label, head_style)}")
            out.append(f"{pad} {paint('|', 'blue')}")
    elif diag.label:
        out.append(f"{pad} = {escaped(diag.label)}")
    for note in diag.notes:
        lines = [escaped(line) for line in note.split("\n")]  # a note may have lines of its own (a grid)
        out.append(f"{pad} {paint('=', 'blue')} note: {lines[0]}")
        out.extend(f"{pad}   {line}" for line in lines[1:])
    if diag.help:
        out.append(f"{pad} {paint('=', 'blue')} help: {escaped(diag.help)}")
    return "\n".join(out)


def render_all(diagnostics: list[Diagnostic], sources: SourceCache, color: bool = False, limit: int = 20) -> str:
    """Render up to `limit` diagnostics, then say how many more there are."""
    shown = [render(d, sources, color) for d in diagnostics[:limit]]
    if len(diagnostics) > limit:
        shown.append(f"... and {len(diagnostics) - limit} more")
    return "\n\n".join(shown)


def to_json(diagnostics: list[Diagnostic]) -> str:
    return json.dumps([d.to_dict() for d in diagnostics], indent=2)


def _quoted_file_text(file: str) -> str | None:
    """The text of `file` to quote from: a regular file of at most QUOTED_FILE_BYTES, opened without blocking
    (a FIFO is never waited on); None for anything else."""
    try:
        data, _ = read_regular(file, QUOTED_FILE_BYTES)
    except (NotRegular, TooLarge, OSError, ValueError):
        return None
    return data.decode("utf-8", errors="replace")
