"""Memory actions in the checker and the executor: where recompute / offload / reload may run (S115-S118), memory
counted at every instant with copies in flight (S106, S119), and the copy stream's timing (rule 6)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MemoryActions, rank_levels
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


def test_a_recomputed_forward_keeps_its_stage_input_and_the_recompute_allocates_the_rest():
    # 1F1B with full recompute, pp=4, m=8: on rank r, pp - r micro-batches in flight, each keeping its input (0.1),
    # and one rebuilt at a time: peak = 1 + (in flight - 1) * 0.1
    text = """memory recompute keeps 0.1
    order {
        let warmup = min(pp - rank - 1, microbatches)
        forward * warmup
        repeat microbatches - warmup { forward recompute backward }
        repeat warmup { recompute backward }
        optimizer
    }"""
    result = _check(text, 4, 8)
    assert result.valid
    peaks = [r.peak_activations for r in result.execution.ranks]
    assert peaks == pytest.approx([1 + (4 - r - 1) * 0.1 for r in range(4)])


def test_an_offload_frees_when_its_copy_ends_and_a_reload_holds_from_its_start():
    # F0 ends at 1; its offload copies 1 .. 3 (frees at 3); F1 ends at 2; L0 copies 3 .. 5 (holds from 3)
    exp = expand(resolve_text("cost offload = 2\ncost reload = 2\ntable { rank 0: F0 O0 F1 L0 B0 B1 optimizer }"), 1, 2)
    result = check_expansion(exp)
    assert result.valid
    ex = result.execution
    o, l_ = exp.jobs[0][1], exp.jobs[0][3]
    assert (ex.start[0][1], ex.end[0][1]) == (1.0, 3.0)
    assert (ex.start[0][3], ex.end[0][3]) == (3.0, 5.0)  # after its offload's copy, on the one copy stream
    assert ex.start[0][4] == 5.0  # the backward waits for its reload
    jobs = [(*exp.decode(c), ex.start[0][i], ex.end[0][i]) for i, c in enumerate(exp.jobs[0])]
    levels = [(lv.time, lv.level) for lv in rank_levels(exp, 0, jobs)]
    assert levels[:4] == [(1.0, 1.0), (2.0, 2.0), (3.0, 1.0), (3.0, 2.0)]
    assert MemoryActions.of(exp).copies(exp.decode(o)[0]) and MemoryActions.of(exp).copies(exp.decode(l_)[0])
    assert ex.ranks[0].busy == 1 + 1 + 2 + 2  # copies are not compute


def test_copies_overlap_compute_not_each_other_unless_duplex():
    table = "cost offload = 2\ncost reload = 2\ntable { rank 0: F0 O0 F1 O1 L0 B0 L1 B1 optimizer }"
    one = check_expansion(expand(resolve_text(table), 1, 2)).execution
    both = check_expansion(expand(resolve_text("comm offload duplex = true\n" + table), 1, 2)).execution
    # one stream: O0 1-3, O1 3-5, L0 5-7; duplex: L0 may start when O0 ends (3), beside O1
    assert (one.start[0][4], both.start[0][4]) == (5.0, 3.0)
    assert both.makespan < one.makespan


def test_a_recompute_runs_before_its_gradient_arrives():
    text = "table { rank 0: F0 R0 B0 optimizer\n rank 1: F0 R0 B0 optimizer }"
    exp = expand(resolve_text("cost recompute = 1\n" + text), 2, 1)
    ex = check_expansion(exp).execution
    # rank 0's forward ends at 1; its recompute runs 1 .. 2 while rank 1 still computes (F0 1-2, R0 2-3, B0 3-5)
    assert (ex.start[0][1], ex.start[0][2]) == (1.0, 5.0)


def test_s106_names_the_job_and_the_time_of_the_crossing_with_copies_in_flight():
    exp = expand(
        resolve_text(
            "memory limit = 1.5\ncost offload = 3\ntable { rank 0: F0 O0 F1 O1 L0 B0 L1 B1 optimizer }", "t.sched"
        ),
        1,
        2,
    )
    (found,) = check_expansion(exp).diagnostics
    # F1 ends at 2 while O0's copy (1 .. 4) still holds micro-batch 0 on the device
    assert (found.code, found.label) == ("S106", "`F1` (step 2) takes rank 0 to 2 activations at time 2")


def test_s119_the_host_limit_counts_every_ranks_offloads():
    text = "memory host limit = 1\ntable { rank 0: F0 O0 L0 B0 optimizer\n rank 1: F0 O0 L0 B0 optimizer }"
    assert _codes(text, 2, 1) == []  # one at a time: rank 0's reload ends before rank 1's offload starts
    crowded = "memory host limit = 1\ntable { rank 0: F0 F1 O0 O1 L1 L0 B1 B0 optimizer }"
    (found,) = _check(crowded, 1, 2).diagnostics
    assert found.code == "S119"
    assert found.label.startswith("`O1` (step 3) on rank 0 takes the host to 2 activations")


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
    return dataclasses.replace(exp, jobs=rows, sites=site_rows)


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


def test_a_measured_model_without_memory_actions_derives_them_from_the_forward_and_the_fraction():
    from ppdsl.analysis.memory import MemoryModel

    defn = resolve_text("memory recompute fraction = 0.75\ntable { rank 0: F0 R0 O0 L0 B0 optimizer }")
    model = MemoryModel({0: {"forward": 1000.0, "backward": -1000.0}})
    exp = expand(defn, 1, 1, memory=model)
    names = exp.type_names
    delta = {n: exp.mem_delta[names.index(n)][0][0] for n in ("recompute", "offload", "reload")}
    assert delta == {"recompute": 750.0, "offload": -1000.0, "reload": 1000.0}
    measured = MemoryModel({0: {"forward": 1000.0, "backward": -1000.0, "recompute": 900.0}})
    assert expand(defn, 1, 1, memory=measured).mem_delta[names.index("recompute")][0][0] == 900.0
