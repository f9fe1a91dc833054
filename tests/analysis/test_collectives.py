"""The collectives (`reduce_grads`, `sync_shared`): where each rank joins them (E092-E094), how they are timed (rule 7
of `ppdsl.analysis.timing`: a rendezvous of their members, then the rank's collective stream, beside its compute),
the deadlock through one (E074) and the exposed collective time per rank."""

from __future__ import annotations

import pytest

from ppdsl.analysis.check import check
from ppdsl.analysis.expand import ring_share
from ppdsl.analysis.scenario import Scenario
from ppdsl.analysis.timing import exposed_time
from ppdsl.language.library import library_files
from ppdsl.language.resolve import resolve_text

ONE_F_ONE_B = """
schedule "1F1B-DP"
cost reduce_grads = 3
order {
    let warmup = min(pp - rank - 1, microbatches)
    forward * warmup
    repeat microbatches - warmup { forward backward }
    backward * warmup
    {reduce}
    optimizer
}
"""

# two chunks per rank: chunk 1's backwards all come first, so its reduction can overlap chunk 0's
TWO_CHUNKS = """
schedule "two-chunks"
cost reduce_grads = 2
order {{
    for chunk in 0 .. vpp {{ forward * microbatches }}
    backward(chunk = 1) * microbatches
    {early}
    backward(chunk = 0) * microbatches
    {late}
    reduce_grads(chunk = 0)
    optimizer
}}
"""


def run(text: str, pp: int = 2, m: int = 4, vpp: int = 1, dp: int = 2, **kw):
    return check(Scenario(resolve_text(text, "collectives.sched"), pp, m, vpp, dp=dp, **kw))


def codes(result) -> list[str]:
    return [d.code for d in result.diagnostics]


def test_a_schedule_without_collectives_keeps_its_types_and_reports_no_collective_time():
    result = run(ONE_F_ONE_B.replace("cost reduce_grads = 3\n", "").replace("{reduce}", ""), dp=1)
    assert result.valid and "reduce_grads" not in result.expansion.type_names
    assert all("collective" not in r.to_dict() for r in result.ranks)


def _library_sizes(path):
    """A size the file's `require`s accept (pp 4 when it can), its chunk count found as `ppdsl check` finds it."""
    for pp, m in ((4, 8), (4, 4), (2, 4), (2, 2)):
        plain = check(Scenario(path, pp, m))
        if plain.valid:
            return pp, m, plain.vpp
        for vpp in (2, 3):
            if check(Scenario(path, pp, m, vpp)).valid:
                return pp, m, vpp
    raise AssertionError(f"{path.stem} checks at none of the sizes tried")


def _compute(exp, rank):
    """The rank's order as labels, without its reductions."""
    return [exp.label(c) for c in exp.jobs[rank] if exp.type_names[exp.decode(c)[0]] != "reduce_grads"]


@pytest.mark.parametrize("path", library_files(), ids=lambda p: p.stem)
def test_the_library_checks_at_dp_2_and_runs_no_reduction_at_dp_1(path):
    """Every library schedule reduces each chunk's gradients once a step (valid at dp 2: no E092-E094, no
    deadlock), and at dp 1 it is the same order without them: a reduction over one replica is no job."""
    pp, m, vpp = _library_sizes(path)
    two = check(Scenario(path, pp, m, vpp, dp=2))
    assert two.valid, two.diagnostics
    one = check(Scenario(path, pp, m, vpp)).expansion
    exp = two.expansion
    for r in range(pp):
        reductions = [exp.decode(c)[1] for c in exp.jobs[r] if exp.type_names[exp.decode(c)[0]] == "reduce_grads"]
        assert sorted(reductions) == list(range(vpp))  # one per chunk
        assert _compute(exp, r) == [one.label(c) for c in one.jobs[r]]
        assert "reduce_grads" not in {one.type_names[one.decode(c)[0]] for c in one.jobs[r]}


def test_reduce_grads_after_the_last_backward_is_valid_and_its_time_is_exposed_at_the_end():
    result = run(ONE_F_ONE_B.replace("{reduce}", "reduce_grads"))
    assert result.valid, result.diagnostics
    for r in result.ranks:  # nothing runs beside it: the optimizer waits for it
        assert r.collective == pytest.approx(3) and r.exposed_collective == pytest.approx(3)
    without = run(ONE_F_ONE_B.replace("{reduce}", ""), dp=1)
    assert result.makespan == pytest.approx(without.makespan + 3)


