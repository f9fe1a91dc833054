"""`ppdsl.analysis.checks.memory_action_order` (S115-S118): where recompute / offload / reload may run, on literal
orders and on perturbations of the library's memory-action schedules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MemoryActions
from ppdsl.language.resolve import load, resolve_text
from ppdsl.plan.kinds import BACKWARD

from paths import LIBRARY


def _check(text: str, pp: int = 1, m: int = 1):
    return check_expansion(expand(resolve_text(text, "t.sched"), pp, m))


def _codes(text: str, pp: int = 1, m: int = 1) -> list[str]:
    return [d.code for d in _check(text, pp, m).diagnostics]


def test_order_rules_each_have_their_code():
    assert _codes("table { rank 0: R0 F0 B0 optimizer }") == ["S115"]
    assert _codes("table { rank 0: F0 B0 R0 optimizer }") == ["S115"]
    assert _codes("table { rank 0: O0 F0 L0 B0 optimizer }") == ["S116"]
    assert _codes("table { rank 0: F0 L0 B0 optimizer }") == ["S117"]
    assert _codes("table { rank 0: F0 O0 B0 L0 optimizer }") == ["S117"]
    assert _codes("table { rank 0: F0 O0 B0 optimizer }") == ["S118"]
    assert _check("table { rank 0: F0 R0 O0 L0 B0 optimizer }").valid


def test_a_split_backward_is_the_backward_of_the_rules():
    assert _check("table { rank 0: F0 O0 L0 R0 I0 W0 optimizer }").valid
    assert _codes("table { rank 0: F0 I0 R0 W0 optimizer }") == ["S115"]


def test_order_rules_find_the_chunk_of_each_job_with_two_chunks():
    # the rules index a rank's jobs by (chunk, micro-batch): another (chunk, micro-batch)'s backward is not theirs
    ok = "table { rank 0: F0.c0 O0.c0 F1.c0 O1.c0 F0.c1 F1.c1 B0.c1 B1.c1 L0.c0 B0.c0 L1.c0 B1.c0 optimizer }"
    assert check_expansion(expand(resolve_text(ok), 1, 2, 2)).valid
    late = "table { rank 0: F0.c0 O0.c0 F1.c0 O1.c0 F0.c1 F1.c1 B0.c1 B1.c1 B0.c0 L0.c0 L1.c0 B1.c0 optimizer }"
    (found,) = check_expansion(expand(resolve_text(late), 1, 2, 2)).diagnostics
    assert (found.code, found.message) == (
        "S117",
        "the reload of micro-batch 0 runs after its backward on rank 0 (chunk 0)",
    )


# Perturbations of the library's memory-action schedules: each mistake is caught by its own rule.
MEMORY_LIBRARY = [("1f1b_recompute", 4, 8, 1), ("1f1b_selective", 3, 5, 1), ("interleaved1f1b_offload", 4, 8, 2)]
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True)


def _library(stem: str, pp: int, m: int, vpp: int) -> Expansion:
    exp = expand(load(LIBRARY / f"{stem}.sched"), pp, m, vpp)
    assert check_expansion(exp).valid
    return exp


def _edited(exp: Expansion, rank: int, jobs: list[int], sites: list[int]) -> Expansion:
    rows, site_rows = [list(r) for r in exp.jobs], [list(r) for r in exp.sites]
    rows[rank], site_rows[rank] = jobs, sites
    return exp.with_orders(rows, site_rows)


def _action_steps(exp: Expansion) -> list[tuple[int, int]]:
    actions = MemoryActions.of(exp)
    kinds = {actions.recompute, actions.offload, actions.reload}
    return [(r, i) for r, row in enumerate(exp.jobs) for i, code in enumerate(row) if exp.decode(code)[0] in kinds]


@PROPERTY
@given(case=st.sampled_from(MEMORY_LIBRARY), data=st.data())
def test_deleting_a_memory_action_keeps_a_recompute_optional_and_breaks_a_copy_pair(case, data):
    exp = _library(*case)
    rank, step = data.draw(st.sampled_from(_action_steps(exp)))
    jobs, sites = list(exp.jobs[rank]), list(exp.sites[rank])
    t = exp.decode(jobs[step])[0]
    del jobs[step], sites[step]
    result = check_expansion(_edited(exp, rank, jobs, sites))
    actions = MemoryActions.of(exp)
    if t == actions.recompute:  # the forward keeps its activations: valid, and never less memory
        assert result.valid
        assert (
            result.execution.ranks[rank].peak_activations >= check_expansion(exp).execution.ranks[rank].peak_activations
        )
    else:  # an offload without its reload, or a reload without its offload
        assert [d.code for d in result.diagnostics] == ["S118" if t == actions.reload else "S117"]


@PROPERTY
@given(case=st.sampled_from(MEMORY_LIBRARY), data=st.data())
def test_moving_a_memory_action_past_its_backward_is_caught_by_its_rule(case, data):
    exp = _library(*case)
    rank, step = data.draw(st.sampled_from(_action_steps(exp)))
    jobs, sites = list(exp.jobs[rank]), list(exp.sites[rank])
    t, chunk, mb = exp.decode(jobs[step])
    grad = jobs.index(exp.encode(BACKWARD, chunk, mb))
    job, site = jobs.pop(step), sites.pop(step)
    jobs.insert(grad, job)  # just after the backward (which moved up one step)
    sites.insert(grad, site)
    codes = {d.code for d in check_expansion(_edited(exp, rank, jobs, sites)).diagnostics}
    actions = MemoryActions.of(exp)
    expected = {actions.recompute: {"S115"}, actions.offload: {"S116", "S117"}, actions.reload: {"S117"}}[t]
    assert codes == expected
