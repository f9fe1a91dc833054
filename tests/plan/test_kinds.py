"""A job kind is one row of `ppdsl.plan.kinds`: a made-up kind added as a row, and nothing else, is checked,
simulated, timed by synth's evaluator and built into a plan as its row says.

The kind is `prefetch`, which behaves like a reload (its row differs from reload's only in its name, letter and
colours): it runs on the copy stream, restores what its offload moved, waits for that offload and is waited for by
the backward. Every test compares a schedule that reloads with the same schedule prefetching instead, so a caller
that still branched on the name `reload` (or on the built-in actions' names) would time, count, check or build the
prefetch differently, and the test would fail. docs/architecture.md ("a new job kind") lists the places a new kind
touches; this is what keeps that list true.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import pytest

from ppdsl.analysis.check import check, check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.analysis.memory import MemoryActions
from ppdsl.analysis.scenario import Scenario
from ppdsl.language.resolve import resolve_text
from ppdsl.plan import kinds
from ppdsl.plan.kinds import ACTIONS, KINDS, JobStream, Memory
from ppdsl.reports.simulate import simulate
from ppdsl.reports.trace import COPY_TID, job_events

RELOAD = KINDS["reload"]
PREFETCH = replace(RELOAD, name="prefetch", letter="P", style="bold black on pink1", colour="#d98fb0")

# 1F1B with every forward's activations offloaded right after it and brought back before its backward
OFFLOADED_1F1B = """
schedule "1F1B-Offload"
cost offload = 0.75
cost {restore} = 1.25
order {{
    let warmup = pp - rank
    repeat warmup {{ forward offload }}
    repeat microbatches - warmup {{ {restore} backward forward offload }}
    repeat warmup {{ {restore} backward }}
    optimizer
}}
"""
PP, M = 3, 6


@pytest.fixture
def prefetch():
    with kinds.register(PREFETCH) as row:
        yield row


def schedule(restore: str) -> str:
    return OFFLOADED_1F1B.format(restore=restore)


def test_the_table_is_rows_with_properties():
    """Each property callers read is on the row: a reload restores on the copy stream after its offload, before
    the backward; the optimizer runs once a step; backward_b shares backward's counter; the collectives run on the
    collective stream, optional as the memory actions are but no memory action."""
    assert RELOAD.memory is Memory.RESTORES and RELOAD.stream is JobStream.COPY and RELOAD.optional
    assert RELOAD.after == "offload" and "backward" in RELOAD.before and RELOAD.program == "reload"
    assert KINDS["optimizer"].per_step and not KINDS["forward"].per_step
    assert kinds.counter_of("backward_b") == "backward" and kinds.counter_of("forward") == "forward"
    assert [k.torch for k in kinds.ALWAYS] == ["F", "B", "I", "W", None]
    assert kinds.source_of("reload") == "forward" and kinds.source_of("backward") == "backward"
    assert [k.name for k in KINDS.values() if k.stream is JobStream.COLLECTIVE] == ["reduce_grads", "sync_shared"]
    assert all(k.optional and not k.acts_on_memory for k in kinds.collectives())
    assert KINDS["sync_shared"].per_step and not KINDS["reduce_grads"].per_step
    assert kinds.action_names() == tuple(k.name for k in ACTIONS)


def test_register_adds_a_row_for_the_block_only(prefetch):
    assert kinds.kind("prefetch") is prefetch and kinds.by_letter("P") is prefetch
    assert kinds.action_names()[-1] == "prefetch"
    with pytest.raises(ValueError):
        with kinds.register(replace(PREFETCH, letter="Q")):
            pass  # pragma: no cover - a kind of that name exists
    with pytest.raises(ValueError):
        with kinds.register(replace(KINDS["forward"], name="forward2")):
            pass  # pragma: no cover - only memory actions may be added


def test_register_leaves_the_table_as_it_was():
    with kinds.register(PREFETCH):
        pass
    assert "prefetch" not in KINDS and kinds.by_letter("P") is None


def test_a_schedule_names_the_new_kind_and_checks_as_with_a_reload(prefetch):
    """`check` accepts the prefetch and times it as the reload: the same start and end of every job, the same
    peaks on each rank and on the host."""
    reloads = check(Scenario(resolve_text(schedule("reload")), PP, M))
    prefetches = check(Scenario(resolve_text(schedule("prefetch")), PP, M))
    assert reloads.valid and prefetches.valid, prefetches.diagnostics
    assert "prefetch" in prefetches.expansion.type_names
    exp = prefetches.expansion
    assert exp.cost[exp.type_names.index("prefetch")][0][0] == 1.25
    for a, b in ((reloads.execution, prefetches.execution),):
        assert a.start == b.start and a.end == b.end
    assert reloads.makespan == prefetches.makespan and reloads.bubble_ratio == prefetches.bubble_ratio
    assert reloads.peak_activations == prefetches.peak_activations
    assert reloads.host_peak == prefetches.host_peak and prefetches.host_peak > 0


def test_the_backward_waits_for_its_prefetch_and_copies_run_beside_the_compute(prefetch):
    """The timing rule read off the row: a prefetch starts after its offload's copy ended, its backward starts after
    it ended, and its time is not the rank's busy time."""
    exp = expand(resolve_text(schedule("prefetch")), PP, M)
    result = check_expansion(exp)
    actions = MemoryActions.of(exp)
    p = exp.type_names.index("prefetch")
    assert actions.copies(p) and actions.restores(p) and p in actions.types
    ex = result.execution
    for r, codes in enumerate(exp.jobs):
        when = {exp.decode(code): (ex.start[r][i], ex.end[r][i]) for i, code in enumerate(codes)}
        for (t, c, mb), (start, end) in when.items():
            if t == p:
                assert start >= when[(actions.offload, c, mb)][1]
                assert when[(kinds.BACKWARD, c, mb)][0] >= end
        compute = sum(end - start for (t, _, _), (start, end) in when.items() if not actions.copies(t))
        assert ex.ranks[r].busy == pytest.approx(compute)


