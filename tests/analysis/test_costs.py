"""Costs from outside the schedule and from its declarations: anything that is not a cost is an E-code error that
names the key (or the declaration), never a traceback and never a run with the schedule's own costs instead."""

from __future__ import annotations

import json

import pytest

from ppdsl.analysis.costs import CostSpec, load_costs, parse_cost_pairs
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.jsontext import JsonError, nesting_depth, parse_json
from ppdsl.language.resolve import resolve_text

ORDER = "order { forward * microbatches  backward * microbatches  optimizer }\n"


def refusal(fn, *args) -> list[tuple[str, str, str]]:
    with pytest.raises(DiagnosticError) as e:
        fn(*args)
    return [(d.code, d.message, d.help) for d in e.value.diagnostics]


def file_refusal(tmp_path, text: str) -> list[tuple[str, str, str]]:
    path = tmp_path / "c.json"
    path.write_text(text, encoding="utf-8")
    return refusal(load_costs, path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "holds a list, not a JSON object"),
        ('{"costs": [1]}', "`costs` is a list, not an object"),
        ('{"costs": {"forward": "x"}}', "`costs.forward` is a string, not a number"),
        ('{"costs": {"forward": null}}', "`costs.forward` is `null`, not a number"),
        ('{"costs": {"forward": true}}', "`costs.forward` is `true`, not a number"),
        ('{"costs": {"forward": -1}}', "`costs.forward` is negative (-1)"),
        ('{"costs": {"forward": 1e999}}', "`costs.forward` is over 1e15"),
        ('{"costs": {"forward": 1e300}}', "`costs.forward` is over 1e15"),
        ('{"costs": {"forward": 1' + "0" * 400 + "}}", "`costs.forward` is over 1e15"),
        ('{"costs": {"forward": 1' + "0" * 5000 + "}}", "`costs.forward` is over 1e15"),  # int-string limit
        ('{"stages": {"x": {}}}', "`stages.x` is not a stage number"),
        ('{"stages": [1]}', "`stages` is a list, not an object"),
        ('{"stages": {"0": 5}}', "`stages.0` is a number, not an object"),
        ('{"stages": {"0": {"forward": "1"}}}', "`stages.0.forward` is a string, not a number"),
        ('{"costs": null}', "`costs` is `null`, not an object"),
        ('{"latency": "a"}', "`latency` is a string, not a number"),
        ('{"bandwidth": -2}', "`bandwidth` is negative (-2)"),
        ('{"unit": [], "costs": {}}', "unknown time unit a list"),
        ('{"unit": "h", "costs": {}}', "unknown time unit `h`"),
        ('{"a": 1}', "unknown key `a`"),
        ("{}", "holds no costs"),
    ],
)
def test_what_is_not_a_cost_file_is_refused_naming_the_key(tmp_path, text, message):
    problems = file_refusal(tmp_path, text)
    assert problems[0][0] == "E008"
    assert problems[0][1] == f"cost file `{tmp_path / 'c.json'}`: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"costs": {"forward": NaN}}', "`NaN` is not a JSON number"),
        ('{"costs": {"forward": -Infinity}}', "`-Infinity` is not a JSON number"),
        ("[" * 100_000 + "]" * 100_000, "nested 100000 levels deep, more than the 64"),
        ('{"costs": {"forward": 1,}}', "expecting property name enclosed in double quotes at line 1, column 25"),
    ],
)
def test_text_that_is_not_json_is_refused_with_where(tmp_path, text, message):
    [(code, got, _)] = file_refusal(tmp_path, text)
    assert code == "E008" and got.startswith(f"cost file `{tmp_path / 'c.json'}` is not JSON: {message}")


def test_every_problem_of_a_file_is_reported(tmp_path):
    problems = file_refusal(tmp_path, '{"costs": {"forward": -1, "backward": "2"}, "latency": null, "x": 0}')
    assert [m.split(": ", 1)[1] for _, m, _ in problems] == [
        "`costs.forward` is negative (-1)",
        "`costs.backward` is a string, not a number",
        "`latency` is `null`, not a number",
        "unknown key `x`",
    ]


@pytest.mark.parametrize(
    ("data", "hint"),
    [
        ({"costs": {"forward": 1}, "latncy": 0.5}, "did you mean `latency`?"),
        ({"forward": 1}, "job costs go under `costs`"),
        ({"traceEvents": []}, "this is a profile: turn it into costs with `ppdsl calibrate"),
        ({"losses": [4.1], "steps": 3}, "a cost file holds `unit`, `costs`"),  # a --summary-json
    ],
)
def test_a_file_that_is_not_a_cost_file_says_what_it_is(tmp_path, data, hint):
    problems = file_refusal(tmp_path, json.dumps(data))
    assert problems[0][0] == "E008" and "unknown key" in problems[0][1] and hint in problems[0][2]


