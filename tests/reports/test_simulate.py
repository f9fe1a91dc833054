"""The simulator against pipeline theory, through `ppdsl.reports.simulate` (job records, transfers, memory timelines).

tests/test_properties.py already checks, through `check`, the flush-schedule makespans and bubbles, 1F1B at
F=1 B=2 p=4 m=8, peak activations of 1F1B / FThenB / Eager 1F1B, and that scaling costs and latency scales the
makespan. Here: what only the simulation shows or what those leave out:

* per-job start times of 1F1B (the worked stage-0 order and when its first backward starts);
* the paper's ZB-H1 (every backward split, weight gradients deferred): idle (p - 1)(F + B - W) per rank;
* ZB-V with F = B = W: a start-up bubble that does not grow with m;
* links with latency and bandwidth: FThenB's makespan m(F + B) + (p - 1)(F + B + 2L), from a cost file too;
* properties of any valid schedule with communication: job records, transfers and memory timelines agree with
  each other and with the costs, and scaling every time (bandwidth inversely) scales every record.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ppdsl
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import expand
from ppdsl.language.resolve import load
from ppdsl.reports.simulate import Simulation, simulate_expansion

from paths import LIBRARY

PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# The zero-bubble paper's ZB-H1 (Qi et al. 2024, Figure 3): 1F1B in which *every* backward is split into the
# input gradient (backward_b, on the critical path) and the weight gradient (backward_w). Rank r defers its
# first r weight gradients (so its in-flight micro-batches stay 1F1B's), pays one back per steady step, and
# runs the r it still owes at the end, where they fill the cool-down bubble. Paddle's ZBH1
# (schedules/zbh1.sched) splits only some backwards, so it is not this schedule.
ZBH1_PAPER = '''"""ZB-H1 as the paper draws it: every backward split, weight gradients fill the cool-down."""
schedule "ZBH1-paper"
order {
    forward * (pp - rank)
    repeat rank { backward_b forward }
    repeat microbatches - pp { backward_b backward_w forward }
    repeat pp - rank { backward_b backward_w }
    backward_w * rank
    optimizer
}
'''


@pytest.fixture(scope="module")
def zbh1_paper(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sched") / "zbh1_paper.sched"
    path.write_text(ZBH1_PAPER, encoding="utf-8")
    return path


def compute_jobs(sim: Simulation, rank: int) -> list:
    """A rank's jobs that take time, by start (auxiliary 0-cost jobs such as recv_forward dropped)."""
    return sorted((j for j in sim.jobs() if j.rank == rank and j.end > j.start), key=lambda j: j.start)


# ----------------------------------------------------------------------------------------------------------
# theory


def test_1f1b_stage0_order_and_first_backward_start():
    """The notes' worked example (p=4, m=8, F=1, B=2): stage 0 runs F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6
    B7, and B0 starts when micro-batch 0 has gone down and back: p forwards, then p - 1 backwards, 4 + 6 = 10."""
    sim = ppdsl.simulate(LIBRARY / "1f1b.sched", pp=4, microbatches=8, costs={"forward": 1, "backward": 2})
    rank0 = compute_jobs(sim, 0)
    assert [j.label for j in rank0] == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7".split()
    b0 = next(j for j in rank0 if j.label == "B0")
    assert (b0.start, b0.end) == (4 * 1 + 3 * 2, 4 * 1 + 4 * 2)
    # the last stage never waits once its first forward arrives: F B F B ... from time p - 1 on
    last = compute_jobs(sim, 3)
    assert last[0].start == 3
    assert all(a.end == b.start for a, b in itertools.pairwise(last))
    assert sim.makespan == 33 and [r.idle for r in sim.execution.ranks] == [9] * 4


@pytest.mark.parametrize(("f", "b", "w"), [(1, 1, 1), (2, 2, 2), (1, 1, 0.5), (2, 1, 1), (3, 2, 1)])
def test_paper_zbh1_idle_is_p_minus_1_times_f_plus_b_minus_w(zbh1_paper, f, b, w):
    """ZB-H1's idle time per rank is (p - 1)(F + B - W) (B the input gradient) while W <= B <= F does not
    reorder the critical path; with F = B = W that is a third of 1F1B's (p - 1)(F + B + W)."""
    for p in range(1, 7):
        for m in sorted({p, p + 1, 2 * p, 3 * p + 1}):
            sim = ppdsl.simulate(
                zbh1_paper, pp=p, microbatches=m, costs={"forward": f, "backward_b": b, "backward_w": w}
            )
            types = {j.type for j in sim.jobs()}
            assert "backward" not in types and {"backward_b", "backward_w"} <= types  # every backward split
            assert [r.idle for r in sim.execution.ranks] == [pytest.approx((p - 1) * (f + b - w))] * p, (p, m)
            assert sim.makespan == pytest.approx(m * (f + b + w) + (p - 1) * (f + b - w))


