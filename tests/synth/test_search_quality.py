"""Quality of `ppdsl synth`'s search, checked against the checker's own engine (the `Evaluator`), not itself.

(a) The window model (synth/window.py) is exact: for the schedule it is cut from, its makespan is the
    checker's, on every kind of cut (all ranks, groups of ranks) and placement; every schedule it returns
    checks, no slower than the model says.
(b) On a small window the model's optimum is the best of every re-ordering of the window, found by brute force.
(c) The large-neighbourhood search finds a schedule the greedy portfolio misses: V placement, pp=4, m=8,
    memory 4 activations (ZB-V's V-Min setting), 59, which CP-SAT proves optimal for the whole problem.
(d) Periodic blocks (synth/periodic.py) keep the memory limit they are solved for, on every placement, and
    find that optimum directly; on V with unequal costs they beat the greedy by far.
(e) The search is deterministic: the same request gives the same schedule.
"""

from __future__ import annotations

import itertools

import pytest

from ppdsl.plan.kinds import BACKWARD_W
from ppdsl.synth import cpsat, exact
from ppdsl.synth.cpsat import Statics
from ppdsl.synth.greedy import Policy, list_schedule
from ppdsl.synth.lns import COOL_DOWN_GROWTH, cool_down, groups, lns
from ppdsl.synth.periodic import periodic_schedules
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator
from ppdsl.synth.search import Search, synthesize
from ppdsl.synth.window import Context, WindowModel

pytestmark = pytest.mark.skipif(not cpsat.available(), reason="needs OR-Tools (CP-SAT)")

UNIFORM = {"forward": 1, "backward": 2, "backward_b": 1, "backward_w": 1}
HETERO = {"forward": 1, "backward": 2.2, "backward_b": 1.5, "backward_w": 0.7, "latency": 0.1}

CASES = [  # (pp, m, vpp, placement, costs, memory limit)
    (4, 8, 2, "vshape", UNIFORM, 4),
    (4, 8, 2, "vshape", HETERO, 6),
    (4, 12, 1, "looped", HETERO, 4),
    (6, 12, 1, "looped", UNIFORM, 3),
    (8, 16, 1, "looped", HETERO, 8),
]


def problem(pp, m, vpp, placement, costs, limit):
    return build_problem(pp, m, vpp, placement, costs=costs, memory_limit=limit, split="yes")


def greedy(p, top: int = 1):
    """The best schedules of the greedy portfolio: (orders, evaluation)."""
    ranked = Search(p, 1.0, 0, None).portfolio()
    return [(orders, ev) for _, _, orders, ev in ranked[:top]]


def windows(ctx: Context, size: int, step: int):
    """(first, last) cuts of about `size` jobs, on all ranks and on groups of ranks."""
    pp = len(ctx.orders)
    for ranks in [None, *groups(pp, size)]:
        starts = sorted(x for r in ranks or range(pp) for x in ctx.start[r])
        for lo in range(0, len(starts), step):
            t_lo = starts[lo] / ctx.statics.k if lo else float("-inf")
            t_hi = starts[lo + size] / ctx.statics.k if lo + size < len(starts) else float("inf")
            yield ctx.cut(t_lo, t_hi, ranks)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"pp{c[0]}-m{c[1]}-{c[3]}-mem{c[5]}")
def test_window_model_is_exact_on_the_schedule_it_cuts(case):
    p = problem(*case)
    for orders, ev in greedy(p, top=2):
        ctx = Context(Statics(p, orders), orders, ev)
        for first, last in windows(ctx, size=25, step=19):
            model = WindowModel(ctx, first, last)
            # the schedule as it is, every variable fixed to its hint: feasible, and the model's makespan is the
            # checker's (the suffix's tails add up exactly)
            _, status = model.solve(1.0, debug=True)
            assert status == "OPTIMAL"
            assert model.estimate / ctx.statics.k == pytest.approx(ev.makespan, abs=1e-9)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"pp{c[0]}-m{c[1]}-{c[3]}-mem{c[5]}")
