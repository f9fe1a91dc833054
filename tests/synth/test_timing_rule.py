"""Every synth engine times a schedule by the checker's rule (`ppdsl.analysis.timing`): on random sizes, costs,
latencies and bandwidths, the times each engine computes for its own schedule equal (or, where an engine
documents a relaxation, bound) what `execute` says for the same per-rank orders.

* list scheduling (`greedy.ListScheduler`): the same start and end for every job, send-stream queueing
  included, for every policy that never idles on purpose; a patient or planned policy may hold a job back
  (that is its point), so its times are never earlier than `execute`'s. With memory actions (a policy that
  recomputes and offloads while it schedules) the same, the copies on the copy stream(s) included.
* the exact CP-SAT model (`exact.ScheduleModel`), with each rank's order fixed and the starts minimised: the
  earliest times its constraints allow are `execute`'s when no transfer queues on a send stream (the case the
  model is exact for), and never later otherwise (it leaves out the queue).
* a window of the large-neighbourhood search (`window.WindowModel`): `execute`'s times satisfy all of its
  constraints, and its makespan of them is `execute`'s (no queueing) or at most that.
* a periodic block (`periodic.BlockModel`): its planned times (offset + micro-batch * period) keep the rule
  (inputs after their producers plus the link, one job at a time per rank), so `execute`'s times for the
  block's orders are never later.

Rendezvous: no synth engine times with it (synthesized schedules are evaluated with streaming sends); the
executor's rendezvous is tested in tests/analysis/test_timing.py. Costs are multiples of 1/4 and latencies of
1/8, so every engine's arithmetic is exact and equality means equality.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.execution import execute
from ppdsl.analysis.timing import PRODUCERS, SAME_STAGE_INPUT, input_stage, link_delay
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth import cpsat, exact
from ppdsl.synth.cpsat import Statics
from ppdsl.synth.greedy import ListScheduler, Policy
from ppdsl.synth.periodic import periodic_schedules
from ppdsl.synth.problem import Problem, build_problem
from ppdsl.synth.schedule import Evaluator
from ppdsl.synth.window import Context, WindowModel

ENGINE = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
CP_SAT = settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
needs_cp_sat = pytest.mark.skipif(not cpsat.available(), reason="OR-Tools is an optional dependency (ppdsl[synth])")
# policies that run a ready job whenever the rank is free: their own times must be execute's exactly
EAGER = [
    Policy(),
    Policy(split=False),
    Policy(w_before_f=True),
    Policy(deep_first=False, deep_first_b=False),
    Policy(reserve=0),
    Policy(reserve=1, inflight=2),
    Policy(w_lag=0),
    Policy(seed=7),
]
# policies that may keep a rank idle while something is ready
PATIENT = [Policy(w_fit=True, f_fit=True), Policy(planned=True), Policy(planned=True, reserve=1)]


@st.composite
def problems(draw, max_pp: int = 6, max_m: int = 12, calm: bool = False) -> Problem:
    """A random problem: sizes, placement, per-stage costs, latency, bandwidth, backward split, memory limit.
    `calm`: no transfer outlasts a job (latency at most the least cost, no bandwidth), so none queues."""
    pp, m = draw(st.integers(2, max_pp)), draw(st.integers(1, max_m))
    vpp = draw(st.sampled_from([1, 1, 2]))
    placement = draw(st.sampled_from(["looped", "vshape"])) if vpp == 2 else "looped"
    quarter = st.integers(1, 12).map(lambda k: k / 4)

    def costs() -> dict[str, float]:  # a whole backward costs its two parts, as in every profile ppdsl has
        f, i, w = draw(quarter), draw(quarter), draw(quarter)
        return {"forward": f, "backward": i + w, "backward_b": i, "backward_w": w}

    file = {
        "costs": costs(),
        "stages": {str(s): costs() for s in range(pp * vpp) if draw(st.booleans())},
        "latency": draw(st.integers(0, 2 if calm else 24).map(lambda k: k / 8)),
        "bandwidth": 0 if calm else draw(st.sampled_from([0, 0, 1, 2, 4])),  # 0: none
    }
    split = draw(st.sampled_from(["auto", "yes", "no"]))
    limit = draw(st.sampled_from([None, None, float(pp * vpp), float(2 * pp * vpp)]))
    return build_problem(pp, m, vpp, placement, costs=CostSpec(file=file), memory_limit=limit, split=split)


ACTING = [
    Policy(actions=("recompute", "offload")),
    Policy(actions=("recompute", "offload"), prefer="recompute"),
    Policy(actions=("offload",)),
    Policy(actions=("recompute",), w_before_f=True),
    Policy(actions=("recompute", "offload"), reserve=0, deep_first=False),
    Policy(actions=("offload",), w_lag=0, seed=3),
    Policy(actions=("recompute", "offload"), offload_early=True),
    Policy(actions=("offload",), offload_early=True, reserve=1),
]


@st.composite
def acting_problems(draw, max_pp: int = 5, max_m: int = 10) -> Problem:
    """A random problem built with memory actions: its costs (copies and recompute included), latency,
    bandwidth, a limit from one micro-batch's activations on a rank upwards, sometimes a host limit, and one copy
    stream or one per direction."""
    pp, m = draw(st.integers(2, max_pp)), draw(st.integers(1, max_m))
    vpp = draw(st.sampled_from([1, 1, 2]))
    placement = draw(st.sampled_from(["looped", "vshape"])) if vpp == 2 else "looped"
    quarter = st.integers(1, 12).map(lambda k: k / 4)
    f, i, w = draw(quarter), draw(quarter), draw(quarter)
    costs = {"forward": f, "backward": i + w, "backward_b": i, "backward_w": w}
    costs |= {"recompute": draw(quarter), "offload": draw(quarter), "reload": draw(quarter)}
    file = {
        "costs": costs,
        "latency": draw(st.integers(0, 24).map(lambda k: k / 8)),
        "bandwidth": draw(st.sampled_from([0, 0, 1, 4])),
    }
    split = draw(st.sampled_from(["auto", "yes", "no"]))
    limit = vpp + draw(st.integers(0, 2 * pp)) / 2  # a micro-batch's forwards on all a rank's chunks, and up
    host = draw(st.sampled_from([None, None, 1.0, float(pp)]))
    fraction = draw(st.sampled_from([0.9, 0.5, 1.0]))
    problem = build_problem(
        pp, m, vpp, placement, costs=CostSpec(file=file), memory_limit=limit, split=split,
        memory_actions=True, recompute_fraction=fraction, host_limit=host,
    )  # fmt: skip
    problem.expansion = replace(problem.expansion, copy_duplex=draw(st.booleans()))
    return problem


def _policy(problem: Problem, policy: Policy) -> Policy:
    return Policy(**{**policy.__dict__, "split": False}) if problem.split == "no" else policy


def _priority(problem: Problem, seed: int) -> dict:
    rng = random.Random(seed)
    kinds = (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W)
    return {
        (t, s, mb): rng.random() for t in kinds for s in range(problem.nstages) for mb in range(problem.microbatches)
    }


def _executed(problem: Problem, orders):
    """`execute`'s (start, end) of the orders' compute jobs (the optimizer, last on each rank, left out)."""
    ex = execute(Evaluator(problem).expansion(orders))
    assert ex.completed
    return [row[:-1] for row in ex.start], [row[:-1] for row in ex.end], ex


@ENGINE
@given(problems(), st.sampled_from(EAGER), st.integers(0, 3))
def test_list_scheduling_times_jobs_as_execute(problem, policy, seed):
    scheduler = ListScheduler(problem, _policy(problem, policy), _priority(problem, seed) if seed else None)
    orders = scheduler.run()
    assume(orders is not None)  # a memory deadlock of this policy: nothing timed
    start, end = scheduler.times()
    assert (start, end) == _executed(problem, orders)[:2]


@ENGINE
@given(acting_problems(), st.sampled_from(ACTING), st.integers(0, 3))
def test_list_scheduling_with_memory_actions_times_every_job_and_copy_as_execute(problem, policy, seed):
    scheduler = ListScheduler(problem, _policy(problem, policy), _priority(problem, seed) if seed else None)
    orders = scheduler.run()
    assume(orders is not None)
    start, end = scheduler.times()
    ex_start, ex_end, ex = _executed(problem, orders)
    assert (start, end) == (ex_start, ex_end)
    # and what it held is what the checker counts: within every limit, the host's too
    assert all(r.peak_activations <= limit + 1e-9 for r, limit in zip(ex.ranks, problem.limit, strict=True))
    host = problem.expansion.host_limit
    assert host is None or ex.host_peak <= host + 1e-9


@ENGINE
@given(problems(), st.sampled_from(PATIENT), st.integers(0, 3))
def test_patient_list_scheduling_never_runs_a_job_before_execute(problem, policy, seed):
    scheduler = ListScheduler(problem, _policy(problem, policy), _priority(problem, seed))
    orders = scheduler.run()
    assume(orders is not None)
    start, end = scheduler.times()
    ex_start, ex_end, _ = _executed(problem, orders)
    for r in range(problem.pp):
        assert all(a >= b for a, b in zip(start[r], ex_start[r], strict=True))
        assert all(a >= b for a, b in zip(end[r], ex_end[r], strict=True))


def _greedy_orders(problem: Problem):
    orders = ListScheduler(problem, _policy(problem, Policy())).run()
    return orders if orders is not None else problem.sequential()


@needs_cp_sat
@CP_SAT
@given(st.one_of(problems(max_pp=4, max_m=6, calm=True), problems(max_pp=4, max_m=6)))
def test_the_exact_model_times_a_fixed_order_as_execute(problem):
    problem.limit = [float("inf")] * problem.pp  # the timing rule only (memory is the checker's, elsewhere)
    orders = _greedy_orders(problem)
    whole = {(s, mb): t == BACKWARD for order in orders for t, s, mb in order if t in (BACKWARD, BACKWARD_B)}
    model = exact.ScheduleModel(problem, whole=whole)
    for order in orders:  # each rank's order fixed
        for before, after in itertools.pairwise(order):
            model.model.Add(model.start[after] >= model.end[before])
    model.model.Minimize(sum(model.start[job] for order in orders for job in order))  # the earliest times
    solver = model.cp.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10.0
    assert solver.Solve(model.model) == model.cp.OPTIMAL
    ex_start, _, _ = _executed(problem, orders)
    queues = not cpsat.transfers_never_queue(problem)
    for r, order in enumerate(orders):
        for i, job in enumerate(order):
            mine, theirs = solver.Value(model.start[job]), model.ticks(ex_start[r][i])
            assert mine <= theirs if queues else mine == theirs, (job, mine / model.k, ex_start[r][i])


@needs_cp_sat
@CP_SAT
@given(
    st.one_of(problems(max_pp=5, max_m=8, calm=True), problems(max_pp=5, max_m=8)),
    st.floats(0.0, 1.0),
    st.floats(0.05, 0.6),
)
def test_a_window_model_accepts_execute_times_and_their_makespan(problem, where, width):
    orders = _greedy_orders(problem)
    ev = Evaluator(problem).evaluate(orders)
    assume(ev.feasible)
    ctx = Context(Statics(problem, orders), orders, ev)
    lo = where * ev.makespan
    model = WindowModel(ctx, *ctx.cut(lo, lo + width * ev.makespan))
    assume(model.valid)
    found, status = model.solve(1.0, debug=True)  # every variable fixed to the current (execute's) times
    assert found is not None, status
    makespan = ev.makespan
    if cpsat.transfers_never_queue(problem):
        assert model.value == makespan
    else:
        assert model.value <= makespan


@needs_cp_sat
@CP_SAT
@given(st.one_of(problems(max_pp=4, max_m=6, calm=True), problems(max_pp=4, max_m=6)))
def test_a_periodic_block_keeps_the_rule_and_execute_is_never_later(problem):
    problem.limit = [float("inf")] * problem.pp
    blocks = periodic_schedules(problem, 0.3, periods=1)
    assume(blocks)
    block = blocks[0]
    planned = block.planned_times(problem.microbatches)
    cost, S = problem.cost, problem.nstages
    for (t, s, mb), at in planned.items():  # the rule, on the planned times
        frm = input_stage(t, s, S)
        if frm is not None:
            producer = next((k, frm, mb) for k in PRODUCERS[t] if (k, frm, mb) in planned)
            assert at >= planned[producer] + cost[producer[0]][frm] + link_delay(problem.link[producer[0]][frm])
        if t in SAME_STAGE_INPUT and (SAME_STAGE_INPUT[t], s, mb) in planned:
            local = (SAME_STAGE_INPUT[t], s, mb)
            assert at >= planned[local] + cost[local[0]][s]
    for order in block.orders:  # one job at a time on each rank
        times = [(planned[job], planned[job] + cost[job[0]][job[1]]) for job in order]
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(times))
    if cpsat.transfers_never_queue(problem):
        ex_start, _, _ = _executed(problem, block.orders)
        for r, order in enumerate(block.orders):
            assert all(ex_start[r][i] <= planned[job] for i, job in enumerate(order))
