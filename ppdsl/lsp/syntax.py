"""A file's syntax tree for the editor: parsed item by item, each item kept while its text and line stay the same.

The file is cut at the lines where a top-level item starts (the parser's own recovery points,
`ppdsl.language.parser.ITEM_START`), and each piece is parsed at its own place in the file (newlines before it
keep its lines; it starts a line, so its columns are kept too), so every span is where it is in the whole text.

- `ItemCache.parse` is `ppdsl.language.parser.parse` for a file edited again and again: a keystroke changes one
  item, and the others are not parsed again (a 37 KB table file parses in 50 ms, an item in well under 1); the
  items below a new or deleted line only have their spans moved. When a
  piece does not parse, the whole file is parsed as `parse` parses it, so the errors are exactly `ppdsl
  check`'s. The resolver takes it in place of `parse` (`resolve_text(..., parse_file=)`).
- `ItemCache.items` is for the editor's features: every item that parses, even when others do not, so a syntax
  error in one part leaves hover, definitions and the outline working on the rest.
"""

from __future__ import annotations

import dataclasses
import re

from ppdsl.common.diagnostics import DiagnosticError, Span
from ppdsl.language import ast
from ppdsl.language.parser import ITEM_START, parse

Piece = tuple[int, str]  # (line the piece starts on, its text)


# what an item's keyword at the start of a line may be inside, and then starts nothing (strings cannot span lines)
_LONG_TOKENS = re.compile(r'"""(?:.|\n)*?"""|#[^\n]*|"[^"\n]*"')


def pieces(text: str) -> list[Piece]:
    """The text cut where top-level items start (the first piece from the start of the file), never inside a
    docstring."""
    inside = [(m.start(), m.end()) for m in _LONG_TOKENS.finditer(text) if m.group().startswith('"""')]
    starts = [m.start() for m in ITEM_START.finditer(text) if not any(a < m.start() < b for a, b in inside)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    out, line = [], 1
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        piece = text[begin:end]
        out.append((line, piece))
        line += piece.count("\n")
    return out


def shifted(value, lines: int):
    """An AST value with every span `lines` lines further down (a piece that moved as lines were added above it);
    values that hold no span are shared. Recursive: expressions are at most MAX_EXPR_DEPTH deep."""
    kind = type(value)
    if kind is Span:
        return Span(value.file, value.line + lines, value.col, value.end_line + lines, value.end_col)
    if kind is tuple or kind is list:
        return kind(shifted(v, lines) for v in value)
    fields = _FIELDS.get(kind)
    if fields is None:
        return value  # a str, a number, a bool, None
    return kind(*(shifted(getattr(value, name), lines) for name in fields))


# every AST node type and its fields, in order (each is built positionally)
_FIELDS = {
    cls: tuple(f.name for f in dataclasses.fields(cls))
    for cls in vars(ast).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == ast.__name__
}


class ItemCache:
    """Parsed pieces by file, from the last parse of each file (older ones are dropped). A piece is known by its
    text: one that only moved (lines added or removed above it) has its spans moved, not parsed again."""

    def __init__(self) -> None:
        # file -> piece text -> (line it was parsed at, its items or None when it does not parse alone)
        self._files: dict[str, dict[str, tuple[int, list[ast.Item] | None]]] = {}

    def _parse_pieces(self, text: str, file: str) -> list[list[ast.Item] | None]:
        """Each piece's items, None for a piece that does not parse on its own."""
        known = self._files.get(file, {})
        now: dict[str, tuple[int, list[ast.Item] | None]] = {}
        out = []
        for line, body in pieces(text):
            found = now.get(body) or known.get(body)
            if found is None:
                try:
                    items = parse("\n" * (line - 1) + body, file).items
                except DiagnosticError:
                    items = None
                found = (line, items)
            elif found[0] != line and found[1] is not None:
                found = (line, shifted(found[1], line - found[0]))
            now.setdefault(body, found)
            out.append(found[1])
        self._files[file] = now
        return out

    def parse(self, text: str, file: str) -> ast.SchedFile:
        """What `parse(text, file)` gives (and raises)."""
        parsed = self._parse_pieces(text, file)
        if any(items is None for items in parsed):
            return parse(text, file)  # raises the file's syntax errors, each once, as `ppdsl check` reports them
        return ast.SchedFile(path=file, text=text, items=[item for items in parsed for item in items])

    def items(self, text: str, file: str) -> tuple[list[ast.Item], bool]:
        """(the items that parse, whether the whole file does)."""
        parsed = self._parse_pieces(text, file)
        if all(items is not None for items in parsed):
            return [item for items in parsed for item in items], True
        try:  # a piece may be broken only by the cut (a docstring with an item's keyword starting a line)
            return parse(text, file).items, True
        except DiagnosticError:
            return [item for items in parsed if items is not None for item in items], False