def test_a_chunk_reduced_after_its_last_backward_overlaps_the_other_chunks_backwards():
    early = run(TWO_CHUNKS.format(early="reduce_grads(chunk = 1)", late=""), vpp=2)
    late = run(TWO_CHUNKS.format(early="", late="reduce_grads(chunk = 1)"), vpp=2)
    assert early.valid and late.valid, (early.diagnostics, late.diagnostics)
    for e, lt in zip(early.ranks, late.ranks, strict=True):
        assert e.collective == lt.collective == pytest.approx(4)
        assert e.exposed_collective == pytest.approx(2)  # chunk 1's hides behind chunk 0's backwards
        assert lt.exposed_collective == pytest.approx(4)
    assert early.makespan == pytest.approx(late.makespan - 2)


def test_missing_reduction_is_e092_only_with_replicas():
    text = ONE_F_ONE_B.replace("cost reduce_grads = 3", "").replace("{reduce}", "")
    assert run(text, dp=1).valid
    result = run(text, dp=2)
    assert codes(result) == ["E092", "E092"]
    # where each rank's last backward runs: rank 0's in `backward * warmup`, the last rank's (no warm-up) in the repeat
    assert sorted(d.span.line for d in result.diagnostics) == [7, 8]
    assert all("add `reduce_grads` after `B3`" in d.help for d in result.diagnostics)


def test_a_second_reduction_is_e093_at_the_second():
    result = run(ONE_F_ONE_B.replace("{reduce}", "reduce_grads\n    reduce_grads"))
    assert codes(result) == ["E093"] and result.diagnostics[0].span.line == 10


def test_a_reduction_before_the_chunks_last_backward_is_e094():
    text = TWO_CHUNKS.format(early="", late="").replace(
        "    reduce_grads(chunk = 0)\n    optimizer",
        "    optimizer",
    )
    text = text.replace(
        "    backward(chunk = 0) * microbatches\n",
        "    backward(chunk = 0) * (microbatches - 1)\n    reduce_grads(chunk = 0)\n    backward(chunk = 0)\n"
        "    reduce_grads(chunk = 1)\n",
    )
    result = run(text, vpp=2)
    assert codes(result) == ["E094"]
    d = result.diagnostics[0]
    assert "chunk 0" in d.message and "`B3.c0`" in d.message and d.span.line == 9


@pytest.mark.parametrize("dp", [1, 2])
def test_a_misplaced_reduction_is_found_at_dp_1_where_it_is_no_work(dp):
    """Before: at dp 1 the expansion left every `reduce_grads` out (a reduction over one replica is no work) and
    the checks never saw where the file put them, so a reduction placed before the chunk's last backward, or twice,
    proved valid at dp 1 and failed first at dp 2. Now its place is checked at every degree, on the same line."""
    early = TWO_CHUNKS.format(early="", late="").replace("    reduce_grads(chunk = 0)\n    optimizer", "    optimizer")
    early = early.replace(
        "    backward(chunk = 0) * microbatches\n",
        "    backward(chunk = 0) * (microbatches - 1)\n    reduce_grads(chunk = 0)\n    backward(chunk = 0)\n"
        "    reduce_grads(chunk = 1)\n",
    )
    result = run(early, vpp=2, dp=dp)
    assert codes(result) == ["E094"] and result.diagnostics[0].span.line == 9
    assert ("no work at dp 1" in result.diagnostics[0].label) == (dp == 1)
    twice = run(ONE_F_ONE_B.replace("{reduce}", "reduce_grads\n    reduce_grads"), dp=dp)
    assert codes(twice) == ["E093"] and twice.diagnostics[0].span.line == 10
    placed = run(ONE_F_ONE_B.replace("{reduce}", "reduce_grads"), dp=dp)
    assert placed.valid and placed.diagnostics == []
    if dp == 1:  # still no job at dp 1: the order runs as the same schedule without its reduction
        without = run(ONE_F_ONE_B.replace("{reduce}", ""), dp=1)
        assert placed.expansion.jobs == without.expansion.jobs and placed.makespan == without.makespan


SHARED = """
schedule "shared"
job send_backward : backward after backward sends
order {{
    forward * microbatches
    if rank == 1 {{
        repeat microbatches - 1 {{ backward send_backward }}
        backward
        {one}
        send_backward
        {other}
    }} else {{
        repeat microbatches {{ backward send_backward }}
        sync_shared
    }}
    optimizer
}}
"""