def test_window_solutions_check(case):
    p = problem(*case)
    evaluator = Evaluator(p)
    (orders, ev), *_ = greedy(p)
    ctx = Context(Statics(p, orders), orders, ev)
    solved = 0
    for first, last in windows(ctx, size=30, step=29):
        model = WindowModel(ctx, first, last)
        found, _ = model.solve(0.05)
        if found is None:
            continue
        solved += 1
        got = evaluator.evaluate(found)
        assert got.feasible  # complete, no deadlock, within the memory limit
        assert got.makespan <= model.value + 1e-9  # the checker runs it as soon as it can: never later
        assert [sorted(o) for o in found] == [sorted(o) for o in orders]  # the same jobs on the same ranks
    assert solved


def _brute_force(p, ctx, first, last):
    """The best makespan over every re-ordering of each rank's window that keeps a job after its own rank's
    inputs (F before its I or B, I before its W) and micro-batches in order per job type and stage (as the
    model does), by the checker's engine."""
    evaluator = Evaluator(p)
    orders, inputs = ctx.orders, ctx.statics.inputs

    def valid(order) -> bool:
        position = {job: i for i, job in enumerate(order)}
        last_mb = {}
        for i, (t, s, mb) in enumerate(order):
            if last_mb.setdefault((t, s), mb) > mb:
                return False
            last_mb[(t, s)] = mb
            if any(position.get(q, -1) > i for q, _ in inputs[(t, s, mb)]):
                return False
        return True

    choices = [
        [list(perm) for perm in itertools.permutations(order[first[r] : last[r]]) if valid(perm)]
        for r, order in enumerate(orders)
    ]
    best = float("inf")
    for combo in itertools.product(*choices):
        trial = [order[: first[r]] + combo[r] + order[last[r] :] for r, order in enumerate(orders)]
        got = evaluator.evaluate(trial)
        if got.feasible:
            best = min(best, got.makespan)
    return best


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2]], ids=["v-uniform", "v-hetero", "looped-hetero"])
def test_window_optimum_equals_brute_force(case):
    p = problem(*case)
    evaluator = Evaluator(p)
    (orders, ev), *_ = greedy(p)
    ctx = Context(Statics(p, orders), orders, ev)
    starts = sorted(x for row in ctx.start for x in row)
    checked = 0
    for lo in range(0, len(starts) - 12, max(len(starts) // 6, 1)):
        first, last = ctx.cut(starts[lo] / ctx.statics.k, starts[lo + 12] / ctx.statics.k)
        if max(b - a for a, b in zip(first, last, strict=True)) > 5:
            continue  # (keep the brute force small)
        model = WindowModel(ctx, first, last)
        found, status = model.solve(5.0)
        assert status == "OPTIMAL"
        assert evaluator.evaluate(found).makespan == pytest.approx(_brute_force(p, ctx, first, last), abs=1e-9)
        checked += 1
    assert checked >= 2


@pytest.mark.e2e
def test_lns_finds_the_optimum_the_greedy_misses():
    p = problem(4, 8, 2, "vshape", UNIFORM, 4)
    (orders, ev), *_ = greedy(p)
    assert ev.makespan > 59
    found, got, spent = lns(Evaluator(p), orders, budget=10.0, target=59)
    assert got.feasible and got.makespan == 59
    assert max(got.peaks) <= 4
    assert spent <= 10.5
    # and 59 is optimal: CP-SAT proves it on the whole problem from there
    times = {job: got.start[r][i] for r, order in enumerate(found) for i, job in enumerate(order)}
    proof = exact.solve(p, 20.0, hint=times, upper_bound=got.makespan)
    assert proof.status == "OPTIMAL" and proof.bound == 59


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"pp{c[0]}-m{c[1]}-{c[3]}-mem{c[5]}")
def test_periodic_blocks_keep_the_memory_limit(case):
    p = problem(*case)
    evaluator = Evaluator(p)
    found = periodic_schedules(p, budget=1.0)
    assert found
    for block in found:
        orders = block.orders
        got = evaluator.evaluate(orders)
        assert got.feasible, got.peaks  # complete, no deadlock, and within the limit the block was solved for
        assert [sorted(o) for o in orders] == [sorted(o) for o in p.sequential()]


def test_periodic_block_finds_the_optimum():
    p = problem(4, 8, 2, "vshape", UNIFORM, 4)
    best = min(Evaluator(p).evaluate(b.orders).makespan for b in periodic_schedules(p, budget=1.0))
    assert best == 59


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"pp{c[0]}-m{c[1]}-{c[3]}-mem{c[5]}")
def test_planned_list_schedules_follow_a_block_within_the_limit(case):
    p = problem(*case)
    evaluator = Evaluator(p)
    for block in periodic_schedules(p, budget=1.0):
        orders, plan = block.orders, block.planned_times(p.microbatches)
        for reserve in (None, 1):
            policy = Policy(split=True, planned=True, reserve=reserve)
            planned = list_schedule(p, policy, {job: -t for job, t in plan.items()})
            if planned is None:
                continue  # (a memory deadlock: the search drops such a policy)
            got = evaluator.evaluate(planned)
            assert got.feasible
            assert [sorted(o) for o in planned] == [sorted(o) for o in orders]


