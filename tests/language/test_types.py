"""The type system: int, float and bool, known before anything runs; a mismatch is an E-code at the expression."""

from __future__ import annotations

import re

import pytest

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language import types
from ppdsl.language.resolve import resolve_text

GPIPE = "order { forward * microbatches backward * microbatches optimizer }"
PYTHON = re.compile(r"\b(True|False|None)\b|'\w+' object|\w+Error\b|\bv_\w")


def errors(src: str) -> list:
    with pytest.raises(DiagnosticError) as err:
        resolve_text(src, "t.sched")
    for d in err.value.diagnostics:
        assert not PYTHON.search(f"{d.message} {d.label} {d.help}"), d
    return err.value.diagnostics


def order(*statements: str) -> str:
    return "order { " + " ".join(statements) + " forward * microbatches backward * microbatches optimizer }"


@pytest.mark.parametrize(
    ("src", "message", "help_fragment"),
    [
        ('require pp : "x"\n' + GPIPE, "a `require` must be a condition, not a number", "`pp > 0`"),
        ("cost forward = true\n" + GPIPE, "a cost must be a number, not a condition", "write `1`"),
        ("memory limit = pp > 1\n" + GPIPE, "a memory limit must be a number, not a condition", "if pp > 1 then 1"),
        ("memory forward allocates true\n" + GPIPE, "an amount of memory must be a number", ""),
        ("comm latency = pp == 1\n" + GPIPE, "a latency must be a number, not a condition", ""),
        ("placement stage = rank > 0\n" + GPIPE, "a stage must be an integer, not a condition", ""),
        ('rule "x" { priority = pp > 1 }\n' + GPIPE, "a priority must be an integer, not a condition", ""),
        ("table when pp { rank 0: F0 B0 optimizer }", "a table's `when` must be a condition, not a number", ""),
        (order("let flag = true + 1"), "`+` takes numbers, not conditions", "write `1`"),
        (order("if microbatches { }"), "an `if` test must be a condition, not a number", "`microbatches > 0`"),
        (order("forward * (pp > 1)"), "a repeat count must be an integer, not a condition", "if pp > 1 then 1"),
        (order("repeat rank == 0 { }"), "a repeat count must be an integer, not a condition", ""),
        (order("for i in 0 .. true { }"), "a loop bound must be an integer, not a condition", ""),
        (order("backward(chunk = rank > 5)"), "a chunk must be an integer, not a condition", "if rank > 5 then 1"),
        (order("forward(mb = false)"), "a micro-batch must be an integer, not a condition", ""),
        (order("let x = not pp"), "`not` takes conditions, not numbers", "`pp > 0`"),
        (order("let x = pp and true"), "`and` takes conditions, not numbers", ""),
        (order("let x = -true"), "`-` takes numbers, not conditions", ""),
        (order("let x = pp < true"), "`<` takes numbers, not conditions", ""),
        (order("let x = pp == true"), "`==` compares two numbers or two conditions", ""),
        (order("let x = if pp > 1 then 1 else true"), "the two branches of `if ... then ... else`", ""),
        (order("let x = if pp then 1 else 2"), "the test of `if ... then ... else` must be a condition", ""),
        (order("let x = min(1, true)"), "`min` takes numbers, not conditions", ""),
        (order("let x = 1", "let x = true"), "`x` is an integer (`int`): `let` cannot make it a condition", ""),
        (order("let chunk = true"), "`chunk` names the current chunk: it must be an integer", ""),
    ],
)
def test_a_mismatch_is_e011_at_the_expression(src, message, help_fragment):
    found = [d for d in errors(src) if d.code == "E011"]
    assert found, "expected a type error"
    assert found[0].message.startswith(message), found[0].message
    assert help_fragment in found[0].help
    assert found[0].span is not None


@pytest.mark.parametrize(
    ("src", "message"),
    [
        (order("forward * (microbatches / 2)"), "a repeat count must be an integer"),
        (order("let x = 1", "let x = x / 2"), "`x` is an integer (`int`): `let` cannot make it a real number"),
        (order("let chunk = 0.5"), "`chunk` names the current chunk: it must be an integer"),
        (order("let x = ceildiv(microbatches / 2, 2)"), "`ceildiv` takes integers"),
    ],
)
def test_a_real_number_where_an_integer_is_needed_is_e010(src, message):
    found = [d for d in errors(src) if d.code == "E010"]
    assert found and found[0].message.startswith(message), [d.message for d in errors(src)]


