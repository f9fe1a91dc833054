"""Cells of the CSV files ppdsl writes (`expand --format csv` / `torch-csv`, `compare` and `sweep --format csv`),
safe to open in a spreadsheet.

A spreadsheet reads a cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage return before one) as a
formula, and a formula can run commands or send the sheet's data elsewhere ("CSV injection"). A schedule's name,
a file's path or a reason quoted from a diagnostic can start with any of them, so such a text cell gets a leading
`'`, which spreadsheets show as nothing and read as "this is text" (OWASP's advice). A number stays a number:
`-3` and `-1.5e-3` are not formulas and are written as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)", re.IGNORECASE)


def cell(value: object) -> object:
    """`value` as a CSV cell that no spreadsheet runs: a text starting like a formula gets a leading `'`; a number,
    or a text that is exactly a number, is left as it is."""
    if not isinstance(value, str) or not value.startswith(_FORMULA_START) or _NUMBER.fullmatch(value):
        return value
    return "'" + value


def row(values: Iterable[object]) -> list[object]:
    """Every cell of a row through `cell`."""
    return [cell(v) for v in values]