def test_sync_shared_before_a_send_its_peer_waits_for_is_a_deadlock_through_the_collective():
    result = run(SHARED.format(one="sync_shared", other=""), m=2, dp=1)
    assert codes(result) == ["E074"]
    d = result.diagnostics[0]
    assert d.span.line == 9  # rank 1's `sync_shared`
    assert "rank 1 at step 5 waits in `sync_shared` for rank 0 to join it" in d.notes
    orders = [n for n in d.notes if "'s order:" in n]
    assert orders == [
        "rank 0's order: F0 F1 B0 send_backward0 >B1< send_backward1",
        "rank 1's order: ... F1 B0 send_backward0 B1 >sync_shared< send_backward1",
    ]


def test_sync_shared_starts_when_its_last_member_joins():
    result = run(SHARED.format(one="", other="sync_shared"), m=2, dp=1)
    assert result.valid, result.diagnostics
    ex, exp = result.execution, result.expansion
    at = [exp.type_names[exp.decode(c)[0]] for c in exp.jobs[0]].index("sync_shared")
    at1 = [exp.type_names[exp.decode(c)[0]] for c in exp.jobs[1]].index("sync_shared")
    reached = [ex.end[0][at - 1], ex.end[1][at1 - 1]]
    assert ex.start[0][at] == ex.start[1][at1] == pytest.approx(max(reached))
    assert reached[0] != reached[1]  # the ranks get there at different times: the first one waits


def test_the_ring_share_sets_the_reduction_cost_from_the_link():
    text = ONE_F_ONE_B.replace(
        "cost reduce_grads = 3", "comm reduce latency = 0.5\ncomm reduce bandwidth = 2\ncomm reduce size = 4"
    )
    text = text.replace("{reduce}", "reduce_grads")
    at = {}
    for dp in (1, 2, 4):
        exp = run(text, dp=dp).expansion
        at[dp] = exp.cost[exp.type_names.index("reduce_grads")][0][0]
    assert at[1] == 0.0  # alone, nothing to reduce with
    assert at[2] == pytest.approx(0.5 + ring_share(2) * 4 / 2) == pytest.approx(2.5)
    assert at[4] == pytest.approx(0.5 + 1.5 * 4 / 2)


def test_exposed_time_is_the_collective_time_no_compute_overlaps():
    assert exposed_time([(0, 2), (3, 5)], [(1, 4)]) == pytest.approx(1)
    assert exposed_time([(0, 5)], [(1, 4)]) == 0
    assert exposed_time([], [(1, 4), (4, 6)]) == pytest.approx(5)


# The library schedules whose reductions come right after each chunk's last gradient job on every rank, where
# Paddle's VPP pass puts its `_reduce` jobs and PyTorch's runtime its REDUCE_GRAD (zbv, dualpipev, interleavedzb
# and vpp's unsplit order reduce later, at the end of the rank's cool-down).
RIGHT_AFTER = [
    ("1f1b", 1),
    ("zbh1", 1),
    ("zbh2", 1),
    ("interleaved1f1b", 2),
    ("interleaved1f1b_offload", 2),
    ("loopedbfs", 2),
    ("fthenb", 2),
]
GRADIENT_JOBS = ("backward", "backward_w")
COMPUTE_JOBS = ("forward", "backward", "backward_b", "backward_w")


@pytest.mark.parametrize(("library", "vpp"), RIGHT_AFTER, ids=[v[0] for v in RIGHT_AFTER])
@pytest.mark.parametrize(("pp", "m"), [(2, 4), (4, 8), (4, 12), (8, 16)])
def test_a_library_schedule_reduces_each_chunk_right_after_its_last_gradient(library, vpp, pp, m):
    result = check(Scenario(library, pp, m, vpp, dp=2, costs={"reduce_grads": 2.0}))
    assert result.valid, result.diagnostics
    exp = result.expansion
    names = exp.type_names
    for r in range(pp):
        jobs = [exp.decode(c) for c in exp.jobs[r]]
        for c in range(vpp):
            last = max(i for i, (t, chunk, _) in enumerate(jobs) if chunk == c and names[t] in GRADIENT_JOBS)
            at = next(i for i, (t, chunk, _) in enumerate(jobs) if chunk == c and names[t] == "reduce_grads")
            between = [names[t] for t, _, _ in jobs[last + 1 : at]]
            assert at > last and not set(between) & set(COMPUTE_JOBS), (r, c, between)
    if vpp > 1:  # the first chunk reduced overlaps the later chunks' backwards
        assert all(rk.exposed_collective < rk.collective for rk in result.ranks)