def test_periodic_block_beats_the_greedy_on_v_with_unequal_costs():
    p = problem(6, 24, 2, "vshape", HETERO, 8)
    evaluator = Evaluator(p)
    (_, greedy_ev), *_ = greedy(p)
    best = min(evaluator.evaluate(b.orders).makespan for b in periodic_schedules(p, budget=1.0))
    assert best < greedy_ev.makespan - 10  # 179.6 against 203.8


@pytest.mark.e2e
def test_search_reaches_the_optimum_and_says_so():
    p = problem(4, 8, 2, "vshape", UNIFORM, 4)
    result = synthesize(p, time_limit=10.0)
    assert result.makespan == 59
    assert result.optimal


@pytest.mark.e2e
def test_search_is_deterministic():
    p = problem(4, 12, 1, "looped", HETERO, 4)
    a = synthesize(p, time_limit=2.0, seed=3)
    b = synthesize(p, time_limit=2.0, seed=3)
    assert a.orders == b.orders
    assert [(s.name, s.makespan) for s in a.steps] == [(s.name, s.makespan) for s in b.steps]


@pytest.mark.e2e
def test_lns_never_loses_ground():
    """Whatever it finds checks, within the limit, and is no slower than where it started."""
    for case in CASES[1:4]:
        p = problem(*case)
        evaluator = Evaluator(p)
        (orders, ev), *_ = greedy(p)
        found, got, _ = lns(evaluator, orders, budget=1.0)
        again = evaluator.evaluate(found)
        assert again.feasible and again.makespan == got.makespan <= ev.makespan
        assert sum(1 for o in found for job in o if job[0] == BACKWARD_W) == sum(
            1 for o in orders for job in o if job[0] == BACKWARD_W
        )


def test_cool_down_reorders_the_end_only_and_shortens_it():
    """The greedy's best V at pp 4 ends with backwards in an order a window over every rank's end improves
    (69 to 67 when measured); the jobs before the largest window it may use keep their places."""
    p = problem(4, 8, 2, "vshape", UNIFORM, 4)
    evaluator = Evaluator(p)
    (orders, ev), *_ = greedy(p)
    window = 40
    found, got, spent = cool_down(evaluator, orders, budget=5.0, window=window)
    assert got.feasible and max(got.peaks) <= 4
    assert got.makespan < ev.makespan
    assert evaluator.evaluate(found).makespan == got.makespan
    assert 0 < spent <= 5.0
    starts = sorted(x for row in ev.start for x in row[:-1])
    fixed_before = starts[-COOL_DOWN_GROWTH * window]
    for r, (old, new) in enumerate(zip(orders, found, strict=True)):
        kept = [job for job, start in zip(old, ev.start[r], strict=False) if start < fixed_before]
        assert new[: len(kept)] == kept