def test_a_misplaced_prefetch_is_diagnosed_as_a_misplaced_reload(prefetch):
    """S117 and S118 read the row: a prefetch before its offload, and a backward with neither a reload nor a
    prefetch of its offloaded activations."""
    early = "table {\nrank 0: F0 P0 O0 B0 optimizer\n}"
    codes = {d.code for d in check(Scenario(resolve_text(early), 1, 1)).diagnostics}
    assert "S117" in codes
    message = next(d for d in check(Scenario(resolve_text(early), 1, 1)).diagnostics if d.code == "S117").message
    assert message.startswith("the prefetch of micro-batch 0 runs before its offload")
    missing = "table {\nrank 0: F0 O0 B0 optimizer\n}"
    assert "S118" in {d.code for d in check(Scenario(resolve_text(missing), 1, 1)).diagnostics}
    fine = "table {\nrank 0: F0 O0 P0 B0 optimizer\n}"
    assert check(Scenario(resolve_text(fine), 1, 1)).valid


def test_the_simulator_draws_the_prefetch_on_the_copy_lane(prefetch):
    reloads = simulate(Scenario(resolve_text(schedule("reload")), PP, M))
    prefetches = simulate(Scenario(resolve_text(schedule("prefetch")), PP, M))
    a, b = list(reloads.jobs()), list(prefetches.jobs())
    assert [(j.rank, j.start, j.end) for j in a] == [(j.rank, j.start, j.end) for j in b]
    assert {j.type for j in b} >= {"prefetch"} and "reload" not in {j.type for j in b}
    assert all(
        (event["tid"] == COPY_TID) == (job.type in ("offload", "prefetch"))
        for event, job in zip(job_events(b, 1.0), b, strict=True)
    )
    assert reloads.memory_timeline(0) == prefetches.memory_timeline(0)


def test_synths_evaluator_times_the_prefetch_as_a_reload(prefetch):
    """synth times a candidate with the checker's model: orders that prefetch take as long and as much memory as
    the same orders reloading."""
    from ppdsl.synth.problem import problem_from_expansion
    from ppdsl.synth.schedule import Evaluator

    results = []
    for restore in ("reload", "prefetch"):
        exp = expand(resolve_text(schedule(restore)), PP, M)
        problem = problem_from_expansion(exp, "looped", "no", memory_actions=True)
        orders = [
            [(t, exp.stage_of[r][c], mb) for t, c, mb in map(exp.decode, codes) if t != kinds.OPTIMIZER]
            for r, codes in enumerate(exp.jobs)
        ]
        ev = Evaluator(problem).evaluate(orders)
        assert ev.feasible
        results.append((ev.makespan, ev.peaks, ev.host_peak, ev.start, ev.end))
    assert results[0] == results[1]


@pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")
def test_build_plan_builds_the_prefetch_as_a_reload(prefetch):
    """The plan spec says which program the runtime builds for the new kind (its row's `program`), and a step
    trained with prefetches ends at the parameters of the same step with reloads."""
    from ppdsl.analysis.plan_spec import checked_spec
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train

    params = []
    for restore in ("reload", "prefetch"):
        exp = expand(resolve_text(schedule(restore)), 2, 4)
        spec = checked_spec(exp)
        assert {jt.name: jt.memory for jt in spec.job_types if jt.memory}[restore] == "reload"
        trainer = PipelineTrainer(spec, load_model(None), TrainConfig(batch_size=16))
        train(trainer, 1)
        params.append(trainer.parameters())
    assert params[0].keys() == params[1].keys()
    assert all((params[0][k] == params[1][k]).all() for k in params[0])


def test_the_architecture_doc_lists_the_places_a_new_kind_touches():
    """docs/architecture.md's "a new job kind" row names the row, the rule of time and the runtime builders, and
    this test, which shows that the rest reads the row; each place it names exists."""
    from paths import ROOT

    doc = (ROOT / "docs" / "architecture.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| a new job kind |"))
    places = ["plan/kinds.py", "analysis/timing.py", "runtime/split.py", "runtime/memory_jobs.py"]
    for place in places:
        assert f"`{place}`" in row and (ROOT / "ppdsl" / place).is_file(), place
    assert "`tests/plan/test_kinds.py`" in row and (ROOT / "tests" / "plan" / "test_kinds.py").is_file()


def test_a_plan_module_lists_the_prefetch_as_it_lists_a_reload(prefetch):
    """`ppdsl compile`: the plan module's job lists name the new kind where the reload schedule's name the reload,
    and its JOB_TYPES carry the new kind's region and fraction."""
    import ppdsl

    lists = {}
    for restore in ("reload", "prefetch"):
        namespace: dict = {}
        exec(
            compile(ppdsl.compile(resolve_text(schedule(restore)), pp=PP, microbatches=M), "<plan>", "exec"), namespace
        )
        job_types = {jt["name"]: jt for jt in namespace["JOB_TYPES"]}
        assert job_types[restore]["region"] == "reload" and "fraction" in job_types[restore]
        lists[restore] = [namespace["job_list"](r, PP, 1, M) for r in range(PP)]
    renamed = [[("reload" if t == "prefetch" else t, c, mb) for t, c, mb in jobs] for jobs in lists["prefetch"]]
    assert renamed == lists["reload"] and any(t == "prefetch" for t, _, _ in lists["prefetch"][0])


def test_a_plan_modules_spec_builds_the_prefetch_as_a_reload(prefetch):
    """A plan module hands `build_plan` the spec of its JOB_TYPES (`plan_module_spec`), which reads the kind's row
    for the program the runtime builds, as `analysis.plan_spec` does for a checked schedule."""
    from ppdsl.plan.spec import plan_module_spec

    exp = expand(resolve_text(schedule("prefetch")), 2, 4)
    orders = [exp.job_tuples(r) for r in range(2)]
    spec = plan_module_spec([jt.to_dict() for jt in exp.defn.job_types], exp.stage_of, orders, [], 4)
    assert {jt.name: jt.memory for jt in spec.job_types}["prefetch"] == "reload"


# A made-up collective: a row like sync_shared's but its name (an all-reduce of an auxiliary loss's statistics, say).
# Timed, checked and deadlock-proven as its row says, with nothing else written.
SYNC_AUX = replace(
    KINDS["sync_shared"], name="sync_aux", region="sync_aux", style="bold white on grey30", colour="#555"
)
SHARED = """
schedule "shared"
job send_backward : backward after backward sends
order {{
    forward * microbatches
    if rank == 1 {{
        repeat microbatches - 1 {{ backward send_backward }}
        backward
        {early}
        send_backward
        {late}
    }} else {{
        repeat microbatches {{ backward send_backward }}
        {name}
    }}
    optimizer
}}
"""


def _shared(name: str, early: bool):
    text = SHARED.format(name=name, early=name if early else "", late="" if early else name)
    return check(Scenario(resolve_text(text), 2, 2))


def test_a_made_up_collective_meets_and_deadlocks_as_sync_shared():
    with kinds.register(SYNC_AUX):
        made_up, builtin = _shared("sync_aux", early=False), _shared("sync_shared", early=False)
        assert made_up.valid and builtin.valid, made_up.diagnostics
        assert made_up.execution.start == builtin.execution.start and made_up.execution.end == builtin.execution.end
        assert [r.exposed_collective for r in made_up.ranks] == [r.exposed_collective for r in builtin.ranks]
        stuck = _shared("sync_aux", early=True)
        assert [d.code for d in stuck.diagnostics] == ["E074"] and "`sync_aux`" in stuck.diagnostics[0].message
