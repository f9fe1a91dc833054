"""`ppdsl synth --dp D`: each chunk's `reduce_grads` placed right after its last gradient job, the search scoring
orders with the reductions timed, and the written file proven by `check --dp D`."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.check import check
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_dir
from ppdsl.synth import SynthRequest, build
from ppdsl.synth.bounds import lower_bound
from ppdsl.synth.problem import build_problem
from ppdsl.synth.reductions import hide_reductions
from ppdsl.synth.schedule import GRADIENTS, Evaluator, complete, with_reductions
from ppdsl.synth.seeds import library_seeds
from ppdsl.synth.writer import Header, in_order, sched_text

runner = CliRunner()


def exposed(result) -> float:
    return max(r.exposed_collective or 0.0 for r in result.execution.ranks)


def test_the_cli_writes_reductions_that_check_at_its_dp(tmp_path):
    out = tmp_path / "found.sched"
    args = ["synth", "--pp", "4", "-m", "8", "--vpp", "2", "--dp", "2", "--time-limit", "1", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert "reduce_grads(chunk = 0)" in text and "reduce_grads(chunk = 1)" in text
    assert "--vpp 2 --dp 2" in text  # (the docstring's check command)
    checked = runner.invoke(app, ["check", str(out), "--pp", "4", "-m", "8", "--vpp", "2", "--dp", "2"])
    assert checked.exit_code == 0 and "dp=2" in checked.stdout, checked.stderr
    # (without its degree the file's reductions reduce with no one: it still checks, at dp 1)
    assert runner.invoke(app, ["check", str(out), "--pp", "4", "-m", "8", "--vpp", "2"]).exit_code == 0


def test_the_api_takes_dp_and_the_makespan_includes_the_reductions():
    outcome = ppdsl.synthesize(pp=4, microbatches=8, dp=2, time_limit=1)
    assert outcome.check.valid and outcome.check.makespan == pytest.approx(outcome.result.makespan)
    ranks = outcome.check.execution.ranks
    assert all(r.collective == pytest.approx(1.0) for r in ranks)  # one chunk, `cost reduce_grads` 1
    alone = ppdsl.synthesize(pp=4, microbatches=8, time_limit=1)
    assert "reduce_grads" not in alone.text
    # one chunk: the reduction follows the rank's last job, and the optimizer waits for it
    assert outcome.result.makespan >= alone.result.makespan + 1 - 1e-9


def test_reductions_go_right_after_each_stages_last_gradient_job():
    problem = build_problem(4, 8, 2, dp=2)
    orders = problem.sequential()
    placed = with_reductions(problem, orders)
    reduce = problem.reduce_type
    for order in placed:
        for i, (t, s, _) in enumerate(order):
            if t == reduce:
                before = order[i - 1]
                assert before[1] == s and before[0] in GRADIENTS
                assert not any(u in GRADIENTS and q == s for u, q, _ in order[i + 1 :])
        assert sum(t == reduce for t, _, _ in order) == 2
    assert with_reductions(build_problem(4, 8, 2), orders) is orders  # dp 1: nothing placed


def test_the_evaluation_times_the_reductions_as_check_does(tmp_path):
    problem = build_problem(4, 8, 2, dp=4)
    ev = Evaluator(problem).evaluate(problem.sequential())
    plain = Evaluator(build_problem(4, 8, 2)).evaluate(problem.sequential())
    assert ev.feasible and len(ev.start[0]) == len(plain.start[0])  # (the orders' own jobs, the optimizer last)
    assert ev.makespan > plain.makespan


def test_the_bound_counts_the_last_reduction():
    assert lower_bound(build_problem(4, 8, 1, dp=2)) == pytest.approx(lower_bound(build_problem(4, 8, 1)) + 1)


def test_synth_hides_a_reduction_the_library_leaves_at_the_end(tmp_path):
    text = (library_dir() / "interleaved1f1b.sched").read_text()
    text = re.sub(r"^\s*reduce_grads\b.*\n", "", text, flags=re.MULTILINE)  # the library's own, after each chunk
    end = text.replace("\n    optimizer\n", "\n    for c in 0 .. vpp { reduce_grads(chunk = c) }\n    optimizer\n")
    assert end != text
    path = tmp_path / "end.sched"
    path.write_text(end)
    library = check(Scenario(str(path), 4, 8, 2, dp=2))
    assert library.valid
    outcome = ppdsl.synthesize(pp=4, microbatches=8, vpp=2, dp=2, time_limit=1)
    assert exposed(outcome.check) <= exposed(library) - 1 + 1e-9  # chunk 1's reduction under chunk 0's backwards
    assert outcome.check.makespan <= library.makespan


def test_a_periodic_schedule_reduces_at_every_count(tmp_path):
    outcome = ppdsl.synthesize(pp=4, microbatches=8, dp=2, periodic=True, time_limit=1)
    path = tmp_path / "periodic.sched"
    path.write_text(outcome.text)
    assert "reduce_grads" in outcome.text
    for m in (8, 13):
        result = check(Scenario(str(path), 4, m, 1, dp=2))
        assert result.valid, [d.message for d in result.diagnostics]


def test_memory_actions_at_dp_above_1_are_refused():
    with pytest.raises(DiagnosticError) as error:
        build(SynthRequest(pp=4, microbatches=8, dp=2, memory_actions=("recompute",)))
    assert error.value.diagnostics[0].code == "E079"


def test_moving_trailing_weight_gradients_hides_a_v_s_reductions_at_no_cost():
    problem = build_problem(4, 8, 2, "vshape", costs=CostSpec({"reduce_grads": 4.5}), dp=4)
    zbv = dict(library_seeds(problem))["library ZBV"]
    evaluator = Evaluator(problem)
    before = evaluator.evaluate(zbv)
    orders, after = hide_reductions(problem, evaluator, zbv, before)
    assert complete(problem, orders) and after.feasible
    assert after.makespan <= before.makespan + 1e-9
    assert max(after.exposed) < max(before.exposed)  # (ZB-V defers chunk 1's W's to the tail: both exposed)
    assert after.exposed == evaluator.evaluate(orders).exposed


def test_a_table_names_its_reductions(tmp_path):
    problem = build_problem(2, 3, 2, dp=2)
    m = problem.microbatches
    orders = [[(t, s, m - 1 - mb) for t, s, mb in order] for order in problem.sequential()]  # (last mb first)
    assert not in_order(orders)
    header = Header("t", [], [], [], "ppdsl synth ...", "ppdsl check ...")
    text = sched_text(problem, orders, header)
    assert "table {" in text and "reduce_grads0.c1" in text
    path = tmp_path / "table.sched"
    path.write_text(text)
    result = check(Scenario(str(path), 2, m, 2, dp=2))
    assert result.valid, [d.message for d in result.diagnostics]
    assert result.makespan == pytest.approx(Evaluator(problem).evaluate(orders).makespan)
