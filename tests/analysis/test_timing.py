"""The timing rule (`ppdsl.analysis.timing`) and the checker's executor applying it: streams queue, data flows
between neighbouring stages, and `execute`'s times match a hand-timed schedule where transfers queue."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.execution import execute
from ppdsl.analysis.scenario import Scenario
from ppdsl.analysis.timing import (
    FLOW,
    PRODUCERS,
    SAME_STAGE_INPUT,
    Stream,
    after_rendezvous,
    input_stage,
    link_delay,
    output_stage,
    reads,
    start_time,
    transfer_seconds,
)
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OPTIMIZER

from paths import LIBRARY


def test_a_stream_carries_one_transfer_after_another():
    stream = Stream()
    assert stream.carry(1.0, 2.0) == (1.0, 3.0)  # free: leaves when the job ends
    assert stream.carry(2.0, 2.0) == (3.0, 5.0)  # queued behind the first
    assert stream.send(9.0, -1.0) == 9.0  # stays on the rank: at once, and the stream is untouched
    assert stream.free == 5.0
    assert stream.send(6.0, 0.5) == 6.5


def test_start_link_and_rendezvous_rules():
    assert start_time(2.0, 1.0) == 2.0 and start_time(1.0, 3.0) == 3.0
    assert transfer_seconds(0.5, None, 8.0) == 0.5 and transfer_seconds(0.5, 4.0, 8.0) == 2.5
    assert link_delay(-1.0) == 0.0 and link_delay(0.25) == 0.25
    assert after_rendezvous(2.0, 5.0) == 5.0 and after_rendezvous(6.0, 5.0) == 6.0


@pytest.mark.parametrize("nstages", [1, 2, 5])
def test_data_flows_between_neighbours(nstages):
    for kind in (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W, OPTIMIZER):
        for s in range(nstages):
            to, frm = output_stage(kind, s, nstages), input_stage(kind, s, nstages)
            if kind not in FLOW:
                assert to is None and frm is None
                continue
            assert to is None or (0 <= to < nstages and abs(to - s) == 1 and input_stage(kind, to, nstages) == s)
            if frm is not None:
                assert all(reads(kind, s, producer, frm) for producer in PRODUCERS[kind])
                assert not reads(kind, s, BACKWARD_W, frm)
    assert input_stage(FORWARD, 0, nstages) is None and output_stage(BACKWARD, 0, nstages) is None
    assert SAME_STAGE_INPUT == {BACKWARD: FORWARD, BACKWARD_B: FORWARD, BACKWARD_W: BACKWARD_B}


def test_execute_queues_transfers_on_the_send_stream():
    """FThenB, pp = 2, 3 micro-batches, forward 1, backward 2, latency 3: rank 0's activations leave at 1, then
    when the stream is free (4, 7) and arrive at 4, 7, 10; rank 1's gradients likewise (hand-timed)."""
    costs = CostSpec({"forward": 1.0, "backward": 2.0, "latency": 3.0})
    exp = Scenario(LIBRARY / "fthenb.sched", 2, 3, 1, None, costs).expansion()
    ex = execute(exp, record_comms=True)
    labels = [[exp.label(code) for code in row] for row in exp.jobs]
    assert labels[1][:6] == ["F0", "F1", "F2", "B0", "B1", "B2"]
    assert ex.start[1][:6] == [4.0, 7.0, 10.0, 11.0, 13.0, 15.0]
    assert [(t.start, t.end) for t in ex.transfers if t.src_rank == 0] == [(1.0, 4.0), (4.0, 7.0), (7.0, 10.0)]
    # the gradients leave rank 1 at 13, 16, 19 (queued behind each other), so rank 0's backwards start at 16, 19, 22
    assert [(t.start, t.end) for t in ex.transfers if t.src_rank == 1] == [(13.0, 16.0), (16.0, 19.0), (19.0, 22.0)]
    assert ex.start[0][3:6] == [16.0, 19.0, 22.0]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    st.sampled_from(["1f1b.sched", "fthenb.sched", "zbh1.sched", "interleaved1f1b.sched"]),
    st.integers(2, 4),
    st.integers(1, 3),
    st.sampled_from([0.0, 0.5, 2.0]),
)
def test_a_rendezvous_never_makes_a_job_earlier(name, pp, k, latency):
    vpp = 2 if name.startswith("interleaved") else 1
    costs = CostSpec({"forward": 1.0, "backward": 2.0, "backward_b": 1.0, "backward_w": 1.0, "latency": latency})
    exp = Scenario(LIBRARY / name, pp, k * pp, vpp, None, costs).expansion()
    streamed, blocking = execute(exp), execute(exp, rendezvous=True)
    assert streamed.completed
    if blocking.completed:
        for r in range(pp):
            assert all(b >= s for b, s in zip(blocking.start[r], streamed.start[r], strict=True))
        assert blocking.makespan >= streamed.makespan
