"""The Python API (`ppdsl.check / expand / simulate / compile / load / scenario`), as the README shows it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.check import check
from ppdsl.cli import app

from paths import LIBRARY


@pytest.mark.parametrize(("p", "m"), [(4, 8), (3, 5), (2, 2)])
def test_check_measures_1f1b_as_the_textbook_says(p, m):
    result = ppdsl.check("1f1b", pp=p, microbatches=m)
    assert result.valid and result.diagnostics == []
    f, b = 1, 2  # the default costs
    assert result.makespan == (m + p - 1) * (f + b)
    assert result.bubble_ratio == pytest.approx((p - 1) / (m + p - 1))
    assert [r.peak_activations for r in result.ranks] == [min(p - r, m) for r in range(p)]
    assert [r.idle for r in result.ranks] == [(p - 1) * (f + b)] * p


def test_check_agrees_with_the_command_line(in_repo):
    cli = json.loads(
        CliRunner().invoke(app, ["check", "zbv", "--pp", "4", "-m", "8", "--vpp", "2", "--format", "json"]).stdout
    )
    api = ppdsl.check("zbv", pp=4, microbatches=8, vpp=2).to_dict()
    assert api == cli


def test_a_wrong_schedule_comes_back_as_diagnostics_not_an_exception():
    result = ppdsl.check("1f1b", pp=4, microbatches=2)
    assert not result.valid and result.makespan is None and result.ranks == []
    assert [d.code for d in result.diagnostics] == ["S100"]
    assert result.exit_code == 1
    broken = ppdsl.check("no/such/file.sched", pp=2, microbatches=2)
    assert [d.code for d in broken.diagnostics] == ["E000"] and broken.exit_code == 2


def test_names_paths_and_loaded_schedules_are_the_same_schedule():
    by_name = ppdsl.check("zbh1", pp=4, microbatches=8)
    by_path = ppdsl.check(LIBRARY / "zbh1.sched", pp=4, microbatches=8)
    by_defn = ppdsl.check(ppdsl.load("zbh1"), pp=4, microbatches=8)
    assert by_name.makespan == by_path.makespan == by_defn.makespan
    assert by_name.expansion.jobs == by_path.expansion.jobs == by_defn.expansion.jobs


def test_costs_as_pairs_or_a_cost_file(tmp_path):
    pairs = ppdsl.simulate("fthenb", pp=2, microbatches=3, costs={"forward": 2, "backward": 3, "latency": 0.5})
    cost_file = tmp_path / "costs.json"
    cost_file.write_text(json.dumps({"unit": "s", "costs": {"forward": 2, "backward": 3}, "latency": 0.5}))
    from_file = ppdsl.simulate("fthenb", pp=2, microbatches=3, costs=cost_file)
    # FThenB with latency L: the forwards cross p - 1 links, then the backwards come back across them
    p, m, f, b, lat = 2, 3, 2, 3, 0.5
    expected = (m + p - 1) * (f + b) + 2 * (p - 1) * lat
    assert pairs.makespan == from_file.makespan == pytest.approx(expected)
    assert len(pairs.transfers) == 2 * m * (p - 1)


def test_expand_and_compile_say_the_same_order():
    import types

    exp = ppdsl.expand("interleaved1f1b", pp=2, microbatches=4, vpp=2)
    module = types.ModuleType("plan")
    exec(ppdsl.compile("interleaved1f1b"), module.__dict__)
    for rank in range(2):
        assert module.job_list(rank, 2, 2, 4) == exp.job_tuples(rank)


def test_errors_outside_check_raise_diagnostic_error():
    with pytest.raises(ppdsl.DiagnosticError) as err:
        ppdsl.simulate("1f1b", pp=4, microbatches=2)
    assert [d.code for d in err.value.diagnostics] == ["S100"]
    with pytest.raises(ppdsl.DiagnosticError):
        ppdsl.compile("1f1b", pp=4)  # sizes come in pairs
    with pytest.raises(ppdsl.DiagnosticError) as err:
        ppdsl.expand("1f1b", pp=2, microbatches=2, costs={"fwd": 1})
    assert err.value.diagnostics[0].code == "E007"


def test_a_scenario_is_what_the_functions_evaluate():
    spec = ppdsl.scenario("1f1b", pp=4, microbatches=8, costs={"backward": 3})
    assert isinstance(spec, ppdsl.Scenario)
    assert check(spec).makespan == ppdsl.check("1f1b", pp=4, microbatches=8, costs={"backward": 3}).makespan == 44
    assert check(spec.with_(microbatches=4)).makespan == 7 * 4


def test_synth_returns_a_checked_schedule():
    found = ppdsl.synthesize(pp=4, microbatches=8, memory_limit=4, time_limit=2)
    assert found.check.valid and found.check.makespan == found.result.makespan == 27  # (p - 1) + 3m, optimal
    assert found.result.optimal
    assert found.text.startswith('"""Synthesized by `ppdsl synth`')
    with pytest.raises(ppdsl.DiagnosticError) as err:
        ppdsl.synthesize(pp=4, microbatches=8, vpp=2, placement="vshape", memory_limit=1)
    assert err.value.diagnostics[0].code == "S114"


def test_synth_periodic_is_one_file_for_every_number_of_microbatches(tmp_path):
    found = ppdsl.synthesize(pp=4, microbatches=8, vpp=2, placement="vshape", memory_limit=4, periodic=True)
    path = tmp_path / "vmin.sched"
    path.write_text(found.text)
    # half of ZB-V's 8 activations; each micro-batch adds the busiest rank's work per micro-batch (6)
    assert [ppdsl.check(path, pp=4, microbatches=m, vpp=2).makespan for m in (8, 9, 10)] == [59, 65, 71]


@pytest.mark.parametrize(
    "call, wrong, right",
    [
        (lambda: ppdsl.check("1f1b", pp=4, microbatch=8), "microbatch", "microbatches"),
        (lambda: ppdsl.expand("1f1b", pp=4, microbatches=8, vp=2), "vp", "vpp"),
        (lambda: ppdsl.simulate("1f1b", pp=4, microbatches=8, cost={"forward": 1}), "cost", "costs"),
        (lambda: ppdsl.compile("1f1b", literall=True), "literall", "literal"),
        (lambda: ppdsl.scenario("1f1b", pp=4, microbatches=8, memory_limt=4), "memory_limt", "memory_limit"),
        (lambda: ppdsl.synthesize(pp=4, microbatches=8, memory_limits=4), "memory_limits", "memory_limit"),
    ],
)
def test_a_mistyped_keyword_is_e007_with_the_name_to_write(call, wrong, right):
    """Every API function answers a keyword it does not take as `ppdsl.run` and the command line do: E007 with
    the close name, shown in the traceback's own line (`str()`), not Python's `unexpected keyword argument`."""
    with pytest.raises(ppdsl.DiagnosticError) as err:
        call()
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.code == "E007" and f"`{wrong}`" in diagnostic.message
    assert f"did you mean `{right}`?" in diagnostic.help
    assert f"did you mean `{right}`?" in str(err.value) and str(err.value).startswith("error[E007]")
