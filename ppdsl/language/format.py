"""The canonical layout of a `.sched` file (`ppdsl fmt`): `format_text(text) -> text`.

A token-stream formatter. The file is lexed by the parser itself (Lark's contextual lexer, fed by the LALR parser,
so every token has the type the grammar gives it there: a unary `-` is `MINUS`, a binary one `ADD_OP`); the parse
tree says where each top-level item, each statement of a block, each rule setting and each table row starts. The
text between two tokens holds only whitespace and comments (the grammar ignores nothing else), so every comment is
found there and written back between the same two tokens: nothing but whitespace changes, which the formatter
proves before it answers (the tokens and comments of its output are those of its input).

The layout, as gofmt's: what the author chose between statements stays, the rest is fixed.
- Every top-level item starts a line at column 1; blank lines between items and statements are kept, at most one.
- A `{ ... }` written on one line stays on one line (`repeat n { backward forward }`); one with a line break
  inside is opened at the end of its line, holds one statement per line where the author broke lines (each table
  row on its own line), indented by four spaces a level, and closes on a line of its own (`} else {`).
- Within a statement, tokens are spaced by context (`f(a, b)`, `x * -y`, `a .. b`, `F0.c0`, `rank 0:`) and line
  breaks go, except after a comment and between the cells of a table row (long rows wrap); a continued line is
  indented one level more.
- Consecutive declarations of one kind (`param`, `cost`, `comm`, `memory`, `job`) align their `=` (`memory`: its
  verb and value, `job`: its `:`); comments at the end of consecutive lines align.
- Comments keep their line: on a line of their own (indented with the code they sit in) or after the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.language import grammar_tables
from ppdsl.language.parser import parse, paused_gc

INDENT = 4
# What lies between two tokens: whitespace and comments only; a comment runs to the end of its line.
_GAP = re.compile(r"#[^\n]*|\n")
# Declarations whose names are aligned in a run: the kind -> how many tokens after the keyword are padded columns.
_ALIGNED = {"param": 1, "cost": 1, "comm": 1, "memory": 2, "job": 1}


def format_text(text: str, file: str = "<string>") -> str:
    """`text` in the canonical layout. Raises the parser's DiagnosticError (E001, E065, ...) when `text` does not
    parse: nothing is formatted that the language would refuse."""
    text = text.replace("\r\n", "\n")
    with paused_gc():
        try:
            tokens, tree = _lex(text)
        except UnexpectedInput:
            parse(text, file)  # the parser's own diagnostics, all of them
            raise  # pragma: no cover  (the parser refuses what Lark refuses)
        formatted = _Formatter(text, tokens, tree).run()
        if not _same_meaning(text, formatted, file):
            # What Lark accepts and the language refuses (too deep, a number too long): the parser says why.
            parse(text, file)
            # Else a bug here, never in the input: refuse rather than write a changed meaning.
            raise DiagnosticError([_changed(file)])
    return formatted


def _changed(file: str) -> Diagnostic:
    return Diagnostic(
        "E097",
        "formatting would change this file's tokens or comments: it is left as it was",
        Span(file, 1, 1, 1, 2),
        help="this is a bug in `ppdsl fmt`: please report it with the file",
    )


def _lex(text: str) -> tuple[list[Token], Tree]:
    """Every token as the parser reads it, and the parse tree (positions included)."""
    interactive = grammar_tables.parser().parse_interactive(text)
    tokens = list(interactive.iter_parse())
    tree = interactive.feed_eof(tokens[-1] if tokens else None)
    return tokens, tree


# The words of the language as a maximal-munch scanner sees them: what the formatter must keep, in order.
_WORDS = re.compile(r'"""(?:.|\n)*?"""|"[^"\n]*"|#[^\n]*|[A-Za-z_]\w*|[0-9]+(?:\.[0-9]+)?|\.\.|//|[=!<>]=|\S')


def _signature(text: str) -> list[str]:
    """The tokens and comments of a text, in order (comments without trailing spaces)."""
    return [w.rstrip() if w[0] == "#" else w for w in _WORDS.findall(text)]


def _same_meaning(before: str, after: str, file: str) -> bool:
    """`after` parses and holds the words and comments of `before`, in order: only whitespace changed."""
    if _signature(before) != _signature(after):
        return False
    try:
        parse(after, file)
    except DiagnosticError:
        return False
    return True


@dataclass
class _Gap:
    """The text before a token: its comments, each with the line breaks before it, and the breaks after them."""

    comments: list[tuple[int, str]] = field(default_factory=list)
    newlines: int = 0


def _gap(text: str, start: int, end: int) -> _Gap:
    gap, newlines = _Gap(), 0
    for m in _GAP.finditer(text, start, end):
        if m.group() == "\n":
            newlines += 1
        else:
            gap.comments.append((newlines, m.group().rstrip()))
            newlines = 0
    gap.newlines = newlines
    return gap


@dataclass
class _Line:
    indent: int
    code: str = ""
    comment: str | None = None  # a comment after the code on this line


class _Formatter:
    def __init__(self, text: str, tokens: list[Token], tree: Tree):
        self.text, self.tokens = text, tokens
        index = {tok.start_pos: i for i, tok in enumerate(tokens)}
        self.items: dict[int, str] = {}  # token index -> the kind of the top-level item it starts
        self.item_end: dict[int, int] = {}  # token index of an item's start -> one past its last token
        self.entries: set[int] = set()  # token indices that start a statement, a rule setting or a table row
        self.rows: set[int] = set()  # token indices inside a table row, after its first (line breaks are kept)
        self.row_starts: set[int] = set()  # each on a line of its own in a table laid out over several lines
        for sub in tree.iter_subtrees():
            if sub.data == "start":
                for child in sub.children:
                    if isinstance(child, Tree) and not child.meta.empty:
                        first = index[child.meta.start_pos]
                        self.items[first] = str(child.data)
                        self.item_end[first] = _end_index(tokens, first, child.meta.end_pos)
            elif sub.data in ("block", "rule", "table"):
                for child in sub.children:
                    if isinstance(child, Tree) and not child.meta.empty and child.data not in ("cell",):
                        if sub.data == "rule" and child.data not in ("rule_stream", "rule_priority", "rule_attr"):
                            continue
                        if sub.data == "table" and child.data != "table_row":
                            continue
                        first = index[child.meta.start_pos]
                        self.entries.add(first)
                        if child.data == "table_row":
                            self.row_starts.add(first)
                            self.rows.update(range(first + 1, _end_index(tokens, first, child.meta.end_pos)))
        self.gaps = [_gap(text, tokens[i - 1].end_pos if i else 0, tok.start_pos) for i, tok in enumerate(tokens)]
        self.final_gap = _gap(text, tokens[-1].end_pos if tokens else 0, len(text))
        self.multiline: set[int] = set()  # indices of the `{` and `}` of constructs laid out over several lines
        self._match_braces()
        self.pads = self._alignment()

    def _match_braces(self) -> None:
        stack = []
        for i, tok in enumerate(self.tokens):
            if tok.type == "LBRACE":
                stack.append(i)
            elif tok.type == "RBRACE":
                opened = stack.pop()
                inside = self.text[self.tokens[opened].start_pos : tok.end_pos]
                # several lines: a line break between two tokens inside (`{\n}` is empty: `{}`), or a comment
                if ("\n" in inside and i > opened + 1) or any(g.comments for g in self.gaps[opened + 1 : i + 1]):
                    self.multiline.update((opened, i))

    def _alignment(self) -> dict[int, int]:
        """Extra spaces before some tokens: the columns of each run of declarations of one kind, one a line."""
        pads: dict[int, int] = {}
        runs: list[list[int]] = []
        previous_kind = None
        for first in sorted(self.items):
            kind, end = self.items[first], self.item_end[first]
            single = not any(self.gaps[i].comments for i in range(first + 1, end))
            gap = self.gaps[first]
            # a run goes on past the comment after the previous declaration, not past a blank line or a comment line
            joined = gap.newlines < 2 and all(newlines == 0 for newlines, _ in gap.comments)
            if kind in _ALIGNED and single:
                if kind == previous_kind and joined and runs:
                    runs[-1].append(first)
                else:
                    runs.append([first])
                previous_kind = kind
            else:
                previous_kind = None
        for run in runs:
            kind = self.items[run[0]]
            for column in range(_ALIGNED[kind]):
                cells = [self._column(first, kind, column) for first in run]
                widest = max(width for _, width in cells)
                for before, width in cells:
                    pads[before] = widest - width
        return pads

    def _column(self, first: int, kind: str, column: int) -> tuple[int, int]:
        """(index of the token after the column, the column's width) of one declaration."""
        tokens = self.tokens
        if kind == "job":
            name = len(tokens[first + 1])
            if tokens[first + 2].type == "LPAR":  # `job name (alias) : ...`
                return first + 5, name + len(tokens[first + 3]) + 3
            return first + 2, name
        return first + 2 + column, len(tokens[first + 1 + column])

    # ---------------------------------------------------------------- writing
    def run(self) -> str:
        self.lines: list[_Line | None] = []  # None: a blank line
        self.line: _Line | None = None
        self.depth = 0
        self.must_break = False
        self.open_braces: list[int] = []
        for i, tok in enumerate(self.tokens):
            self._comments(self.gaps[i])
            self._token(i, tok)
        self._comments(self.final_gap)
        self._end_line()
        return _render(self.lines)

    def _end_line(self) -> None:
        if self.line is not None:
            self.lines.append(self.line)
            self.line = None

    def _start_line(self, indent: int, blank: bool) -> None:
        self._end_line()
        if blank:
            self.lines.append(None)
        self.line = _Line(indent)
        self.must_break = False

    def _comments(self, gap: _Gap) -> None:
        for newlines, comment in gap.comments:
            if newlines == 0 and self.line is not None:  # after code on its line
                self.line.comment = comment
                self._end_line()
            else:
                self._start_line(self.depth * INDENT, newlines >= 2)
                self.line.code = comment
                self._end_line()
            self.must_break = True

    def _token(self, i: int, tok: Token) -> None:
        gap = self.gaps[i]
        blank = gap.newlines >= 2
        in_multiline = bool(self.open_braces) and self.open_braces[-1] in self.multiline
        if i in self.items and tok.type != "SEMICOLON":
            self._start_line(0, blank)
        elif tok.type == "RBRACE":
            self.depth -= 1
            if self.open_braces.pop() in self.multiline:
                self._start_line(self.depth * INDENT, False)
            else:
                self.line.code += " " * self._space(i)
        elif i in self.entries and in_multiline and tok.type != "SEMICOLON":
            after_brace = i - 1 in self.multiline  # the first statement of a block, or the one after a block
            if after_brace or gap.newlines > 0 or self.must_break or i in self.row_starts:
                self._start_line(self.depth * INDENT, blank)
            else:
                self.line.code += " " * self._space(i)
        elif self.must_break or (i in self.rows and gap.newlines > 0):
            self._start_line(self.depth * INDENT + INDENT, False)  # a statement continued on the next line
        else:
            self.line.code += " " * (self._space(i) + self.pads.get(i, 0))
        self.line.code += str(tok)
        if tok.type == "LBRACE":
            self.depth += 1
            self.open_braces.append(i)

    def _space(self, i: int) -> int:
        """Spaces between token i and the one before it on a line."""
        tok, prev = self.tokens[i], self.tokens[i - 1]
        if tok.type in ("RPAR", "RSQB", "COMMA", "SEMICOLON") or prev.type in ("LPAR", "LSQB", "MINUS", "DOT"):
            return 0
        if tok.type == "DOT":
            return 0
        if tok.type == "LPAR":  # a call, a job's arguments, a function's parameters; not `job name (alias)`
            return 0 if prev.type == "NAME" and not (i >= 2 and self.tokens[i - 2].type == "JOB") else 1
        if tok.type == "COLON" and i in self.rows:  # `rank 0:`
            return 0
        if tok.type == "RBRACE" and prev.type == "LBRACE":
            return 0
        return 1


def _end_index(tokens: list[Token], first: int, end_pos: int) -> int:
    i = first
    while i < len(tokens) and tokens[i].start_pos < end_pos:
        i += 1
    return i


def _render(lines: list[_Line | None]) -> str:
    """The text: blank lines only between lines (never after a `{` or before a `}`), one at a time, and the
    comments after code on consecutive lines aligned."""
    kept: list[_Line | None] = []
    for line in lines:
        if line is None:
            if kept and kept[-1] is not None and not kept[-1].code.endswith("{"):
                kept.append(None)
            continue
        if line.code.startswith("}") and kept and kept[-1] is None:
            kept.pop()
        kept.append(line)
    while kept and kept[-1] is None:
        kept.pop()
    out: list[str] = []
    run: list[_Line] = []

    def flush() -> None:
        if run:
            column = max(len(" " * r.indent + r.code) for r in run) + 2
            out.extend((" " * r.indent + r.code).ljust(column) + r.comment for r in run)
            run.clear()

    for line in kept:
        if line is not None and line.comment is not None and line.code:
            run.append(line)
            continue
        flush()
        if line is None:
            out.append("")
        else:
            out.append((" " * line.indent + line.code).rstrip() if line.code else "")
    flush()
    return "\n".join(out) + "\n" if out else ""
