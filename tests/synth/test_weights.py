"""Re-placing a schedule's W's (synth/weights.py): the forwards and I's keep their order, every W keeps its order
and follows its I, the result is complete, within the limit and timed by the checker's rule; on the library's
ZB-V order with a link latency it is faster, and the search gets further with it."""

from __future__ import annotations

import pytest

from ppdsl.plan.kinds import BACKWARD_W
from ppdsl.synth import search
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator, complete
from ppdsl.synth.seeds import library_seeds
from ppdsl.synth.vfill import FillScheduler, closed_form_caps
from ppdsl.synth.weights import WeightPlacer, place_weights, placements

HETERO = {"forward": 1, "backward": 2.2, "backward_b": 1.5, "backward_w": 0.7, "latency": 0.1}
UNIFORM = {"forward": 1, "backward": 2, "backward_b": 1, "backward_w": 1}


def zbv(problem):
    return next(orders for name, orders in library_seeds(problem) if name == "library ZBV")


def test_placement_keeps_every_order_but_the_ws_positions():
    problem = build_problem(6, 12, 2, "vshape", HETERO, memory_limit=12, split="yes")
    orders = zbv(problem)
    placed = place_weights(problem, orders)
    assert placed is not None and placed != orders and complete(problem, placed)
    for before, after in zip(orders, placed, strict=True):
        assert [j for j in after if j[0] != BACKWARD_W] == [j for j in before if j[0] != BACKWARD_W]
        assert [j for j in after if j[0] == BACKWARD_W] == [j for j in before if j[0] == BACKWARD_W]
    ev = Evaluator(problem).evaluate(placed)
    assert ev.feasible and max(ev.peaks) <= 12 + 1e-9


@pytest.mark.parametrize("fill_unknown", [True, False])
def test_placement_times_are_the_checkers(fill_unknown):
    # a fill-first order at a tight limit, where W's also run for the memory they free
    problem = build_problem(8, 16, 2, "vshape", HETERO, memory_limit=10, split="yes")
    orders = FillScheduler(problem, closed_form_caps(problem), slack=1).run()
    placer = WeightPlacer(problem, orders, fill_unknown)
    placed = placer.run()
    assert placed is not None
    ev = Evaluator(problem).evaluate(placed)
    assert ev.feasible and max(ev.peaks) <= 10 + 1e-9
    start, _ = placer.times()
    for mine, checked in zip(start, ev.start, strict=True):
        assert mine == pytest.approx(checked[: len(mine)])  # (the optimizer runs last)


def test_placement_needs_split_backwards():
    whole = build_problem(4, 8, 2, "vshape", UNIFORM, memory_limit=8, split="no")
    assert placements(whole, whole.sequential()) == []


def test_library_zbv_with_its_ws_replaced_is_faster_with_a_latency():
    for pp, m in ((4, 8), (6, 12), (8, 16)):
        problem = build_problem(pp, m, 2, "vshape", HETERO, memory_limit=2 * pp, split="yes")
        evaluator = Evaluator(problem)
        before = evaluator.evaluate(zbv(problem)).makespan
        best = min(evaluator.evaluate(orders).makespan for _, orders in placements(problem, zbv(problem)))
        assert best < before - 1e-6, (pp, m)


@pytest.mark.e2e
def test_search_with_placement_beats_the_zbv_order_and_the_search_without_it(monkeypatch):
    # ZB-V's own memory (2pp) with F:B:W 1:1.5:0.7 and latency 0.1: the library's ZB-V order is the best start;
    # a short search does not re-place its W's by local moves
    problem = build_problem(6, 12, 2, "vshape", HETERO, memory_limit=12, split="yes")
    seeds = list(library_seeds(problem))
    library = Evaluator(problem).evaluate(zbv(problem)).makespan
    with_placement = search.synthesize(problem, time_limit=0.5, seeds=seeds)
    monkeypatch.setattr(search, "placements", lambda problem, orders: [])
    without = search.synthesize(problem, time_limit=0.5, seeds=seeds)
    assert with_placement.evaluation.feasible and max(with_placement.evaluation.peaks) <= 12 + 1e-9
    assert with_placement.makespan <= library + 1e-9
    assert with_placement.makespan < without.makespan - 1e-6
