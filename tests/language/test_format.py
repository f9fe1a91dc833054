"""The formatter (`ppdsl.language.format`): the layout it promises, idempotence, and meaning kept (the formatted
file expands to the same jobs at several sizes) on every file of the library, the UI corpus, the codegen inputs,
a synthesized file and hypothesis-generated schedules."""

from __future__ import annotations

import itertools
import os
import re
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppdsl
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.format import format_text
from ppdsl.language.parser import parse
from ppdsl.language.resolve import resolve_text

from paths import CODEGEN, LIBRARY, UI

SIZES = [(1, 1, 1), (2, 4, 1), (4, 8, 1), (2, 4, 2), (4, 8, 2), (3, 6, 3)]
COMMENT = re.compile(r"#[^\n]*")


def _parses(path: Path) -> bool:
    try:
        parse(path.read_text(encoding="utf-8"), str(path))
    except DiagnosticError:
        return False
    return True


CORPUS = sorted(LIBRARY.glob("*.sched")) + [p for p in sorted(UI.glob("*.sched")) if _parses(p)]
CORPUS += sorted(CODEGEN.glob("*.sched"))


def _sizes_of(text: str) -> list[tuple[int, int, int]]:
    """SIZES, and a UI case's own sizes (its `# args:` line)."""
    first = text.splitlines()[0] if text else ""
    if not first.startswith("# args:"):
        return SIZES
    words = shlex.split(first[len("# args:") :])
    own = {"--pp": 1, "-m": 1, "--microbatches": 1, "--vpp": 1}
    for flag, value in itertools.pairwise(words):
        if flag in own and value.isdigit():
            own[flag] = int(value)
    return [(own["--pp"], max(own["-m"], own["--microbatches"]), own["--vpp"]), *SIZES]


def meaning(text: str, file: str, sizes: list[tuple[int, int, int]]) -> list[object]:
    """What a schedule does at each size: its expansion (orders, placement, costs, memory, rules), or the codes of
    the diagnostics it raises (their positions move with the layout, their codes do not)."""
    try:
        definition = resolve_text(text, file)
    except DiagnosticError as e:
        return [("refused", sorted(d.code for d in e.diagnostics))]
    out: list[object] = []
    for pp, m, vpp in sizes:
        try:
            x = ppdsl.expand(definition, pp=pp, microbatches=m, vpp=vpp)
        except DiagnosticError as e:
            out.append(("refused", sorted(d.code for d in e.diagnostics)))
            continue
        rules = [(r.pattern, r.job, r.stream, r.priority, r.attrs) for r in x.rules]
        out.append((x.jobs, x.stage_of, x.cost, x.mem_delta, x.memory_limit, x.latency, x.bandwidth, rules))
    return out


def assert_formatted_well(text: str, file: str, sizes: list[tuple[int, int, int]] = SIZES) -> str:
    formatted = format_text(text, file)
    assert format_text(formatted, file) == formatted, "formatting is idempotent"
    assert COMMENT.findall(formatted) == [c.rstrip() for c in COMMENT.findall(text)] or _in_strings(text)
    assert meaning(formatted, file, sizes) == meaning(text, file, sizes)
    return formatted


def _in_strings(text: str) -> bool:
    """A `#` inside a string or docstring is no comment: the plain regex above cannot tell."""
    return bool(re.search(r'"[^"\n]*#', text))


@pytest.mark.parametrize("path", CORPUS, ids=[f"{p.parent.name}/{p.name}" for p in CORPUS])
def test_every_file_keeps_its_meaning_and_formats_once(path: Path):
    text = path.read_text(encoding="utf-8")
    assert_formatted_well(text, str(path), _sizes_of(text))


# A UI case about the layout itself: its expected message explains a line break that formatting would remove.
LAID_OUT_BY_HAND = {UI / "unfinished_expression.sched"}
FORMATTED = [p for p in CORPUS if p.parent != CODEGEN and p not in LAID_OUT_BY_HAND]