def test_a_job_type_the_schedule_lacks_is_refused_with_did_you_mean(tmp_path):
    """`forwrd` in a file used to run with the schedule's own forward cost, silently."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"costs": {"forwrd": 2}, "stages": {"1": {"backwrd": 3}}}), encoding="utf-8")
    spec = CostSpec.read(None, path)
    [forward, backward] = refusal(Scenario("1f1b", 2, 4, costs=spec).expansion)
    assert forward[:2] == ("E008", "the cost file's `costs.forwrd` names no job type of the schedule")
    assert forward[2].startswith("did you mean `forward`?")
    assert backward[1] == "the cost file's `stages.1.backwrd` names no job type of the schedule"
    assert backward[2].startswith("did you mean `backward`?")


def test_a_cost_file_calibrate_writes_is_accepted(tmp_path):
    data = {"unit": "s", "costs": {"forward": 0.002, "backward": 0.004, "optimizer": 0.0}, "latency": 0.0}
    data |= {"stages": {"0": {"forward": 0.003}}, "samples": 96}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    exp = Scenario("1f1b", 2, 4, costs=CostSpec.read(None, path)).expansion()
    assert exp.cost[exp.type_names.index("forward")] == [[0.003], [0.002]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("forward=nan", "bad cost `forward=nan`: `forward` is not a number (NaN)"),
        ("forward=inf", "bad cost `forward=inf`: `forward` is over 1e15"),
        ("forward=-1", "bad cost `forward=-1`: `forward` is negative (-1)"),
        ("forward=1e300", "bad cost `forward=1e300`: `forward` is over 1e15"),
        ("latency=-0.5", "bad cost `latency=-0.5`: `latency` is negative (-0.5)"),
        ("bandwidth=1e-320", "bad cost `bandwidth=1e-320`: `bandwidth` is below 1e-15 (0 means no bandwidth term)"),
    ],
)
def test_cost_pairs_that_are_not_costs_are_usage_errors(text, message):
    [(code, got, help_)] = refusal(parse_cost_pairs, text)
    assert (code, got, help_) == ("E007", message, "give a finite number from 0 to 1e15")


def test_costs_given_through_the_api_are_checked_too():
    [(code, message, _)] = refusal(Scenario("1f1b", 2, 4, costs={"forward": float("nan")}).expansion)
    assert (code, message) == ("E007", "the cost `forward` is not a number (NaN)")


def test_zero_is_a_cost():
    """A job that takes no time (the optimizer's default), no latency, no bandwidth term: all meaningful."""
    exp = Scenario("1f1b", 2, 4, costs={"forward": 0, "latency": 0, "bandwidth": 0}).expansion()
    assert exp.cost[exp.type_names.index("forward")] == [[0.0], [0.0]] and exp.bandwidth is None


@pytest.mark.parametrize(
    ("decl", "message", "col"),
    [
        ("cost forward = 1 - rank", "the cost of `forward` is negative (-1) at rank 2", 1),
        ("cost backward = " + "9" * 308 + ".0 * 10.0", "the cost of `backward` is over 1e15 at rank 0", 1),
        ("comm latency = 0.5 - 1", "`comm latency` is negative (-0.5)", 1),
        # a memory amount is reported at its number (`memory forward allocates ` is 25 characters)
        ("memory forward allocates " + "9" * 308 + ".0 * 10.0", "the memory of `forward` is infinite at rank 0", 26),
        ("memory limit = " + "9" * 308 + ".0 * 10.0", "the memory limit of rank 0 is infinite", 16),
    ],
)
def test_declarations_that_give_no_cost_are_refused_where_declared(decl, message, col):
    """A negative or infinite cost used to be reported as `ok ... makespan nan` or `bubble 400%`."""
    defn = resolve_text(f"{decl}\n{ORDER}", "neg.sched")
    with pytest.raises(DiagnosticError) as e:
        Scenario(defn, 3, 2).expansion()
    [d] = e.value.diagnostics
    assert (d.code, d.message) == ("E075", message)
    assert (d.span.file, d.span.line, d.span.col) == ("neg.sched", 1, col)


def test_the_json_reader_bounds_nesting_with_a_scan_not_recursion():
    assert nesting_depth('{"a": "[[[[", "b": [[1]]}') == 3  # brackets in strings do not nest
    assert nesting_depth(r'["\"[[[", 1]') == 1
    assert parse_json("[" * 64 + "]" * 64) == parse_json("[" * 64 + "]" * 64)
    with pytest.raises(JsonError):
        parse_json("[" * 65 + "]" * 65)


def test_without_leaves_out_job_types_in_the_pairs_and_in_every_part_of_the_file():
    spec = CostSpec(
        {"forward": 2, "offload": 0.5, "latency": 0.1},
        {"unit": "ms", "costs": {"recompute": 1, "backward": 3}, "stages": {"0": {"reload": 1, "forward": 2}}},
    )
    assert spec.names() == {"forward", "offload", "recompute", "backward", "reload"}
    left = spec.without(("recompute", "offload", "reload"))
    assert left.pairs == {"forward": 2, "latency": 0.1}
    assert left.file == {"unit": "ms", "costs": {"backward": 3}, "stages": {"0": {"forward": 2}}}
    assert left.us_per_unit == spec.us_per_unit and spec.names() >= left.names()  # the original is not changed
