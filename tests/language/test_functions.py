"""User functions: `fn name(args) = expr`, pure, usable in every expression, never recursive, typed per call."""

from __future__ import annotations

import pytest

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.resolve import resolve_text

TAIL = "forward * microbatches backward * microbatches optimizer }"


def codes_of(src: str) -> list[str]:
    with pytest.raises(DiagnosticError) as err:
        resolve_text(src, "t.sched")
    return [d.code for d in err.value.diagnostics]


def diagnostics_of(src: str):
    with pytest.raises(DiagnosticError) as err:
        resolve_text(src, "t.sched")
    return err.value.diagnostics


def test_a_function_is_its_formula_everywhere_an_expression_goes():
    src = """
    param extra = 0
    fn per_round() = microbatches // max(1, microbatches // pp)
    fn chunk_of(step) = step // per_round() % vpp
    fn last(r) = pp - 1 - r
    require per_round() >= 1 : "a round holds a micro-batch"
    placement stage = chunk * pp + last(last(rank))
    cost forward = 1 + extra + last(rank) * 0
    rule "x" { priority = last(0) }
    order {
        for step in 0 .. microbatches * vpp { forward(chunk = chunk_of(step)) }
        for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches }
        optimizer
    }
    """
    exp = expand(resolve_text(src), 2, 4, 2)
    # per_round = 4 // (4 // 2) = 2: forwards take chunks 0, 0, 1, 1, 0, 0, 1, 1
    chunks = [exp.decode(code)[1] for code in exp.jobs[0][:8]]
    assert chunks == [0, 0, 1, 1, 0, 0, 1, 1]
    assert exp.stage_of == [[0, 2], [1, 3]]  # last(last(rank)) == rank: looped
    assert exp.rules[0].priority == 1
    assert check_expansion(exp).valid


def test_parameters_take_the_kind_the_body_uses_and_calls_are_typed_per_call():
    src = """
    fn pick(flag, a, b) = if flag then a else b
    fn half(n) = n / 2
    order {
        let many = pick(microbatches > 2, true, false)
        let n = pick(many, microbatches, 1)
        forward * n
        forward * (microbatches - n)
        backward * pick(true, microbatches, 0)
        optimizer
    }
    """
    assert check_expansion(expand(resolve_text(src), 2, 4)).valid
    # half's result is a real number, whatever its argument: not a count
    assert codes_of("fn half(n) = n / 2\norder { forward * half(4) " + TAIL) == ["E010"]
    # a condition where the body does arithmetic
    assert codes_of("fn twice(n) = 2 * n\norder { let x = twice(true) " + TAIL) == ["E011"]
    # a number where the body needs a condition
    assert codes_of("fn neg(c) = not c\norder { let x = neg(1) " + TAIL) == ["E011"]


def test_a_type_error_inside_a_function_names_the_call_it_comes_from():
    src = "fn half(n) = ceildiv(n, 2)\norder { forward * half(microbatches / 2) " + TAIL
    (diag,) = diagnostics_of(src)
    assert diag.code == "E010" and diag.span.line == 1
    assert diag.notes == ["with a real number (`float`), as at line 2"]


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("fn f(n) = f(n - 1)\norder { " + TAIL, "`f` calls itself"),
        ("fn f(n) = g(n)\nfn g(n) = f(n)\norder { " + TAIL, "calls itself"),
        (
            "fn f0(x) = x + x\n"
            + "".join(f"fn f{i}(x) = f{i - 1}(x) + f{i - 1}(x)\n" for i in range(1, 16))
            + "order { let y = f15(1) "
            + TAIL,
            "makes more than 10000 function calls",
        ),
    ],
)
def test_recursion_and_runaway_cost_are_e014(src, message):
    found = [d for d in diagnostics_of(src) if d.code == "E014"]
    assert found and message in found[0].message


@pytest.mark.parametrize(
    ("src", "code"),
    [
        ("fn f(n) = n\norder { forward * f() " + TAIL, "E004"),
        ("fn f(n) = n\norder { forward * f(1, 2) " + TAIL, "E004"),
        ("fn min(a) = a\norder { " + TAIL, "E003"),
        ("param k = 1\nfn k() = 1\norder { " + TAIL, "E003"),
        ("fn forward() = 1\norder { " + TAIL, "E003"),
        ("fn f(a, a) = a\norder { " + TAIL, "E003"),
        ("fn f(pp) = pp\norder { " + TAIL, "E003"),
        ("fn f() = 1\nfn f() = 2\norder { " + TAIL, "E003"),
        ("fn f() = 1\norder { let f = 2 " + TAIL, "E003"),
        ("fn f() = rank\norder { " + TAIL, "E002"),
        ("fn f() = 1\norder { forward * g() " + TAIL, "E002"),
    ],
)
def test_function_mistakes_are_located_e_codes(src, code):
    assert code in codes_of(src)


def test_a_function_reading_the_rank_is_told_to_take_it_as_an_argument():
    (diag,) = diagnostics_of("fn f() = rank\norder { " + TAIL)
    assert diag.message == "unknown name `rank`" and "pass it as an argument" in diag.help


def test_an_unknown_function_suggests_a_user_function():
    diag = diagnostics_of("fn warmup(r) = r\norder { forward * warmpu(rank) " + TAIL)[0]
    assert diag.help == "did you mean `warmup`?"


def test_a_function_growing_without_end_stops_the_order():
    """Pure functions cannot loop, but squaring in a chain can still make numbers past any count: stopped."""
    chain = "fn s0(x) = x * x\n" + "".join(f"fn s{i}(x) = s{i - 1}(s{i - 1}(x))\n" for i in range(1, 12))
    defn = resolve_text(chain + "order { let y = s11(3) " + TAIL)
    with pytest.raises(DiagnosticError) as err:
        expand(defn, 1, 2)
    assert [d.code for d in err.value.diagnostics] == ["S111"]
