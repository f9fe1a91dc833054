"""The plan's readable expressions: the quick path for simple ones writes what Python's unparser writes."""

from __future__ import annotations

import pytest

from ppdsl.language.readable_order import _readable_by_python, readable_expr

_VALUES = ["v_a0", "v_microbatches", "u_f", "v_list", "v_x_", "v__y", "v_rank", "0", "7", "123456789012345678"]
_OPS = ["+", "-", "*", "//", "%", "==", "!=", "<=", ">=", "<", ">"]


@pytest.mark.parametrize("src", [*_VALUES, *(f"({a} {op} {b})" for a in _VALUES[:4] for op in _OPS for b in _VALUES)])
def test_a_simple_expression_reads_as_the_unparser_writes_it(src: str) -> None:
    assert readable_expr(src) == _readable_by_python(src)


@pytest.mark.parametrize(
    "src, expected",
    [
        ("((v_a + 1) * v_b)", "(a + 1) * b"),  # nested: the parser's way, which drops no needed parentheses
        ("(v_a + (1 * v_b))", "a + 1 * b"),
        ("1e+20", "1e20"),
        ("(v_n / 2)", "n / 2"),
    ],
)
def test_other_expressions_still_go_through_pythons_parser(src: str, expected: str) -> None:
    assert readable_expr(src) == expected
