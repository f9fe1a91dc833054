"""The whole schedule with memory actions in CP-SAT (`ppdsl synth --exact --memory-actions`, issue 18): at tiny
sizes its optimum is the optimum over every order and every choice of actions, timed by the checker's execution
(`Evaluator`), found here by enumerating them all."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from ppdsl.analysis.memory import MemoryActions
from ppdsl.plan.kinds import BACKWARD, FORWARD
from ppdsl.synth import SynthRequest, action_search, synthesize_file
from ppdsl.synth.exact_actions import model_is_exact, solve_with_actions
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator

from enumerated_orders import fastest, interleavings

pytest.importorskip("ortools")

BOTH = ("recompute", "offload")


def _rank_orders(problem, rank: int, allowed: tuple[str, ...]) -> list[list]:
    """Every order of a rank's jobs (whole backwards) under every choice of actions per micro-batch."""
    a = MemoryActions.of(problem.expansion)
    (s,) = problem.stages_of[rank]
    options = {"keep": lambda mb: [(FORWARD, s, mb), (BACKWARD, s, mb)]}
    if "recompute" in allowed:
        options["recompute"] = lambda mb: [(FORWARD, s, mb), (a.recompute, s, mb), (BACKWARD, s, mb)]
    if "offload" in allowed:
        options["offload"] = lambda mb: [
            (FORWARD, s, mb),
            (a.offload, s, mb),
            (a.reload, s, mb),
            (BACKWARD, s, mb),
        ]
    out = []
    for choice in itertools.product(options.values(), repeat=problem.microbatches):
        out.extend(interleavings([make(mb) for mb, make in enumerate(choice)]))
    return out


def _brute_force(problem, allowed: tuple[str, ...]) -> float:
    return fastest(problem, [_rank_orders(problem, r, allowed) for r in range(problem.pp)])


def _problem(limit: float, host_limit: float | None = None, **costs: float):
    return build_problem(
        2, 2, memory_limit=limit, split="no", memory_actions=True, host_limit=host_limit, costs=costs or None
    )


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("limit", "host_limit", "allowed", "costs"),
    [
        (1.2, None, BOTH, {}),  # one micro-batch's activation and a bit: two in flight only with an action
        (1.2, None, ("offload",), {}),
        (1.2, 1.0, ("offload",), {}),  # the host holds one activation: the optimum above no longer fits (9 -> 10)
        (1.2, None, ("offload",), {"offload": 1.5, "reload": 1.5}),  # copies slower than a forward
        (1.0, None, ("recompute",), {}),  # a recomputed forward keeps a tenth: room for one more
    ],
)
def test_the_model_s_optimum_is_the_optimum_over_every_order_and_action(limit, host_limit, allowed, costs):
    problem = _problem(limit, host_limit, **costs)
    assert model_is_exact(problem)
    solution, _ = solve_with_actions(problem, allowed, 20.0)
    assert solution.status == "OPTIMAL"
    ev = Evaluator(problem).evaluate(solution.orders)
    # the extracted orders, re-timed by the checker, take the model's time and keep every limit
    assert ev.feasible and ev.makespan == pytest.approx(solution.bound)
    assert ev.makespan == pytest.approx(_brute_force(problem, allowed))
    if host_limit is not None:
        assert ev.host_peak <= host_limit + 1e-9


def test_the_exact_result_is_no_slower_than_the_actions_search_and_its_file_checks_as_searched():
    request = SynthRequest(pp=2, microbatches=3, memory_limit=1.2, split="no", time_limit=4.0, memory_actions=BOTH)
    found = synthesize_file(replace(request, exact=True))
    heuristic = action_search(request, found.result.problem, 2.0)
    assert found.result.makespan <= heuristic.makespan + 1e-9
    assert found.result.optimal and found.result.makespan == pytest.approx(found.result.lower_bound)
    assert found.check.valid and found.check.makespan == pytest.approx(found.result.makespan)
    assert max(found.result.evaluation.peaks) <= 1.2 + 1e-9


def test_without_exact_a_small_problem_s_actions_are_polished_in_cp_sat():
    # pp 2, 4 micro-batches within 1.2: the actions search alone stops above the bound (17 against 15 here)
    request = SynthRequest(pp=2, microbatches=4, memory_limit=1.2, split="no", time_limit=2.0, memory_actions=BOTH)
    found = synthesize_file(request)
    heuristic = action_search(request, found.result.problem, 1.5)
    assert found.result.makespan <= heuristic.makespan + 1e-9
    assert found.result.optimal and found.result.makespan == pytest.approx(found.result.lower_bound)
    assert found.check.valid and found.check.makespan == pytest.approx(found.result.makespan)


def test_cp_sat_polishes_an_actions_search_that_stops_above_the_bound(monkeypatch):
    """Whether the actions search reaches the bound by itself depends on its time (a loaded machine gives it less):
    here it is made to stop at the one-micro-batch-at-a-time schedule, so CP-SAT must take it to the optimum."""
    import ppdsl.synth.search as search
    from ppdsl.synth.bounds import memory_lower_bound
    from ppdsl.synth.schedule import Evaluator
    from ppdsl.synth.search import SynthResult

    request = SynthRequest(pp=2, microbatches=4, memory_limit=1.2, split="no", time_limit=2.0, memory_actions=BOTH)

    def one_at_a_time(request, problem, seconds, progress=None, clock=None):
        orders = problem.sequential()
        bound = memory_lower_bound(problem, request.memory_actions)
        return SynthResult(problem, orders, Evaluator(problem).evaluate(orders), bound, False, origin="one at a time")

    monkeypatch.setattr(search, "action_search", one_at_a_time)
    found = synthesize_file(request)
    start = one_at_a_time(request, found.result.problem, 0.0)
    assert start.makespan > start.lower_bound + 1e-9  # (the start leaves CP-SAT something to do)
    assert found.result.origin.startswith("CP-SAT with actions")
    assert found.result.optimal and found.result.makespan == pytest.approx(found.result.lower_bound)
    assert found.check.valid and found.check.makespan == pytest.approx(found.result.makespan)


@pytest.mark.parametrize(
    "sizes",
    [
        {"pp": 2, "microbatches": 3, "memory_limit": 1.2, "split": "yes"},
        {"pp": 2, "microbatches": 3, "memory_limit": 1.5, "split": "auto", "costs": {"latency": 0.25}},
        {"pp": 2, "microbatches": 2, "vpp": 2, "memory_limit": 1.6, "split": "no"},
        {"pp": 2, "microbatches": 2, "vpp": 2, "placement": "vshape", "memory_limit": 2.2, "split": "yes"},
        {"pp": 3, "microbatches": 3, "memory_limit": 1.3, "split": "no", "costs": {"offload": 0.3, "reload": 0.7}},
    ],
)
def test_the_checker_times_the_model_s_orders_as_the_model_does(sizes):
    # split backwards, links, two chunks looped and in a V, unequal copies: the extracted orders re-timed by the
    # checker's execution take exactly the model's makespan and keep the limit (the anchoring makes it exact)
    problem = build_problem(memory_actions=True, **sizes)
    assert model_is_exact(problem)
    solution, _ = solve_with_actions(problem, BOTH, 10.0)
    assert solution.status == "OPTIMAL"
    ev = Evaluator(problem).evaluate(solution.orders)
    assert ev.feasible and ev.makespan == pytest.approx(solution.bound)
