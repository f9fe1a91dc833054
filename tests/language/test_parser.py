"""Syntax errors: recovery inside blocks (each mistake once, later ones still found), the open brace of an
unclosed block, and an unfinished expression told apart from an unknown name."""

from __future__ import annotations

import pytest

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.parser import MAX_SYNTAX_ERRORS, parse
from ppdsl.language.resolve import resolve_text


def syntax_errors(text: str) -> list[tuple[int, int, str]]:
    with pytest.raises(DiagnosticError) as err:
        parse(text, "t.sched")
    assert all(d.code == "E001" for d in err.value.diagnostics)
    return [(d.span.line, d.span.col, d.message) for d in err.value.diagnostics]


def test_recovery_goes_on_inside_the_block():
    text = "order {\n    forward * microbatches )\n    for i in 0 to microbatches { backward }\n    repeat 3 forward\n    optimizer\n}\n"
    assert syntax_errors(text) == [
        (2, 28, "unexpected `)`"),
        (3, 16, "unexpected `to`"),
        (4, 14, "a block needs braces"),  # the labelled example matches at any depth
    ]


def test_recovery_in_nested_blocks_and_then_at_the_top_level():
    text = (
        "order {\n    if rank == 0 {\n        forward forward )\n        backward\n    }\n    optimizer\n}\n"
        'require pp > "x"\nparam k = = 1\n'
    )
    assert [line for line, _, _ in syntax_errors(text)] == [3, 8, 9]


def test_a_statement_cut_short_by_the_next_line_is_reported_once_and_the_next_one_is_read():
    text = "order {\n    let x = 3 +\n    let y = 2\n    forward\n    optimizer\n}\n"
    # `3 + let` reads on (a keyword is a name where no keyword fits); the mistake is found on line 3, once
    assert [line for line, _, _ in syntax_errors(text)] == [3]


def test_an_unclosed_brace_is_reported_at_the_brace():
    ((line, col, message),) = syntax_errors("order {\n    repeat 2 { forward backward }\n    optimizer\n")
    assert (line, col) == (1, 7) and message == "the file ends inside a block: this `{` is never closed"


def test_a_misindented_closing_brace_is_pointed_out():
    with pytest.raises(DiagnosticError) as err:
        parse("order {\n    repeat 2 { forward backward\n    optimizer\n}\n", "t.sched")
    (diag,) = err.value.diagnostics
    assert "closes the `{` on line 2" in diag.notes[0]


def test_errors_are_capped():
    text = "order {\n" + "    forward )\n" * 30 + "}\n"
    assert len(syntax_errors(text)) == MAX_SYNTAX_ERRORS


@pytest.mark.parametrize("junk", ["}}}}", "{{{{", "order { { { }", ")))(((", "order {" * 50, '"""', "\x00\x01"])
def test_recovery_always_ends(junk):
    syntax_errors(junk)


def test_an_unfinished_expression_is_not_an_unknown_name():
    with pytest.raises(DiagnosticError) as err:
        resolve_text("order {\n    let x = 3 +\n    forward\n    backward\n    optimizer\n}\n", "t.sched")
    (diag,) = err.value.diagnostics
    assert (diag.code, diag.message, diag.span.line) == ("E002", "`forward` is a job type, not a value", 3)
    assert "`3 +` on line 2 is not finished" in diag.help


def test_a_nul_byte_in_a_comment_is_refused_where_it_is():
    with pytest.raises(DiagnosticError) as err:
        parse('schedule "x"\norder { forward  # a\0b\n optimizer }\n', "nul.sched")
    [diagnostic] = err.value.diagnostics
    assert (diagnostic.code, diagnostic.message) == ("E001", "the file contains a NUL byte")
    assert (diagnostic.span.line, diagnostic.span.col) == (2, 21)