@pytest.mark.parametrize(
    "statements",
    [
        (
            "let x = 1",
            "let y = 2.5 > x",
        ),
        (
            "let r = 0.5",
            "let r = 2",
        ),  # an integer goes into a real variable
        ("let c = pp > 1 and not (vpp == 2 or false)", "if c { }"),
        ("let half = microbatches / 2", "let n = if half > 1.5 then 1 else 0", "forward * n"),
        ("let b = (pp == 1) == (vpp == 1)",),  # conditions compare with conditions
    ],
)
def test_well_typed_orders_compile(statements):
    expand(resolve_text(order(*statements)), 2, 4)


def test_types_follow_the_rules():
    assert types.type_of(True) == types.BOOL and types.type_of(1) == types.INT and types.type_of(1.0) == types.FLOAT
    assert types.accepts(types.FLOAT, types.INT) and not types.accepts(types.INT, types.FLOAT)
    assert not types.accepts(types.NUMBER, types.BOOL) and not types.accepts(types.BOOL, types.INT)
    assert types.show(True) == "true" and types.show(False) == "false" and types.show(3) == "3"


def test_a_condition_parameter_steers_an_order():
    src = "param split = false\norder { forward * microbatches if split { backward_b * microbatches backward_w * microbatches } else { backward * microbatches } optimizer }"
    defn = resolve_text(src)
    assert {c % 5 for c in expand(defn, 1, 2).jobs[0]} == {0, 1, 4}
    split = expand(defn, 1, 2, params={"split": "true"})
    assert {c % 5 for c in split.jobs[0]} == {0, 2, 3, 4}
    assert check_expansion(split).valid
    assert expand(defn, 1, 2, params={"split": True}).jobs == split.jobs  # the Python API gives values


@pytest.mark.parametrize(
    ("default", "given", "value"),
    [("1", "3", 3), ("1", "-2", -2), ("0.5", "2", 2.0), ("0.5", "1e-3", 0.001), ("true", "false", False)],
)
def test_parameters_are_read_as_their_default_s_type(default, given, value):
    defn = resolve_text(f"param p = {default}\n{GPIPE}")
    bound = expand(defn, 1, 2, params={"p": given}).params["p"]
    assert bound == value and types.type_of(bound) == types.type_of(value)


@pytest.mark.parametrize(
    ("default", "given", "takes"),
    [
        ("1", "1.5", "an integer (`int`)"),
        ("1", "true", "an integer (`int`)"),
        ("1", True, "an integer (`int`)"),
        ("1", 2.0, "an integer (`int`)"),
        ("0.5", "false", "a real number (`float`)"),
        ("0.5", "inf", "a real number (`float`)"),
        ("true", "1", "`true` or `false`"),
        ("true", 1, "`true` or `false`"),
        ("true", "True", "`true` or `false`"),
    ],
)
def test_a_parameter_of_the_wrong_type_is_a_usage_error(default, given, takes):
    defn = resolve_text(f"param p = {default}\n{GPIPE}", "t.sched")
    with pytest.raises(DiagnosticError) as err:
        expand(defn, 1, 2, params={"p": given})
    (diag,) = err.value.diagnostics
    shown = given if isinstance(given, str) else types.show(given)
    assert (diag.code, diag.message) == ("E007", f"parameter `p` takes {takes}, not `{shown}`")
    assert diag.span.line == 1 and "--param p=" in diag.help


def test_a_default_must_be_a_literal_and_never_use_the_rank():
    (diag,) = errors("param warm = rank + 1\n" + GPIPE)
    assert (diag.code, diag.span.col) == ("E013", 14)
    assert "let warm" in diag.help
    (diag,) = errors("param warm = pp - 1\n" + GPIPE)
    assert diag.code == "E012"
    assert resolve_text("param warm = -1\n" + GPIPE).params["warm"].default == -1