def test_paper_zbh1_beats_1f1b_by_the_weight_gradients(zbh1_paper):
    """Same work per rank as 1F1B with B + W as its backward, (p - 1) * 2W less idle."""
    for p, m in [(4, 8), (6, 12), (8, 8)]:
        zb = ppdsl.simulate(zbh1_paper, pp=p, microbatches=m, costs={"forward": 1, "backward_b": 1, "backward_w": 1})
        flush = ppdsl.simulate(LIBRARY / "1f1b.sched", pp=p, microbatches=m, costs={"forward": 1, "backward": 2})
        assert [r.busy for r in zb.execution.ranks] == [r.busy for r in flush.execution.ranks]
        assert flush.makespan - zb.makespan == (p - 1) * 2


@pytest.mark.parametrize("p", [2, 3, 4, 6])
def test_zbv_startup_bubble_does_not_grow_with_microbatches(p):
    """ZB-V with F = B = W: each rank's idle time is the same for every m, so the bubble ratio falls towards 0."""
    sizes = [2 * p - 1, 2 * p, 3 * p, 4 * p, 8 * p, 16 * p]
    sims = [
        ppdsl.simulate(
            LIBRARY / "zbv.sched", pp=p, microbatches=m, vpp=2, costs={"forward": 1, "backward_b": 1, "backward_w": 1}
        )
        for m in sizes
    ]
    idle = [[r.idle for r in s.execution.ranks] for s in sims]
    assert all(row == idle[0] for row in idle), idle
    ratios = [s.bubble_ratio for s in sims]
    assert all(a > b for a, b in itertools.pairwise(ratios)), ratios
    # busy time is all the work: 2 chunks x m micro-batches x (F + B + W) per rank
    for m, s in zip(sizes, sims, strict=True):
        assert [r.busy for r in s.execution.ranks] == [2 * m * 3] * p
        assert s.makespan == 6 * m + idle[0][0]
    assert ratios[-1] < 1 / 16  # idle is a start-up constant: its share at m = 16p is small


def fthenb_makespan(p: int, m: int, f: float, b: float, link: float) -> float:
    """FThenB with equal stages and a link time L <= min(F, B) per transfer (so sends never queue): micro-batch
    m - 1 reaches the last stage after m F + (p - 1)(F + L); the gradients of all m come back in
    m B + (p - 1)(B + L)."""
    return m * (f + b) + (p - 1) * (f + b + 2 * link)


@pytest.mark.parametrize(("p", "m"), [(2, 3), (4, 8), (5, 5), (8, 4)])
def test_fthenb_with_latency_and_bandwidth(p, m):
    sim = ppdsl.simulate(LIBRARY / "fthenb.sched", pp=p, microbatches=m, costs={"forward": 1, "backward": 2})
    assert sim.makespan == fthenb_makespan(p, m, 1, 2, 0)
    # an activation is 1 unit: L = 0.25 + 1 / 4
    costs = {"forward": 1, "backward": 2, "latency": 0.25, "bandwidth": 4}
    exp = ppdsl.expand(LIBRARY / "fthenb.sched", pp=p, microbatches=m, costs=costs)
    sim = simulate_expansion(exp)
    assert sim.makespan == pytest.approx(fthenb_makespan(p, m, 1, 2, 0.5))
    assert all(t.end - t.start == pytest.approx(0.5) for t in sim.transfers)


@pytest.mark.parametrize("p", [1, 2, 4, 5])
def test_memory_timeline_of_1f1b_rises_to_the_warmup_and_falls_to_zero(p):
    """1F1B's rank s holds min(p - s, m) activations at the end of its warm-up, and none after its last
    backward; the timeline's maximum is the reported peak, reached at the reported time."""
    m = 2 * p + 1
    sim = ppdsl.simulate(LIBRARY / "1f1b.sched", pp=p, microbatches=m)
    for s in range(p):
        timeline = sim.memory_timeline(s)
        levels = [level for _, level in timeline]
        stats = sim.execution.ranks[s]
        assert max(levels) == min(p - s, m) == stats.peak_activations
        first_peak = next(t for t, level in timeline if level == max(levels))
        assert first_peak == stats.peak_time
        assert levels[0] == 0 and levels[-1] == 0
        assert [t for t, _ in timeline] == sorted(t for t, _ in timeline)


# ----------------------------------------------------------------------------------------------------------
# properties of any valid schedule with communication


