"""What is in transit between jobs (`MemoryModel.received`, measured on a real program): a job's input from another
stage is held on the receiving rank from the start of the job that computes it to the end of the job that reads it.
A declared model counts nothing of the kind, so every schedule in activations is as before."""

from __future__ import annotations

from ppdsl.analysis.check import check
from ppdsl.analysis.memory import MemoryModel
from ppdsl.analysis.scenario import Scenario
from ppdsl.language.library import library_dir
from ppdsl.reports.simulate import simulate

PP, M = 2, 2
KEPT = 10.0  # what a forward keeps until its backward, on each stage
INPUT, GRADIENT = 3.0, 2.0  # stage 1's input from stage 0, stage 0's output gradient from stage 1


def _model(received: bool) -> MemoryModel:
    delta = {s: {"forward": KEPT, "backward": -KEPT} for s in range(PP)}
    got = {1: {"forward": INPUT}, 0: {"backward": GRADIENT}} if received else {}
    return MemoryModel(delta, received=got)


def _scenario(received: bool, limit: float | None = None) -> Scenario:
    return Scenario(library_dir() / "fthenb.sched", PP, M, memory=_model(received), memory_limit=limit)


def test_a_gradient_sent_before_the_backward_ends_is_held_with_the_activations():
    without, plain = check(_scenario(False)), check(_scenario(True))
    assert without.valid and plain.valid
    ex, exp = plain.execution, plain.expansion
    backward = exp.type_names.index("backward")
    starts = {exp.decode(code): ex.start[1][i] for i, code in enumerate(exp.jobs[1])}
    ends = {exp.decode(code): ex.end[0][i] for i, code in enumerate(exp.jobs[0])}
    # FThenB: both of rank 1's backwards start before rank 0's first backward ends, while rank 0 holds both forwards
    assert all(starts[(backward, 0, mb)] < ends[(backward, 0, 0)] for mb in range(M))
    assert without.execution.ranks[0].peak_activations == M * KEPT
    assert ex.ranks[0].peak_activations == M * KEPT + M * GRADIENT
    # rank 1 receives each input while the one before is kept: it never holds more than its forwards keep
    assert ex.ranks[1].peak_activations == without.execution.ranks[1].peak_activations == M * KEPT


def test_the_limit_and_the_memory_panel_count_what_is_in_transit():
    held = M * KEPT + M * GRADIENT
    assert check(_scenario(True, limit=held)).valid
    over = check(_scenario(True, limit=held - 1))
    assert [d.code for d in over.diagnostics] == ["S106"] and "rank 0" in over.diagnostics[0].message
    curve = simulate(_scenario(True)).memory_timeline(0)
    assert max(level for _, level in curve) == held


def test_a_declared_model_counts_nothing_in_transit():
    measured_without = check(_scenario(False))
    declared = check(Scenario(library_dir() / "1f1b.sched", 4, 8))
    for result in (measured_without, declared):
        assert result.expansion.mem_received is None and result.execution.arrivals is None
