"""The editor's item-by-item parse gives what `parse` gives (items, or the same syntax errors), and keeps the
items an edit did not touch."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language import parser
from ppdsl.lsp.syntax import ItemCache, pieces

from paths import LIBRARY, UI

FILES = sorted(LIBRARY.glob("*.sched")) + sorted(UI.glob("*.sched"))


def outcome(parse, text: str):
    try:
        return parse(text, "f.sched").items
    except DiagnosticError as err:
        return [d.to_dict() for d in err.diagnostics]


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_the_item_cache_parses_as_the_parser(path: Path):
    text = path.read_text(encoding="utf-8")
    cache = ItemCache()
    assert outcome(cache.parse, text) == outcome(parser.parse, text)
    edited = text + "\n# an edit\n"  # again, with every piece but the last from the cache
    assert outcome(cache.parse, edited) == outcome(parser.parse, edited)


def test_a_docstring_is_one_piece_whatever_its_lines_start_with():
    text = '"""A schedule.\norder { this is prose }\n"""\norder { forward backward optimizer }\n'
    assert [line for line, _ in pieces(text)] == [1, 4]
    assert ItemCache().parse(text, "f.sched").items == parser.parse(text, "f.sched").items


def test_an_edit_parses_only_the_item_it_changed(monkeypatch):
    text = (LIBRARY / "zbvpp.sched").read_text(encoding="utf-8")
    cache = ItemCache()
    cache.parse(text, "z.sched")
    calls = []
    real = parser.parse
    monkeypatch.setattr("ppdsl.lsp.syntax.parse", lambda t, f: calls.append(t) or real(t, f))
    edited = text.replace("rank 0: F0.c0 F1.c0 F0.c1", "rank 0: F0.c0  F1.c0 F0.c1", 1)  # same lines
    assert cache.parse(edited, "z.sched").items == real(edited, "z.sched").items
    assert len(calls) == 1 and "F0.c0  F1.c0" in calls[0]


def test_items_below_a_new_line_are_moved_not_parsed_again(monkeypatch):
    text = (LIBRARY / "zbvpp.sched").read_text(encoding="utf-8")
    cache = ItemCache()
    cache.parse(text, "z.sched")
    calls = []
    real = parser.parse
    monkeypatch.setattr("ppdsl.lsp.syntax.parse", lambda t, f: calls.append(t) or real(t, f))
    for edited in ("# a new first line\n" + text, text):  # a line added at the top, then taken away
        assert cache.parse(edited, "z.sched").items == real(edited, "z.sched").items
    assert len(calls) == 1 and calls[0].startswith("# a new first line")  # only the piece the edit is in