@pytest.mark.parametrize("path", FORMATTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_library_and_ui_files_are_formatted(path: Path):
    """What CI's `ppdsl fmt --check schedules` promises, for the UI corpus too (regenerate: `ppdsl fmt tests/ui`)."""
    text = path.read_text(encoding="utf-8")
    assert format_text(text, str(path)) == text, f"{path} is not formatted: run `ppdsl fmt {path}`"


def test_a_synthesized_file_is_written_formatted():
    outcome = ppdsl.synthesize(pp=2, microbatches=4, time_limit=2)
    assert format_text(outcome.text) == outcome.text
    assert_formatted_well(outcome.text, "synth.sched", [(2, 4, 1)])


def test_a_synthesized_table_is_written_formatted():
    from ppdsl.synth.writer import table_text

    class Problem:  # what table_text reads of a problem
        vpp = 2
        chunk_of = (0, 1, 0, 1)

    lines = table_text(Problem(), [[(0, 0, 0), (0, 2, 0), (1, 2, 0), (1, 0, 0)], [(0, 1, 0), (1, 1, 0)]])
    text = "\n".join(["order { forward }", *lines]) + "\n"
    formatted = assert_formatted_well(text, "table.sched")
    assert "    rank 0: F0.c0 F0.c0 B0.c0 B0.c0 optimizer\n" in formatted


# ---------------------------------------------------------------- the layout


def test_spacing_indentation_and_blocks():
    text = "order{let x=-(pp-rank)*2 forward(chunk=0,mb=x)*(2)\nrepeat  rank{backward}\nfor i in 0..pp{if i<1{forward}else{backward}}}\n"
    assert format_text(text) == (
        "order {\n"
        "    let x = -(pp - rank) * 2 forward(chunk = 0, mb = x) * (2)\n"
        "    repeat rank { backward }\n"
        "    for i in 0 .. pp { if i < 1 { forward } else { backward } }\n"
        "}\n"
    )


def test_a_block_with_a_line_break_opens_and_closes_on_lines_of_its_own():
    text = "order { if rank > 0 { backward_b\n backward_w } else\n { backward }\n    optimizer }"
    assert format_text(text) == (
        "order {\n"
        "    if rank > 0 {\n"
        "        backward_b\n"
        "        backward_w\n"
        "    } else { backward }\n"
        "    optimizer\n"
        "}\n"
    )


def test_top_level_items_start_lines_and_blank_lines_are_kept_once():
    text = 'schedule "x" param a = 1\n\n\n\nparam bb = 2 order { forward }'
    assert format_text(text) == 'schedule "x"\nparam a = 1\n\nparam bb = 2\norder { forward }\n'


def test_runs_of_declarations_are_aligned():
    text = (
        "cost forward = 1\ncost backward_b = 2\n\ncost backward = 3\n"
        "memory forward allocates 1\nmemory backward_b frees 0.5\n"
        "job recv_forward : forward before forward receives\njob send (s) : backward after backward sends\n"
        "order { forward }\n"
    )
    assert format_text(text) == (
        "cost forward    = 1\n"
        "cost backward_b = 2\n"
        "\n"
        "cost backward = 3\n"
        "memory forward    allocates 1\n"
        "memory backward_b frees     0.5\n"
        "job recv_forward : forward before forward receives\n"
        "job send (s)     : backward after backward sends\n"
        "order { forward }\n"
    )


def test_comments_stay_where_they_were():
    text = (
        "# args: --pp 2 -m 4\n"
        '"""Doc.\n\n   kept   as written\n"""\n'
        "param a = 1 # after a\n"
        "param long_name = 2    # after long_name\n"
        "order {\n"
        "  # the first statement\n"
        "  forward # a trailing one\n"
        "        backward   \n"
        "\n"
        "\n"
        "    # before the closing brace\n"
        "}\n"
        "# the end"
    )
    assert format_text(text) == (
        "# args: --pp 2 -m 4\n"
        '"""Doc.\n\n   kept   as written\n"""\n'
        "param a         = 1  # after a\n"
        "param long_name = 2  # after long_name\n"
        "order {\n"
        "    # the first statement\n"
        "    forward  # a trailing one\n"
        "    backward\n"
        "\n"
        "    # before the closing brace\n"
        "}\n"
        "# the end\n"
    )


def test_a_comment_inside_a_statement_continues_it_on_the_next_line():
    text = 'require pp > 1 and # why\n vpp == 1 : "m"\norder { forward }'
    assert format_text(text) == 'require pp > 1 and  # why\n    vpp == 1 : "m"\norder { forward }\n'


def test_tables_keep_rows_and_their_wraps():
    text = "table when pp==2{rank 0 : F0 F1\n  B0 B1 optimizer rank 1: F0.c0 B0.c0 optimizer}"
    assert format_text(text) == (
        "table when pp == 2 {\n    rank 0: F0 F1\n        B0 B1 optimizer\n    rank 1: F0.c0 B0.c0 optimizer\n}\n"
    )


def test_rules_semicolons_and_unary_minus():
    text = 'rule "pd_op.send_v2" in forward {stream="s" priority=-1 attr x=-2 attr y=true};order{forward;backward}'
    assert format_text(text) == (
        'rule "pd_op.send_v2" in forward { stream = "s" priority = -1 attr x = -2 attr y = true };\n'
        "order { forward; backward }\n"
    )


def test_crlf_and_an_empty_file():
    assert format_text("order {\r\n  forward\r\n}\r\n") == "order {\n    forward\n}\n"
    assert format_text("") == ""
    assert format_text("# only a comment\n\n") == "# only a comment\n"


def test_bad_input_raises_the_parsers_diagnostics():
    for text, code in (("order { forward ", "E001"), ("order " + "{" * 70, "E065"), ("x\0", "E001")):
        with pytest.raises(DiagnosticError) as caught:
            format_text(text, "bad.sched")
        assert [d.code for d in caught.value.diagnostics][:1] == [code]
    with pytest.raises(DiagnosticError) as caught:
        format_text("order { forward }\norder { let x = " + "(" * 120 + "1" + ")" * 120 + " }")
    assert caught.value.diagnostics[0].code == "E065"


# ---------------------------------------------------------------- generated schedules

NAMES = st.sampled_from(["pp", "microbatches", "rank", "x", "i", "vpp"])
JOBS = st.sampled_from(["forward", "backward", "backward_b", "backward_w", "optimizer", "recv_forward"])


def _expr(depth: int) -> st.SearchStrategy[list[str]]:
    atom = st.one_of(st.integers(0, 9).map(lambda n: [str(n)]), NAMES.map(lambda n: [n]))
    if depth == 0:
        return atom
    sub = _expr(depth - 1)
    return st.one_of(
        atom,
        st.tuples(sub, st.sampled_from(["+", "-", "*", "//", "%"]), sub).map(lambda t: [*t[0], t[1], *t[2]]),
        sub.map(lambda e: ["-", *e]),
        sub.map(lambda e: ["(", *e, ")"]),
        st.tuples(sub, sub).map(lambda t: ["min", "(", *t[0], ",", *t[1], ")"]),
        st.tuples(sub, sub, sub).map(lambda t: ["(", "if", *t[0], "<", *t[1], "then", *t[2], "else", "1", ")"]),
        st.tuples(sub, sub).map(lambda t: ["f", "(", *t[0], ",", *t[1], ")"]),
    )


EXPR = _expr(2)
COMPARISON = st.tuples(EXPR, st.sampled_from(["<", "==", ">=", "!="]), EXPR).map(lambda t: [*t[0], t[1], *t[2]])
COND = st.one_of(
    COMPARISON,
    st.tuples(COMPARISON, st.sampled_from(["and", "or"]), COMPARISON).map(lambda t: [*t[0], t[1], *t[2]]),
    COMPARISON.map(lambda c: ["not", "(", *c, ")"]),
    st.sampled_from([["true"], ["false"]]),
)


def _statements(depth: int) -> st.SearchStrategy[list[str]]:
    job = st.one_of(
        JOBS.map(lambda j: [j]),
        st.tuples(JOBS, EXPR).map(lambda t: [t[0], "(", "mb", "=", *t[1], ")"]),
        st.tuples(JOBS, EXPR).map(lambda t: [t[0], "(", "chunk", "=", "0", ",", "mb", "=", *t[1], ")", "*", "2"]),
        st.tuples(JOBS, st.integers(0, 3)).map(lambda t: [t[0], "*", str(t[1])]),
        EXPR.map(lambda e: ["let", "x", "=", *e]),
        st.just([";"]),
    )
    if depth > 0:
        body = _statements(depth - 1)
        job = st.one_of(
            job,
            st.tuples(st.integers(0, 3), body).map(lambda t: ["repeat", str(t[0]), "{", *t[1], "}"]),
            st.tuples(EXPR, body).map(lambda t: ["for", "i", "in", "0", "..", *t[0], "{", *t[1], "}"]),
            st.tuples(COND, body, body).map(lambda t: ["if", *t[0], "{", *t[1], "}", "else", "{", *t[2], "}"]),
            st.tuples(COND, body, COND, body).map(
                lambda t: ["if", *t[0], "{", *t[1], "}", "elif", *t[2], "{", *t[3], "}"]
            ),
        )
    return st.lists(job, max_size=4).map(lambda parts: [tok for part in parts for tok in part])


ITEMS = st.one_of(
    st.integers(0, 5).map(lambda n: ["param", "x", "=", str(n)]),
    st.tuples(JOBS, st.integers(1, 3)).map(lambda t: ["cost", t[0], "=", str(t[1])]),
    COND.map(lambda c: ["require", *c, ":", '"a # message"']),
    st.just(["job", "recv_forward", ":", "forward", "before", "forward", "receives"]),
    st.just(['"""A docstring,\n  # not a comment\n"""']),
    st.just(["rule", '"pd_op.send_v2"', "{", "priority", "=", "-", "1", "attr", "a", "=", "-2", "}"]),
    st.just(["memory", "forward", "allocates", "1"]),
    st.just(["memory", "backward_b", "frees", "0.5"]),
    EXPR.map(lambda e: ["memory", "limit", "=", *e]),
    EXPR.map(lambda e: ["fn", "f", "(", "a", ",", "b", ")", "=", *e]),
    EXPR.map(lambda e: ["placement", "stage", "=", *e]),
    st.sampled_from([["placement", "looped"], ["placement", "vshape"], ["comm", "latency", "=", "0.25"]]),
    st.just(["job", "send", "(", "s", ")", ":", "backward", "ops", '"a"', ",", '"b"', "after", "backward", "sends"]),
    st.just(["rule", '"x"', "in", "forward", "{", "stream", "=", '"s"', "attr", "t", "=", "true", "}"]),
    st.just(["schedule", '"name"']),
    st.just(["table", "{", "rank", "0", ":", "F0", "B0", "optimizer", "rank", "1", ":", "F0", "B0", "optimizer", "}"]),
    st.just(["table", "when", "pp", "==", "9", "{", "rank", "0", ":", "F0", "B0.c0", "optimizer", "}"]),
)
SCHEDULES = st.tuples(st.lists(ITEMS, max_size=4), _statements(2)).map(
    lambda t: [tok for item in t[0] for tok in item] + ["order", "{", *t[1], "}"]
)
# Between two tokens: spaces, line breaks, blank lines, comments after code and on lines of their own.
GAPS = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n\n", "\t", "  # note\n", "\n    # own line\n  "])


@pytest.mark.e2e
@settings(
    max_examples=int(os.environ.get("FMT_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(SCHEDULES, st.data())
def test_generated_schedules_keep_their_meaning_and_format_once(tokens, data):
    gaps = data.draw(st.lists(GAPS, min_size=len(tokens), max_size=len(tokens)))
    text = "".join(tok + gap for tok, gap in zip(tokens, gaps, strict=True))
    formatted = assert_formatted_well(text, "generated.sched", [(2, 4, 1), (3, 3, 2)])
    assert formatted.count("# note") == text.count("# note")
    assert formatted.count("# own line") == text.count("# own line")


def test_a_layout_that_would_change_a_token_or_comment_is_refused(monkeypatch):
    """The proof before the answer: a formatter bug (here, one that drops a comment or glues two names) is
    E097, never a changed file."""
    from ppdsl.language import format as formatter

    text = "order { forward backward  # why\n optimizer }\n"
    for broken in ("order { forward backward\n    optimizer\n}\n", "order { forwardbackward optimizer }  # why\n"):
        monkeypatch.setattr(formatter._Formatter, "run", lambda self, broken=broken: broken)
        with pytest.raises(DiagnosticError) as caught:
            format_text(text, "x.sched")
        assert [d.code for d in caught.value.diagnostics] == ["E097"]
