"""Memory actions in the checker and the executor: memory counted at every instant with copies in flight (S106,
S119), and the copy stream's timing (rule 6); where they may run (S115-S118) is tested with its check, in
checks/test_memory_action_order.py."""

from __future__ import annotations

import pytest

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.analysis.memory import MemoryActions, rank_levels
from ppdsl.language.resolve import resolve_text


def _check(text: str, pp: int = 1, m: int = 1):
    return check_expansion(expand(resolve_text(text, "t.sched"), pp, m))


def _codes(text: str, pp: int = 1, m: int = 1) -> list[str]:
    return [d.code for d in _check(text, pp, m).diagnostics]


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
