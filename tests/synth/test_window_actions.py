"""LNS windows over schedules with memory actions (issue 18, 2: every engine takes the actions through the one
timing rule): a window re-solved in CP-SAT with its recomputes, offloads and reloads, timed as the checker's
execution times them, so that sizes too large for the whole model with actions get CP-SAT repair too."""

from __future__ import annotations

import pytest

import ppdsl
from ppdsl.analysis.memory import MemoryActions
from ppdsl.plan.kinds import BACKWARD, FORWARD
from ppdsl.synth import ACTIONS_CP_SAT_MAX_JOBS, SynthRequest, synthesize_file
from ppdsl.synth.actions import OFFLOAD, ActionEngine, Placement
from ppdsl.synth.exact_actions import model_is_exact
from ppdsl.synth.greedy import Policy, list_schedule
from ppdsl.synth.lns import lns
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator
from ppdsl.synth.window_actions import ActionContext, ActionStatics, ActionWindowModel
from ppdsl.synth.writer import Header, sched_text

pytest.importorskip("ortools")

BOTH = ("recompute", "offload")


def _one_f_one_b(pp: int, m: int) -> list[list]:
    """1F1B's compute orders (one stage per rank, whole backwards)."""
    orders = []
    for r in range(pp):
        warm = min(pp - r, m)
        order = [(FORWARD, r, mb) for mb in range(warm)]
        for mb in range(m):
            order.append((BACKWARD, r, mb))
            if warm + mb < m:
                order.append((FORWARD, r, warm + mb))
        orders.append(order)
    return orders


def test_a_window_repair_moves_late_reloads_earlier_and_the_result_checks_as_searched(tmp_path):
    # 1F1B at pp 2 holds two activations on rank 0: within 1.5 every micro-batch of stage 0 is offloaded. Each
    # reload placed right before its backward (the rank reaches it only then) makes the backward wait for the copy
    problem = build_problem(2, 6, memory_limit=1.5, split="no", memory_actions=True)
    engine = ActionEngine(problem, ("offload",), deadline=float("inf"))
    plan = Placement({(0, mb): OFFLOAD for mb in range(6)}, lead={(0, mb): 0 for mb in range(6)})
    late = engine.materialize(_one_f_one_b(2, 6), plan)
    a = MemoryActions.of(problem.expansion)
    assert all(order[order.index((a.reload, 0, mb)) + 1] == (BACKWARD, 0, mb) for order in late[:1] for mb in range(6))
    timer = Evaluator(problem)
    bad = timer.evaluate(late)
    assert bad.feasible
    orders, ev, _ = lns(timer, late, 5.0, window=20, memory_actions=())
    assert ev.feasible and ev.makespan < bad.makespan - 1e-9
    assert max(ev.peaks) <= 1.5 + 1e-9
    # the same actions, only where they run changed
    assert sorted(job for row in orders for job in row) == sorted(job for row in late for job in row)
    text = sched_text(problem, orders, Header("repaired", [], [], [], "", ""))
    path = tmp_path / "repaired.sched"
    path.write_text(text, encoding="utf-8")
    checked = ppdsl.check(path, pp=2, microbatches=6, memory_limit=1.5)
    assert checked.valid, checked.diagnostics
    assert checked.makespan == pytest.approx(ev.makespan)


def test_a_recompute_far_from_its_backward_is_moved_next_to_it():
    # each recompute of stage 0 right after its forward (as far from its backward as it goes) delays the forwards
    # after it, which the next stages wait for (26 here); the repair moves them later (24)
    problem = build_problem(3, 6, memory_limit=3.0, split="no", memory_actions=True)
    engine = ActionEngine(problem, ("recompute",), deadline=float("inf"))
    keys = [(0, mb) for mb in range(6)]
    plan = Placement(dict.fromkeys(keys, "recompute"), hoist=dict.fromkeys(keys, 99))
    early = engine.materialize(_one_f_one_b(3, 6), plan)
    a = MemoryActions.of(problem.expansion)
    assert all(early[s][early[s].index((FORWARD, s, mb)) + 1] == (a.recompute, s, mb) for s, mb in keys)
    timer = Evaluator(problem)
    bad = timer.evaluate(early)
    assert bad.feasible
    orders, ev, _ = lns(timer, early, 5.0, window=20, memory_actions=())
    assert ev.feasible and ev.makespan < bad.makespan - 1e-9
    moved = [(s, mb) for s, mb in keys if orders[s][orders[s].index((FORWARD, s, mb)) + 1] != (a.recompute, s, mb)]
    assert moved


