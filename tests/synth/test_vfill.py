"""The V fill-first seeds (synth/vfill.py): complete, feasible within the limit, timed by the checker's rule, and
a start that lets the search go further than from the backward-first policies alone."""

from __future__ import annotations

import itertools

import pytest

from ppdsl.synth import cpsat, periodic, search
from ppdsl.synth.greedy import list_schedule
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator, complete
from ppdsl.synth.vfill import FillScheduler, closed_form_caps, fill_seeds, staircase_caps, staircase_policies

UNIFORM = {"forward": 1, "backward": 2, "backward_b": 1, "backward_w": 1}
SKEWED = {"forward": 1, "backward": 2.2, "backward_b": 1.5, "backward_w": 0.7}
HETERO = {**SKEWED, "latency": 0.1}

CASES = [  # (pp, m, costs, memory limit in chunk activations)
    (2, 4, UNIFORM, 2),
    (4, 8, UNIFORM, 4),
    (4, 8, HETERO, 6),
    (6, 12, HETERO, 9),
    (8, 16, HETERO, 12),
    (8, 32, UNIFORM, 8),
    (8, 16, UNIFORM, None),
]
each_case = pytest.mark.parametrize("case", CASES, ids=lambda c: f"pp{c[0]}-m{c[1]}-limit{c[3]}")


def _v_problem(case):
    """The case's problem: two chunks in a V, split backwards."""
    pp, m, costs, limit = case
    return build_problem(pp, m, 2, "vshape", costs, memory_limit=limit, split="yes")


@pytest.mark.e2e
@each_case
def test_fill_seeds_are_complete_and_within_the_limit(case):
    limit = case[3]
    problem = _v_problem(case)
    seeds = fill_seeds(problem)
    assert seeds
    evaluator = Evaluator(problem)
    for name, orders in seeds:
        assert complete(problem, orders), name
        ev = evaluator.evaluate(orders)
        assert ev.feasible, name
        if limit is not None:
            assert max(ev.peaks) <= limit + 1e-9, name


def test_fill_schedule_times_are_the_checkers():
    problem = build_problem(8, 16, 2, "vshape", HETERO, memory_limit=12, split="yes")
    scheduler = FillScheduler(problem, closed_form_caps(problem), slack=1, extra=2)
    orders = scheduler.run()
    ev = Evaluator(problem).evaluate(orders)
    start, _ = scheduler.times()
    for mine, checked in zip(start, ev.start, strict=True):
        assert mine == pytest.approx(checked[: len(mine)])  # (the optimizer runs last)


def test_fill_seeds_apply_to_v_shapes_only():
    looped = build_problem(4, 8, 2, "looped", UNIFORM, memory_limit=8, split="yes")
    assert fill_seeds(looped) == []


@pytest.mark.e2e
@pytest.mark.skipif(not cpsat.available(), reason="needs OR-Tools (CP-SAT)")
def test_fill_first_start_is_no_worse_and_here_better(monkeypatch):
    problem = build_problem(6, 12, 2, "vshape", SKEWED, memory_limit=8, split="yes")
    # (without the periodic step's retry from a hand-built tiling, tests/synth/test_modulo.py: at 1 s the block
    # it finds here takes the budget the fill-first start needs to show what it adds)
    monkeypatch.setattr(periodic, "rotation_block", lambda *args: (None, False, 0))
    # (nor the staircase policies, which reach here what the fill-first start adds to the other policies)
    monkeypatch.setattr(search, "staircase_policies", lambda problem: [])
    with_fill = search.synthesize(problem, time_limit=1.0)
    monkeypatch.setattr(search, "fill_seeds", lambda problem: [])
    without = search.synthesize(problem, time_limit=1.0)
    assert with_fill.evaluation.feasible and max(with_fill.evaluation.peaks) <= 8 + 1e-9
    assert with_fill.makespan < without.makespan - 1e-6


@each_case
def test_staircase_caps_fall_by_at_most_one_per_rank(case):
    problem = _v_problem(case)
    pp, m = problem.pp, problem.microbatches
    policies = staircase_policies(problem)
    assert policies
    for policy in policies:
        caps = policy.inflight
        assert len(caps) == pp and all(1 <= c <= m for c in caps)
        assert all(0 <= a - b <= 1 for a, b in itertools.pairwise(caps)), caps
    assert staircase_caps(problem, 0, 0) == tuple(sorted(staircase_caps(problem, 0, 0), reverse=True))
    evaluator = Evaluator(problem)
    for policy in policies:
        orders = list_schedule(problem, policy)
        if orders is not None:  # (a tight cap may deadlock; the search drops that policy)
            ev = evaluator.evaluate(orders)
            assert complete(problem, orders) and ev.feasible, policy.label()


def test_staircase_policies_apply_to_v_shapes_only():
    looped = build_problem(4, 8, 2, "looped", UNIFORM, memory_limit=8, split="yes")
    assert staircase_policies(looped) == []


def _best_list_schedule(problem, policies) -> float:
    evaluator, best = Evaluator(problem), float("inf")
    for policy in policies:
        orders = list_schedule(problem, policy)
        if orders is not None and (ev := evaluator.evaluate(orders)).feasible:
            best = min(best, ev.makespan)
    return best


@pytest.mark.e2e
@pytest.mark.skipif(not cpsat.available(), reason="needs OR-Tools (CP-SAT)")
def test_staircase_start_is_faster_than_the_portfolio_and_the_search_without_it(monkeypatch):
    # V-Half's memory at pp=6 (the first ranks must not fill up with chunk-0 activations): a staircase of
    # in-flight caps is faster as it is than every policy of the portfolio, and the search gets further with it
    problem = build_problem(6, 12, 2, "vshape", HETERO, memory_limit=8, split="yes")
    assert _best_list_schedule(problem, staircase_policies(problem)) < _best_list_schedule(
        problem, search.policies(problem)
    )
    with_stairs = search.synthesize(problem, time_limit=1.0)
    monkeypatch.setattr(search, "staircase_policies", lambda problem: [])
    without = search.synthesize(problem, time_limit=1.0)
    assert with_stairs.evaluation.feasible and max(with_stairs.evaluation.peaks) <= 8 + 1e-9
    assert with_stairs.makespan < without.makespan - 1e-6
