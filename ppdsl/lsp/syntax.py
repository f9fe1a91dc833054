"""A file's syntax tree for the editor: whole when it parses, else every top-level item that parses on its own.

`ppdsl check` stops at a syntax error; an editor must not: hover, go to definition and the outline keep working on
the items around a broken one. The file is cut at the lines where a top-level item starts (the parser's own
recovery points, `ppdsl.language.parser.ITEM_START`), and each piece is parsed at its own place in the file, so
every span is where it is in the whole text.
"""

from __future__ import annotations

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language import ast
from ppdsl.language.parser import ITEM_START, parse


def items_of(text: str, file: str) -> tuple[list[ast.Item], bool]:
    """(the items that parse, whether the whole file did)."""
    try:
        return parse(text, file).items, True
    except DiagnosticError:
        pass
    starts = [m.start() for m in ITEM_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    items: list[ast.Item] = []
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        # newlines before the piece keep its lines where they are; it starts a line, so columns are kept too
        piece = "\n" * text.count("\n", 0, begin) + text[begin:end]
        try:
            items.extend(parse(piece, file).items)
        except DiagnosticError:
            continue  # this item is broken: the diagnostics of the whole file say why
    return items, False