@pytest.mark.parametrize(
    "sizes",
    [
        {"pp": 3, "microbatches": 6, "memory_limit": 1.5, "split": "yes"},
        {"pp": 3, "microbatches": 6, "memory_limit": 2.0, "split": "auto", "costs": {"latency": 0.25}},
        {"pp": 2, "microbatches": 4, "vpp": 2, "placement": "vshape", "memory_limit": 2.2, "split": "yes"},
        {"pp": 4, "microbatches": 8, "memory_limit": 1.5, "split": "no", "costs": {"offload": 0.3, "reload": 0.7}},
    ],
)
@pytest.mark.parametrize("allowed", [(), BOTH])
def test_the_checker_times_a_repaired_window_as_the_window_model_does(sizes, allowed):
    # split backwards, links, a V, unequal copies: every window of a list schedule with actions is re-solved, with
    # its actions kept or chosen anew; the orders read off each solution, re-timed by the checker's execution, run
    # every free job at the model's times and take the model's makespan (the anchoring makes the window exact)
    problem = build_problem(memory_actions=True, **sizes)
    assert model_is_exact(problem)
    orders = list_schedule(problem, Policy(split=problem.split != "no", actions=BOTH))
    assert orders is not None
    timer = Evaluator(problem)
    ev = timer.evaluate(orders)
    a = MemoryActions.of(problem.expansion)
    assert ev.feasible and any(job[0] in (a.recompute, a.offload) for row in orders for job in row)
    statics = ActionStatics(problem, orders, allowed)
    ctx = ActionContext(statics, orders, ev)
    starts = sorted(x for row in ctx.start for x in row)
    solved, chosen = 0, 0
    for lo in range(0, len(starts), 6):
        t_lo = starts[lo] / statics.k
        t_hi = starts[lo + 12] / statics.k if lo + 12 < len(starts) else float("inf")
        model = ActionWindowModel(ctx, *ctx.cut(t_lo, t_hi))
        assert model.valid and model.estimate == ctx.makespan  # the model's makespan of the schedule as it is
        found, status = model.solve(1.0)
        assert status == "OPTIMAL"
        repaired = timer.evaluate(found)
        where = {job: (r, i) for r, row in enumerate(found) for i, job in enumerate(row)}
        for job, (st, en) in model.times.items():
            r, i = where[job]
            assert (round(repaired.start[r][i] * statics.k), round(repaired.end[r][i] * statics.k)) == (st, en)
        assert repaired.makespan == pytest.approx(model.value)
        solved += 1
        chosen += len(model.options)
    assert solved >= 3
    assert (chosen > 0) == bool(allowed)  # (stage, micro-batch)s wholly inside a window chose their action


@pytest.mark.e2e
def test_above_the_whole_model_s_size_the_actions_search_is_repaired_by_windows():
    # pp 4, 16 micro-batches (192 jobs): the whole model with actions is not built, the windows run instead, and
    # what they keep is what the written file checks at
    request = SynthRequest(pp=4, microbatches=16, memory_limit=2, memory_actions=BOTH, time_limit=3.0)
    found = synthesize_file(request)
    assert found.result.problem.jobs_per_step > ACTIONS_CP_SAT_MAX_JOBS
    assert found.result.cp_sat == "windows"
    assert found.check.valid and found.check.makespan == pytest.approx(found.result.makespan)
