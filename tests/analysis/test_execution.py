"""`ppdsl.analysis.execution`: every rank's order run together, on small schedules timed by hand (forward F = 1 and
backward B = 2 unless a test says otherwise): data dependencies between stages, link latency and bandwidth, one send
stream per rank, rendezvous sends, and deadlocks."""

from __future__ import annotations

from ppdsl.analysis.execution import execute, link_times
from ppdsl.analysis.expand import expand
from ppdsl.language.resolve import resolve_text

GPIPE = "order { forward * microbatches backward * microbatches optimizer }"
ONE_F_ONE_B = """
order {
    let warmup = min(pp - rank - 1, microbatches)
    forward * warmup
    repeat microbatches - warmup { forward backward }
    backward * warmup
    optimizer
}
"""


def run(source: str, pp: int = 2, m: int = 2, **options):
    return execute(expand(resolve_text(source, "t.sched"), pp, m), **options)


def test_a_forward_waits_for_the_previous_stage_and_a_backward_for_the_next():
    ex = run(GPIPE)
    # rank 0: F0 [0, 1], F1 [1, 2], then B0 once rank 1's B0 ends at 5, B1 once its B1 ends at 7
    assert ex.start[0] == [0, 1, 5, 7, 9] and ex.end[0] == [1, 2, 7, 9, 9]
    # rank 1: F0 once rank 0's F0 ends, then back to back
    assert ex.start[1] == [1, 2, 3, 5, 7] and ex.end[1] == [2, 3, 5, 7, 7]
    assert ex.makespan == 9 and ex.completed  # (m + p - 1)(F + B)


def test_each_rank_is_busy_for_its_jobs_and_idle_for_the_rest():
    ex = run(GPIPE)
    assert [(s.rank, s.jobs, s.busy, s.idle) for s in ex.ranks] == [(0, 5, 6, 3), (1, 5, 6, 3)]
    assert ex.bubble_ratio == 3 / 9
    assert [s.peak_activations for s in ex.ranks] == [2, 2]  # GPipe holds every micro-batch before a backward


def test_a_transfer_takes_the_link_latency():
    ex = run("comm latency = 0.5\n" + GPIPE)
    assert ex.start[1][:2] == [1.5, 2.5]  # F0 leaves rank 0 at 1 and arrives at 1.5
    assert ex.makespan == 10  # two crossings on the critical path


def test_a_rank_sends_one_transfer_after_another():
    ex = run("comm latency = 3\n" + GPIPE)
    # F0's activation is on the link [1, 4]; F1's, ready at 2, waits for the stream: [4, 7]
    assert ex.start[1][:2] == [4, 7]


def test_with_a_bandwidth_a_transfer_also_takes_its_size_over_the_bandwidth():
    exp = expand(resolve_text("comm latency = 0.25\ncomm bandwidth = 4\n" + GPIPE), 2, 2)
    links = link_times(exp)
    forward, backward = exp.defn.type_index("forward"), exp.defn.type_index("backward")
    # an activation is 1 unit: 0.25 + 1 / 4; the last stage's forward and the first's backward send nothing
    assert links[forward] == [[0.5], [-1.0]] and links[backward] == [[-1.0], [0.5]]
    assert execute(exp).start[1][0] == 1.5


def test_transfers_are_recorded_when_asked():
    ex = run(GPIPE, record_comms=True)
    assert len(ex.transfers) == 4  # each micro-batch's activation forward and gradient back
    assert run(GPIPE).transfers is None


def test_a_blocking_send_deadlocks_plain_1f1b_that_stream_ordered_sends_run():
    assert run(ONE_F_ONE_B, m=4).completed
    ex = run(ONE_F_ONE_B, m=4, rendezvous=True)
    assert not ex.completed
    assert {w.rank for w in ex.deadlock} == {0, 1} and {w.kind for w in ex.deadlock} == {"send"}


def test_ranks_waiting_for_each_other_are_a_deadlock_cycle():
    # rank 1 waits for rank 0's F1, which rank 0 runs after B0, which waits for rank 1's B0
    ex = run("table { rank 0: F0 B0 F1 B1 optimizer\n rank 1: F1 F0 B0 B1 optimizer }")
    assert not ex.completed
    assert sorted((w.rank, w.step, w.job, w.kind, w.peer) for w in ex.deadlock) == [
        (0, 1, "B0", "receive", 1),
        (1, 0, "F1", "receive", 0),
    ]