@st.composite
def library_runs(draw):
    """A library schedule at a size it accepts, with random integer costs and link times."""
    stem = draw(st.sampled_from(["fthenb", "1f1b", "eager1f1b", "zbh1", "interleaved1f1b", "zbv", "dualpipev"]))
    p = draw(st.integers(1, 4))
    vpp = (
        2
        if stem in ("interleaved1f1b", "zbv", "dualpipev")
        else draw(st.sampled_from([1, 1, 2]))
        if stem == "fthenb"
        else 1
    )
    m = draw(st.integers(2 * p, 3 * p + 2))
    if stem == "interleaved1f1b":
        m = p * draw(st.integers(1, 3))
    costs = {t: float(draw(st.integers(1, 4))) for t in ("forward", "backward", "backward_b", "backward_w")}
    links = {"latency": float(draw(st.integers(0, 3))), "bandwidth": float(draw(st.sampled_from([0, 1, 2, 4])))}
    return expand(load(LIBRARY / f"{stem}.sched"), p, m, vpp, costs=CostSpec(file={"costs": costs, **links}))


@PROPERTY
@given(exp=library_runs())
def test_records_transfers_and_memory_agree(exp):
    sim = simulate_expansion(exp)
    by_rank: dict[int, list] = {}
    for job in sim.jobs():
        by_rank.setdefault(job.rank, []).append(job)
        t, c, _ = exp.decode(exp.jobs[job.rank][job.step])
        assert job.end - job.start == exp.cost[t][job.rank][c]  # a job runs exactly its cost
        assert job.stage == exp.stage_of[job.rank][job.chunk]
    busy = []
    for r in range(exp.pp):
        jobs = by_rank[r]
        assert [j.step for j in jobs] == list(range(len(exp.jobs[r])))
        assert all(a.end <= b.start for a, b in itertools.pairwise(jobs))  # one job at a time, in order
        busy.append(sum(j.end - j.start for j in jobs))
    assert sim.makespan == max(j.end for j in sim.jobs())
    assert sim.makespan >= max(busy)

    # every cross-rank edge of the pipeline carries one transfer each way; none stays on one rank
    where = exp.rank_of_stage()
    cross = sum(1 for s in range(exp.nstages - 1) if where[s][0] != where[s + 1][0])
    assert len(sim.transfers) == 2 * exp.microbatches * cross
    start = {(j.type, j.stage, j.microbatch): j for j in sim.jobs()}
    link = exp.latency + (1.0 / exp.bandwidth if exp.bandwidth else 0.0)
    for tr in sim.transfers:
        sender = by_rank[tr.src_rank][tr.step]
        assert tr.start >= sender.end and tr.end - tr.start == pytest.approx(link)
        stage, mb = tr.stage, tr.microbatch
        assert sender.stage == stage and sender.microbatch == mb
        assert tr.gradient == (sender.type != "forward")
        to = stage - 1 if tr.gradient else stage + 1
        assert tr.to_stage == to
        assert where[to][0] == tr.dst_rank != tr.src_rank
        consumers = ("backward", "backward_b") if tr.gradient else ("forward",)
        consumer = next(start[k] for k in ((t, to, mb) for t in consumers) if k in start)
        assert consumer.start >= tr.end - 1e-9  # nothing computes on data that has not arrived
    # sends of one rank leave one after another
    for r in range(exp.pp):
        mine = sorted((t for t in sim.transfers if t.src_rank == r), key=lambda t: t.start)
        assert all(a.end <= b.start + 1e-9 for a, b in itertools.pairwise(mine))

    for r in range(exp.pp):
        levels = [level for _, level in sim.memory_timeline(r)]
        assert max(levels) == pytest.approx(sim.execution.ranks[r].peak_activations)
        assert levels[-1] == pytest.approx(0.0)  # every activation freed by the end of the step


@PROPERTY
@given(exp=library_runs(), k=st.sampled_from([2.0, 3.0, 0.5]))
def test_scaling_every_time_scales_every_record(exp, k):
    """Costs and latency times k, bandwidth over k (a transfer's size / bandwidth is a time too): every start,
    end and transfer scales by k; the bubble ratio and memory do not move."""
    before = simulate_expansion(exp)
    scaled = dataclasses.replace(
        exp,
        cost=[[[k * x for x in row] for row in per_rank] for per_rank in exp.cost],
        latency=k * exp.latency,
        bandwidth=exp.bandwidth / k if exp.bandwidth else exp.bandwidth,
    )
    after = simulate_expansion(scaled)
    assert after.makespan == pytest.approx(k * before.makespan)
    assert after.bubble_ratio == pytest.approx(before.bubble_ratio)
    for a, b in zip(before.jobs(), after.jobs(), strict=True):
        assert (b.start, b.end) == (pytest.approx(k * a.start), pytest.approx(k * a.end))
    for a, b in zip(before.transfers, after.transfers, strict=True):
        assert (b.start, b.end) == (pytest.approx(k * a.start), pytest.approx(k * a.end))
    assert [r.peak_activations for r in after.execution.ranks] == [r.peak_activations for r in before.execution.ranks]
