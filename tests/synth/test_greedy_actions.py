"""List scheduling that takes memory actions while it schedules (issue 18): at a limit a rank recomputes or
offloads a held micro-batch instead of waiting, and its schedules are candidates of `--memory-actions`."""

from __future__ import annotations

import pytest

from ppdsl.analysis.memory import MemoryActions
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.plan.kinds import FORWARD
from ppdsl.synth import SynthRequest, build, synthesize_file
from ppdsl.synth.actions import ActionEngine, Placement
from ppdsl.synth.greedy import ListScheduler, Policy
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator, complete
from ppdsl.synth.search import action_policies, policies

BOTH = ("recompute", "offload")


def _best(problem, portfolio):
    """The fastest schedule within the limits over a portfolio, as (makespan, orders), or None."""
    timer, best = Evaluator(problem), None
    for policy in portfolio:
        orders = ListScheduler(problem, policy).run()
        if orders is None:
            continue
        ev = timer.evaluate(orders)
        if ev.feasible and (best is None or ev.makespan < best[0]):
            best = (ev.makespan, orders)
    return best


def _compute_only(orders, actions: MemoryActions):
    return [[job for job in row if job[0] != actions.recompute and not actions.copies(job[0])] for row in orders]


def test_at_a_tight_limit_acting_beats_every_order_the_plain_portfolio_finds():
    problem = build_problem(4, 8, memory_limit=2.0, memory_actions=True)
    plain = _best(problem, policies(problem))
    acting = _best(problem, action_policies(problem, BOTH))
    assert plain is not None and acting is not None
    assert acting[0] < plain[0]  # (29 against 41 at these sizes)
    actions = MemoryActions.of(problem.expansion)
    assert complete(problem, _compute_only(acting[1], actions))
    assert any(job[0] == actions.offload for row in acting[1] for job in row)


def test_below_what_any_order_holds_acting_still_finds_a_schedule():
    # two chunks: any order holds both chunks' activations of one micro-batch (2) on a rank at once
    request = SynthRequest(pp=4, microbatches=8, vpp=2, memory_limit=1.5, time_limit=1.0)
    with pytest.raises(DiagnosticError) as err:
        build(request)
    assert err.value.diagnostics[0].code == "S114"
    problem = build_problem(4, 8, 2, memory_limit=1.5, memory_actions=True)
    acting = _best(problem, action_policies(problem, BOTH))
    assert acting is not None
    actions = MemoryActions.of(problem.expansion)
    assert complete(problem, _compute_only(acting[1], actions))
    ev = Evaluator(problem).evaluate(acting[1])
    assert ev.feasible and max(ev.peaks) <= 1.5 + 1e-9


def test_each_action_respects_the_order_rules():
    """Recompute after its forward and before its backward; offload after its forward; reload after its
    offload and before its backward; each once."""
    problem = build_problem(4, 8, 2, memory_limit=3.0, memory_actions=True)
    a = MemoryActions.of(problem.expansion)
    taken = 0
    for policy in action_policies(problem, BOTH)[:24]:
        orders = ListScheduler(problem, policy).run()
        if orders is None:
            continue
        for row in orders:
            at = {job: i for i, job in enumerate(row)}
            assert len(at) == len(row)
            for (t, s, mb), i in at.items():
                backward = at.get((1, s, mb), at.get((2, s, mb)))
                if t == a.recompute:
                    assert at[(FORWARD, s, mb)] < i < backward
                    taken += 1
                elif t == a.offload:
                    assert at[(FORWARD, s, mb)] < i < at[(a.reload, s, mb)] < backward
                    taken += 1
    assert taken > 0


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("vpp", "placement", "below"),
    [(1, "looped", 33), (2, "vshape", 101)],  # what --memory-actions found before list scheduling took actions
)
def test_the_list_schedulers_schedule_with_actions_is_what_synth_writes_and_the_checker_proves(vpp, placement, below):
    request = SynthRequest(
        pp=4, microbatches=8, vpp=vpp, placement=placement, memory_limit=2.0, time_limit=1.0, memory_actions=BOTH
    )
    found = synthesize_file(request)  # (verifies the written file with the checker, else E042)
    assert found.result.origin.startswith("list scheduling")
    assert found.check.valid and found.check.makespan == pytest.approx(found.result.makespan)
    assert found.result.makespan < below
    assert "offload" in found.text and "reload" in found.text


def test_unpack_gives_back_the_placement_materialize_rebuilds():
    problem = build_problem(4, 8, 2, memory_limit=3.0, memory_actions=True)
    engine = ActionEngine(problem, BOTH, 60)
    rebuilt = 0
    for policy in action_policies(problem, BOTH)[:24]:
        orders = ListScheduler(problem, policy).run()
        if orders is None:
            continue
        base, plan = engine.unpack(orders)
        assert complete(problem, base)
        if engine.materialize(base, plan) == orders:
            rebuilt += 1
    assert rebuilt > 0


def test_an_offload_later_than_right_after_its_forward_is_placed_by_its_lag():
    problem = build_problem(2, 2, memory_actions=True)
    engine = ActionEngine(problem, BOTH, 60)
    base = ListScheduler(problem, Policy()).run()
    assert base[0][:2] == [(FORWARD, 0, 0), (FORWARD, 0, 1)]  # (1F1B's warm-up: a job to offload across)
    plan = Placement(action={(0, 0): "offload"}, lag={(0, 0): 1})
    orders = engine.materialize(base, plan)
    a = engine.types
    row = orders[0]
    assert row.index((a.offload, 0, 0)) == row.index((FORWARD, 0, 0)) + 2  # after the next compute job
    again_base, again = engine.unpack(orders)
    assert again_base == base and again.lag == {(0, 0): 1} and engine.materialize(again_base, again) == orders


def test_a_policy_with_actions_on_a_problem_without_them_is_refused():
    problem = build_problem(2, 2)
    with pytest.raises(ValueError, match="memory_actions=True"):
        ListScheduler(problem, Policy(actions=BOTH))
