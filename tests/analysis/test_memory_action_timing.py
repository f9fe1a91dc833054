"""The copy stream's timing rule (analysis/timing.py, rule 6) as properties of the executor, over 1F1B orders
with random costs and a random choice of offloaded and recomputed micro-batches."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.analysis.memory import MemoryActions
from ppdsl.language.resolve import resolve_text
from ppdsl.plan.kinds import BACKWARD, FORWARD

PROPERTY = settings(max_examples=80, deadline=None, derandomize=True)


def _schedule(pp: int, m: int, offloaded: set[int], recomputed: set[int], ahead: int, costs: dict, duplex: bool):
    """A 1F1B table with offloads after the chosen forwards, their reloads `ahead` jobs before the backward and
    recomputes before it."""
    rows = []
    for r in range(pp):
        warm = min(pp - r - 1, m)
        order = [f"F{i}" for i in range(warm)]
        for i in range(m - warm):
            order += [f"F{warm + i}", f"B{i}"]
        order += [f"B{i}" for i in range(m - warm, m)]
        jobs: list[str] = []
        for job in order:
            jobs.append(job)
            if job[0] == "F" and int(job[1:]) in offloaded:
                jobs.append("O" + job[1:])
        for mb in sorted(offloaded | recomputed):
            b = jobs.index(f"B{mb}")
            if mb in recomputed:
                jobs.insert(b, f"R{mb}")
            if mb in offloaded:
                lo = jobs.index(f"O{mb}") + 1
                jobs.insert(max(lo, jobs.index(f"B{mb}") - ahead), f"L{mb}")
        rows.append(f"rank {r}: " + " ".join(jobs) + " optimizer")
    decl = "".join(f"cost {k} = {v}\n" for k, v in costs.items()) + ("comm offload duplex = true\n" if duplex else "")
    return expand(resolve_text(decl + "table {\n" + "\n".join(rows) + "\n}"), pp, m)


@st.composite
def cases(draw):
    pp, m = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    offloaded = draw(st.sets(st.integers(0, m - 1)))
    recomputed = draw(st.sets(st.integers(0, m - 1)))
    cost = st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, 3.0])
    costs = {k: draw(cost) for k in ("forward", "backward", "recompute", "offload", "reload")}
    costs["forward"] = costs["forward"] or 1.0
    return pp, m, offloaded, recomputed, draw(st.integers(0, 3)), costs, draw(st.booleans())


@PROPERTY
@given(case=cases())
def test_copies_follow_their_data_and_their_stream_and_the_backward_follows_its_reload(case):
    exp = _schedule(*case)
    result = check_expansion(exp)
    assert result.valid, [d.message for d in result.diagnostics]
    ex, actions = result.execution, MemoryActions.of(exp)
    for r, codes in enumerate(exp.jobs):
        at = {exp.decode(code): (ex.start[r][i], ex.end[r][i]) for i, code in enumerate(codes)}
        for (t, c, mb), (start, end) in at.items():
            if t == actions.offload:
                assert start >= at[(FORWARD, c, mb)][1]
            elif t == actions.reload:
                assert start >= at[(actions.offload, c, mb)][1]
                assert at[(BACKWARD, c, mb)][0] >= end
            elif t == actions.recompute:
                assert start >= at[(FORWARD, c, mb)][1] and at[(BACKWARD, c, mb)][0] >= end
        compute = sorted(v for (t, _, _), v in at.items() if not actions.copies(t))
        streams = [[actions.offload, actions.reload]] if not exp.copy_duplex else [[actions.offload], [actions.reload]]
        for spans in [compute] + [sorted(v for (t, _, _), v in at.items() if t in kinds) for kinds in streams]:
            assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(spans))


@PROPERTY
@given(case=cases())
def test_free_copies_change_no_time_and_duplex_is_never_slower(case):
    pp, m, offloaded, recomputed, ahead, costs, duplex = case
    free = {**costs, "offload": 0.0, "reload": 0.0, "recompute": 0.0}
    with_free = check_expansion(_schedule(pp, m, offloaded, recomputed, ahead, free, duplex)).execution
    without = check_expansion(_schedule(pp, m, set(), set(), ahead, free, duplex)).execution
    assert with_free.makespan == without.makespan
    one = check_expansion(_schedule(pp, m, offloaded, recomputed, ahead, costs, False)).execution
    two = check_expansion(_schedule(pp, m, offloaded, recomputed, ahead, costs, True)).execution
    assert two.makespan <= one.makespan + 1e-9
