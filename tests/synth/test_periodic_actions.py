"""Periodic blocks with memory actions (issue 18, item 2): `ppdsl synth --periodic --memory-actions` has the block
choose keep / recompute / offload per stage (the same for every micro-batch), place the action jobs modulo the
period, count memory as the checker does, and write a file that holds for any number of micro-batches; the
actions search takes such a block as one more candidate."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

import ppdsl
import ppdsl.synth as synth
from ppdsl.analysis.check import CheckResult
from ppdsl.plan.kinds import is_action
from ppdsl.synth import SynthRequest, synthesize_file
from ppdsl.synth.periodic import periodic_schedules
from ppdsl.synth.problem import build_problem
from ppdsl.synth.schedule import Evaluator
from ppdsl.synth.search import Infeasible, periodic_search

BOTH = ("recompute", "offload")


def _actions_per_stage(outcome) -> dict[int, set[frozenset[str]]]:
    """stage -> the distinct sets of actions its micro-batches take."""
    p = outcome.result.problem
    names = p.expansion.type_names
    taken: dict[tuple[int, int], set[str]] = {(s, mb): set() for s in range(p.nstages) for mb in range(p.microbatches)}
    for order in outcome.result.orders:
        for t, s, mb in order:
            if is_action(names[t]):
                taken[(s, mb)].add(names[t])
    per_stage: dict[int, set[frozenset[str]]] = {}
    for (s, _), acts in taken.items():
        per_stage.setdefault(s, set()).add(frozenset(acts))
    return per_stage


def _checks_at(path, outcome, microbatches: int, vpp: int, limit: float) -> CheckResult:
    checked = ppdsl.check(path, pp=outcome.result.problem.pp, microbatches=microbatches, vpp=vpp)
    assert checked.valid, (microbatches, checked.diagnostics)
    assert max(r.peak_activations for r in checked.ranks) <= limit + 1e-9
    return checked


@pytest.mark.e2e
def test_a_block_with_actions_fits_where_no_plain_block_does_and_holds_for_any_number_of_microbatches(tmp_path):
    # a V at pp 4 holds two chunks' activations at least without actions: no plain block fits 1.5
    with pytest.raises(Infeasible):
        periodic_search(build_problem(4, 8, 2, "vshape", None, 1.5), time_limit=0.5)
    request = SynthRequest(
        pp=4, microbatches=8, vpp=2, placement="vshape", memory_limit=1.5, periodic=True, memory_actions=BOTH
    )
    found = synthesize_file(replace(request, time_limit=2.0))
    assert "periodic block" in found.result.origin
    assert "for n in 0 .. microbatches" in found.text and "microbatches ==" not in found.text
    path = tmp_path / "block.sched"
    path.write_text(found.text, encoding="utf-8")
    searched = _checks_at(path, found, 8, 2, 1.5)
    assert searched.makespan == pytest.approx(found.result.makespan)
    for m in (3, 2 * 8 + 8, 40):  # the file claims any number: fewer than the warm-up, and beyond 2m + stages
        _checks_at(path, found, m, 2, 1.5)
    # a steady state: every micro-batch of a stage takes the same action, and some stage takes one
    per_stage = _actions_per_stage(found)
    assert all(len(kinds) == 1 for kinds in per_stage.values()), per_stage
    assert any(next(iter(kinds)) for kinds in per_stage.values())


def test_a_block_with_actions_is_faster_than_the_plain_block_at_the_same_limit():
    plain = build_problem(4, 8, 1, "looped", None, 1.0)
    slow, _ = periodic_search(plain, time_limit=1.0)
    with_actions = build_problem(4, 8, 1, "looped", None, 1.0, memory_actions=True)
    fast, block = periodic_search(with_actions, time_limit=1.0, actions=BOTH)
    assert fast.evaluation.feasible and max(fast.evaluation.peaks) <= 1.0 + 1e-9
    assert fast.makespan < 0.75 * slow.makespan
    assert block.choice and set(block.choice.values()) <= set(BOTH)


def test_the_block_respects_the_host_limit():
    def block(host: float | None):
        request = SynthRequest(
            pp=4, microbatches=8, memory_limit=1.0, periodic=True, memory_actions=("offload",), host_limit=host
        )
        return synthesize_file(replace(request, time_limit=1.0))

    free = block(None)
    assert free.result.evaluation.host_peak > 2 + 1e-9  # the limit below binds
    bounded = block(2.0)
    assert bounded.result.evaluation.host_peak <= 2 + 1e-9
    assert bounded.check.valid and bounded.check.makespan == pytest.approx(bounded.result.makespan)
    assert "memory host limit = 2" in bounded.text and "offload(" in bounded.text
    assert bounded.result.makespan < block(0.5).result.makespan  # (with no room on the host: no offload at all)


def test_without_actions_a_problem_with_the_action_types_gets_the_plain_blocks():
    plain = build_problem(4, 8, 1, "looped", None, 2.0)
    typed = build_problem(4, 8, 1, "looped", None, 2.0, memory_actions=True)
    a = periodic_schedules(plain, 0.3)
    b = periodic_schedules(typed, 0.3)
    assert [x.offsets for x in a] == [x.offsets for x in b] and [x.orders for x in a] == [x.orders for x in b]
    assert all(not x.choice and not x.copies for x in b)


@pytest.mark.e2e
def test_the_actions_search_takes_the_block_as_a_candidate(monkeypatch):
    request = SynthRequest(pp=4, microbatches=8, memory_limit=1.0, memory_actions=BOTH, time_limit=2.0)
    # (the list scheduler with actions finds a faster schedule here: left out, so the block is what is compared)
    monkeypatch.setattr(synth, "action_policies", lambda problem, allowed: [])
    monkeypatch.setattr(synth, "PERIODIC_SHARE", 0.5)  # (the block is found in far less; a margin on a busy machine)
    with_block = synthesize_file(request)
    monkeypatch.setattr(synth, "PERIODIC_SHARE", 0.0)
    without = synthesize_file(request)
    assert "periodic block" in with_block.result.origin and "periodic block" not in without.result.origin
    assert with_block.result.makespan < without.result.makespan
    assert with_block.check.valid and with_block.check.makespan == pytest.approx(with_block.result.makespan)
    timer = Evaluator(with_block.result.problem)
    assert timer.evaluate(with_block.result.orders).feasible


@pytest.mark.parametrize(
    ("pp", "vpp", "placement", "limit"), [(4, 1, "looped", 1.0), (4, 2, "vshape", 1.5), (3, 2, "looped", 2.0)]
)
def test_the_blocks_action_jobs_keep_their_order_and_the_checker_never_runs_a_job_later(pp, vpp, placement, limit):
    p = build_problem(pp, 8, vpp, placement, None, limit, memory_actions=True)
    blocks = periodic_schedules(p, 0.5, periods=1, search_longer=True, actions=BOTH)
    assert blocks and blocks[0].choice
    block = blocks[0]
    planned = block.planned_times(p.microbatches)
    exp, names = p.expansion, p.expansion.type_names
    kind = {t: names[t] for t in range(len(names))}

    def cost(job):
        t, s, _ = job
        return exp.cost[t][p.rank_of[s]][p.chunk_of[s]]

    def end(job):
        return planned[job] + cost(job)

    by_name = {kind[t]: t for t in kind}
    for (t, s, mb), at in planned.items():
        forward, gradient = (by_name["forward"], s, mb), (by_name["backward_b"], s, mb)
        if gradient not in planned:  # (whole backwards)
            gradient = (by_name["backward"], s, mb)
        if kind[t] in ("recompute", "offload"):  # after its forward, and (R, L) before the gradient job
            assert at >= end(forward) - 1e-9
        if kind[t] == "recompute":
            assert end((t, s, mb)) <= planned[gradient] + 1e-9
        if kind[t] == "reload":
            assert at >= end((by_name["offload"], s, mb)) - 1e-9 and end((t, s, mb)) <= planned[gradient] + 1e-9
    for order in block.orders:  # one copy at a time on the rank's stream
        copies = sorted((planned[j], end(j)) for j in order if kind[j[0]] in ("offload", "reload"))
        assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(copies))
    ev = Evaluator(p).evaluate(block.orders)
    assert ev.feasible
    for r, order in enumerate(block.orders):  # as soon as rank, input and stream allow: never later than planned
        for i, job in enumerate(order):
            assert ev.start[r][i] <= planned[job] + 1e-9, (r, job)
