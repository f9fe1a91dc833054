"""User text in diagnostics: lines numbered as the parser numbers them, control characters and direction
overrides escaped, the caret under the escaped text, long lines quoted as a window around the span."""

from __future__ import annotations

import pytest

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, SourceCache, Span, render
from ppdsl.common.text import escaped, source_lines
from ppdsl.language.resolve import resolve_text

# every character str.splitlines() takes for a line break but Lark does not
SEPARATORS = ["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\r"]


@pytest.mark.parametrize("sep", SEPARATORS)
def test_lines_split_at_newline_only(sep):
    assert source_lines(f"a{sep}b\nc") == [f"a{sep}b", "c"]


@pytest.mark.parametrize("sep", SEPARATORS)
def test_a_separator_in_a_comment_does_not_shift_the_quoted_line(sep):
    """`bogus` is on line 4 for the parser; splitlines() used to quote line 5 (`optimizer`) under `4 |`."""
    text = f"order {{\n  forward * microbatches # a{sep}b\n  backward * microbatches\n  bogus\n  optimizer\n}}\n"
    with pytest.raises(DiagnosticError) as e:
        resolve_text(text, "sep.sched")
    [d] = e.value.diagnostics
    sources = SourceCache()
    sources.add("sep.sched", text)
    shown = render(d, sources)
    assert d.span.line == 4
    assert "4 |   bogus\n" in shown and "^^^^^" in shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("tab\there", "tab\there"),
        ("a\u202eb", "a\\u202eb"),  # right-to-left override
        ("\u2066x\u2069", "\\u2066x\\u2069"),  # isolates
        ("line\u2028sep", "line\\u2028sep"),
        ("bell\x07\x1b[31m", "bell\\x07\\x1b[31m"),  # a terminal escape cannot colour or move anything
        ("nl\nhere\r", "nl\\nhere\\r"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("\U000e0041tag", "\\U000e0041tag"),
    ],
)
def test_escaped(text, shown):
    assert escaped(text) == shown


def test_a_diagnostic_escapes_user_text_everywhere_and_keeps_the_caret_under_it():
    line = 'job e\u202evil : forward ops "x"'
    diag = Diagnostic(
        "E002",
        "unknown name `e\u202evil`",
        Span("f\u2028.sched", 1, 5, 1, 10),
        label="not \u202ehere",
        help="did you mean `\u2066x`?",
        notes=["first\u202e\nsecond\x1b"],
    )
    sources = SourceCache()
    sources.add("f\u2028.sched", line)
    shown = render(diag, sources)
    assert not any(ch in shown for ch in "\u202e\u2066\u2028\x1b")
    lines = shown.split("\n")
    assert lines[0] == "error[E002]: unknown name `e\\u202evil`"
    assert lines[1] == " --> f\\u2028.sched:1:5"
    quoted = lines[3][len("1 | ") :]
    caret = lines[4][len("  | ") :]
    assert quoted == 'job e\\u202evil : forward ops "x"'
    assert quoted[caret.index("^") : caret.rindex("^") + 1] == "e\\u202evil"  # under the whole escaped name
    assert "= note: first\\u202e" in shown and "   second\\x1b" in shown
    assert "= help: did you mean `\\u2066x`?" in shown


def test_a_long_line_is_quoted_as_a_window_around_the_span():
    line = "0F0," * 2000 + "zz,0B0"
    col = line.index("zz") + 1
    sources = SourceCache()
    sources.add("long.csv", line)
    shown = render(Diagnostic("E020", "bad", Span("long.csv", 1, col, 1, col + 2), label="here"), sources)
    quoted, caret = shown.split("\n")[3], shown.split("\n")[4]
    assert len(quoted) < 200 and quoted.startswith("1 | ...")
    assert quoted[caret.index("^") : caret.rindex("^") + 1] == "zz"
