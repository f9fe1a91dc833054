"""The AST built in the parser's reductions (no lark tree) is the one built from lark's tree, spans included."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppdsl.language import parser

SCHEDULES = sorted((Path(__file__).parents[2] / "schedules").glob("*.sched"))
# Spans that lark's position rules make wide or narrow: parentheses passed up, inlined lists, empty blocks.
TRICKY = """param n = (1 + 2) * -(3)
fn f(a, b) = (a)
order {
    let x = if (n) then (n + 1) else -n
    forward(chunk=(1)) * (n)
    if not (x == 1) and n or x { backward } elif 1 { } else { optimizer }
    for i in 0 .. (n) { }
    ;
}
"""


def _by_tree(text: str) -> list:
    return parser._to_ast(parser._parser().parse(text), parser._ToAst("t.sched"))


@pytest.mark.parametrize("path", [None, *SCHEDULES], ids=["tricky", *(p.name for p in SCHEDULES)])
def test_the_treeless_ast_is_the_tree_built_one(path: Path | None) -> None:
    text = TRICKY if path is None else path.read_text(encoding="utf-8")
    built = parser._parse_to_ast(text, parser._ToAst("t.sched"))
    assert built == _by_tree(text)
    assert repr(built) == repr(_by_tree(text))  # the spans too, whatever the nodes' equality compares
