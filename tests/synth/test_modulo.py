"""Hand-built periodic blocks (synth/modulo.py): rotated blocks tile every rank's period and keep every input,
one that fits the limit by its steady-state count is within it at the problem's sizes, and as CP-SAT's start it
finds a block at the shortest period where CP-SAT alone finds none in the same time."""

from __future__ import annotations

import pytest

from ppdsl.analysis.timing import SAME_STAGE_INPUT, input_stage, link_delay
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, FORWARD
from ppdsl.synth import cpsat, periodic
from ppdsl.synth.cpsat import Statics
from ppdsl.synth.modulo import excess, rotation_block
from ppdsl.synth.periodic import BlockModel, minimum_period, orders_from_block, periodic_schedules
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator

UNIFORM = {"forward": 1, "backward": 2, "backward_b": 1, "backward_w": 1}
HETERO = {"forward": 1, "backward": 2.2, "backward_b": 1.5, "backward_w": 0.7, "latency": 0.1}

CASES = [  # (pp, vpp, placement, costs, limit, split)
    (2, 2, "vshape", UNIFORM, 3, "yes"),
    (4, 2, "vshape", HETERO, 6, "yes"),
    (6, 2, "vshape", HETERO, 12, "yes"),
    (8, 2, "vshape", HETERO, 10, "yes"),
    (4, 2, "vshape", UNIFORM, None, "no"),
    (4, 1, "looped", HETERO, 4, "yes"),
    (3, 2, "looped", UNIFORM, 6, "yes"),
]


def statics(pp, vpp, placement, costs, limit, split):
    problem = build_problem(pp, 2 * pp, vpp, placement, costs, memory_limit=limit, split=split)
    return problem, Statics(problem, problem.sequential())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"pp{c[0]}-{c[2]}{c[1]}-{c[4]}-split-{c[5]}")
def test_rotated_blocks_tile_every_rank_and_keep_every_input(case):
    problem, st = statics(*case)
    split = case[5] == "yes"
    period = minimum_period(st, split)
    offsets, _, built = rotation_block(st, period, split)
    assert offsets is not None and built > 0
    assert set(offsets) == set(periodic.kinds(problem, split))
    grad = BACKWARD_B if split else BACKWARD
    for (t, s), at in offsets.items():
        ready = []
        if t in SAME_STAGE_INPUT:
            src = (SAME_STAGE_INPUT[t], s)
            ready.append(offsets[src] + st.cost[src[0]][s])
        frm = input_stage(t, s, problem.nstages)
        if frm is not None:
            src = (FORWARD if t == FORWARD else grad, frm)
            ready.append(offsets[src] + st.cost[src[0]][frm] + st.tick(link_delay(problem.link[src[0]][frm])))
        assert at >= max(ready, default=0), (t, s)
    for r in range(problem.pp):
        busy = sorted((at % period, st.cost[t][s]) for (t, s), at in offsets.items() if problem.rank_of[s] == r)
        busy = [(a, n) for a, n in busy if n]
        for (a, n), (b, _) in zip(busy, [*busy[1:], (busy[0][0] + period, 0)], strict=True):
            assert a + n <= b, (r, busy)  # no two of a rank's jobs overlap, modulo the period


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"pp{c[0]}-{c[2]}{c[1]}-{c[4]}-split-{c[5]}")
def test_a_rotated_block_that_fits_is_within_the_limit(case):
    problem, st = statics(*case)
    split = case[5] == "yes"
    period = minimum_period(st, split)
    for extra in (0, period // 2):
        offsets, fits, _ = rotation_block(st, period + extra, split)
        assert fits == (excess(st, offsets, period + extra, split) == 0)
        if fits:
            got = Evaluator(problem).evaluate(orders_from_block(problem, offsets, period + extra))
            assert got.feasible, got.peaks  # complete, no deadlock, within the limit
            if case[4] is not None:
                assert max(got.peaks) <= case[4] + 1e-9


def test_some_rotated_block_fits_without_a_solver():
    problem, st = statics(6, 2, "vshape", HETERO, 12, "yes")
    offsets, fits, _ = rotation_block(st, minimum_period(st, True), True)
    assert fits  # at the shortest period: a block as it is, whatever CP-SAT does in its time
    assert Evaluator(problem).evaluate(orders_from_block(problem, offsets, minimum_period(st, True))).feasible


@pytest.mark.skipif(not cpsat.available(), reason="needs OR-Tools (CP-SAT)")
def test_the_rotated_start_finds_a_block_cp_sat_alone_does_not(monkeypatch):
    # pp = 5 V, I 1.5 W 0.7 with latency, limit 8: the shortest period's block takes CP-SAT alone longer than
    # 0.05 s of deterministic time, from the rotated block it takes less
    problem, st = statics(5, 2, "vshape", HETERO, 8, "yes")
    period = minimum_period(st, True)
    start, fits, _ = rotation_block(st, period, True)
    assert not fits  # (CP-SAT has to repair the memory, not only take the block)
    hinted, _, _ = BlockModel(st, period, True).solve(0.05, hint=start)
    assert hinted is not None
    assert Evaluator(problem).evaluate(orders_from_block(problem, hinted, period)).feasible
    # and so the periodic step finds a block at that period (2/3 of its budget there), CP-SAT alone none
    found = [b.period for b in periodic_schedules(problem, budget=0.075, periods=2)]
    assert period in found
    monkeypatch.setattr(periodic, "rotation_block", lambda *args: (None, False, 0))
    assert period not in [b.period for b in periodic_schedules(problem, budget=0.075, periods=2)]
