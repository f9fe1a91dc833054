"""Python source text as ppdsl's compilers write it: user names (`mangle`), literals and comments that are safe in
any file (`py_str`, `py_text`, `py_path`), and the lines of a `.sched` source they quote (`file_lines`, `site_text`).
"""

from __future__ import annotations

import functools

from ppdsl.common.diagnostics import Span
from ppdsl.common.text import source_lines

LINE_LENGTH = 120  # of readable code, as the project's ruff settings


def mangle(name: str) -> str:
    return f"v_{name}"


def py_text(text: str) -> str:
    """`text` safe in a Python comment: each character Python or a reader could take for something else escaped
    as in a string literal (`\\n`, `\\x00`, `\\u2028`, `\\u202e`), the rest as it is. Not printable means a line break,
    a control or format character, a lone surrogate: what could end a comment, make the file unreadable (NUL), or
    show the code differently from what it is (bidi overrides)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)


def py_path(path: str) -> str:
    """A path as the plan's comments, docstrings and messages show it: as it is when every character is printable,
    else its `repr` string literal (`'dir\\n/x.sched'`), so no character of it is ever raw in the plan."""
    return path if path.isprintable() else repr(path)


def py_str(text: str) -> str:
    """A Python string literal for `text`, double-quoted unless that would need escapes (as ruff format does)."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:  # then `'` is not in it either: repr escaped no quote
        literal = '"' + literal[1:-1] + '"'
    return literal


@functools.lru_cache(maxsize=16)
def file_lines(file_text: str) -> tuple[str, ...]:
    """The lines of a source text (as the parser numbers them), split once per text: a diagnostic, a site and a
    plan comment are taken for each statement, and splitting the whole file for each made a 40,000-line file
    quadratic."""
    return tuple(source_lines(file_text))


def site_text(file_text: str, span: Span) -> str:
    lines = file_lines(file_text)
    if 1 <= span.line <= len(lines):
        line = lines[span.line - 1]
        end = span.end_col - 1 if span.end_line == span.line else len(line)
        return line[span.col - 1 : end].strip()
    return ""
