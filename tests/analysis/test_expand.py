"""`ppdsl.analysis.expand`: the one builder of an `Expansion` (every input applied at construction, nothing
written after), and bounded evaluation: the job limit (refused before anything runs, in the analysis layer, so
every command and the Python API inherit it) and the evaluation budget (proportional to the jobs the sizes need)."""

from __future__ import annotations

import dataclasses
import time

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.check import check
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import (
    BUDGET_PER_JOB,
    DEFAULT_MAX_JOBS,
    _fail,
    bind_params,
    evaluation_budget,
    expand,
    least_jobs,
    scale_costs,
)
from ppdsl.analysis.memory import MemoryModel
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_files
from ppdsl.language.resolve import load, resolve_text
from ppdsl.language.runnable import compiled

GPIPE = "order { forward * microbatches backward * microbatches optimizer }"
NESTED = """
order {
    for a in 0 .. 4000 {
        for b in 0 .. 4000 {
            for c in 0 .. 4000 {
                if a == 0 and b == 0 and c == 0 { forward * microbatches backward * microbatches }
            }
        }
    }
    optimizer
}
"""


def codes(fn) -> list[str]:
    with pytest.raises(DiagnosticError) as err:
        fn()
    return [d.code for d in err.value.diagnostics]


def test_the_default_limit_covers_the_largest_sizes_it_promises():
    # pp=64, vpp=4, microbatches=4096 with four jobs per micro-batch (receive, forward, backward, send)
    assert 4 * 64 * 4 * 4096 + 64 <= DEFAULT_MAX_JOBS
    assert least_jobs(64, 4, 4096) == 2 * 64 * 4 * 4096 + 64


def test_sizes_over_the_limit_are_refused_up_front_with_the_count():
    start = time.perf_counter()
    result = check(Scenario("1f1b", pp=100_000, microbatches=100_000))
    assert time.perf_counter() - start < 0.5
    (diag,) = result.diagnostics
    assert diag.code == "E015" and "20,000,100,000 jobs" in diag.message and "--max-jobs 20000100000" in diag.help


@pytest.mark.parametrize(
    "run",
    [
        lambda: ppdsl.expand("1f1b", pp=100_000, microbatches=100_000),
        lambda: ppdsl.simulate("1f1b", pp=100_000, microbatches=100_000),
        lambda: ppdsl.compile("1f1b", pp=100_000, microbatches=100_000, literal=True),
        lambda: Scenario("fthenb", pp=64, microbatches=1 << 20, vpp=1024).expansion(),  # pp * vpp alone is 2^16
    ],
)
def test_every_way_in_is_under_the_limit(run):
    assert codes(run) == ["E015"]


def test_the_limit_can_be_raised_and_an_order_running_past_it_is_refused():
    assert check(Scenario("1f1b", pp=4, microbatches=8, max_jobs=67)).diagnostics[0].code == "E015"  # least 68
    over = check(Scenario("1f1b", pp=4, microbatches=8, max_jobs=100))  # 1F1B runs 132
    assert [d.code for d in over.diagnostics] == ["E015"] and "runs 132 jobs" in over.diagnostics[0].message
    assert check(Scenario("1f1b", pp=4, microbatches=8, max_jobs=132)).valid


def test_max_jobs_on_the_command_line(in_repo):
    runner = CliRunner()
    for command in ("check", "expand", "show", "trace", "compile"):
        args = [command, "1f1b", "--pp", "4", "-m", "8", "--max-jobs", "50"]
        result = runner.invoke(app, args + (["-o", "-"] if command == "compile" else []))
        assert result.exit_code == 2 and "error[E015]" in result.stderr, command
    assert runner.invoke(app, ["check", "1f1b", "--pp", "4", "-m", "8", "--max-jobs", "132"]).exit_code == 0


@pytest.mark.parametrize(("pp", "m", "vpp"), [(4, 8, 1), (64, 4096, 4)])
def test_runaway_loops_stop_at_the_loop_in_milliseconds(pp, m, vpp):
    defn = resolve_text(NESTED, "nested.sched")
    start = time.perf_counter()
    with pytest.raises(DiagnosticError) as err:
        expand(defn, pp, m, vpp)
    assert time.perf_counter() - start < 0.5
    (diag,) = err.value.diagnostics
    assert diag.code == "S113" and diag.span.line == 5  # the innermost loop, where the budget runs out
    assert f"{evaluation_budget(5, vpp, m):,} evaluation steps" in diag.message


def test_the_library_needs_a_fraction_of_its_budget():
    """Steps per job a rank can own, over a sweep of the library: under 4 (function calls count), far below the
    budget's 16."""
    worst = 0.0
    for path in library_files():
        defn = load(path)
        run = compiled(defn)
        if run.order is None:
            continue
        for pp in (1, 2, 4, 8):
            for vpp in (1, 2, 4):
                for m in (1, 2, pp, 2 * pp + 1, 64):
                    env = {"pp": pp, "vpp": vpp, "microbatches": m, **bind_params(defn, {})}
                    if not all(run.formula(r.condition)(env) for r in defn.requires):
                        continue
                    ntypes = len(defn.job_types)
                    for rank in range(pp):
                        counters = [[0] * vpp for _ in range(ntypes)]
                        budget = 1 << 40
                        args = (pp, vpp, m, rank, *(env[p] for p in defn.params), [], [], counters, vpp, ntypes)
                        left = run.order(*args, 1 << 40, _fail, budget)
                        worst = max(worst, (budget - left) / (ntypes * vpp * m))
    assert 0 < worst < 4 <= BUDGET_PER_JOB / 4


# -------------------------------------------------------------------------------------- the one builder


def test_an_expansion_cannot_be_written_after_it_is_built():
    exp = expand(resolve_text(GPIPE), 2, 2)
    for field, value in (("cost", []), ("mem_delta", []), ("memory_limit", [1.0, 1.0]), ("memory_unit", "bytes")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(exp, field, value)
    assert exp.memory_unit == "activations" and exp.memory_limit == [None, None]


def test_costs_from_outside_are_applied_while_building_and_the_schedules_own_stay_its_own():
    defn = resolve_text("cost forward = 2\ncomm latency = 0.5\n" + GPIPE)
    own = expand(defn, 2, 2)
    assert own.cost[0] == [[2.0], [2.0]] and own.latency == 0.5 and own.bandwidth is None
    spec = CostSpec({"backward": 4, "bandwidth": 2}, {"costs": {"forward": 3}, "stages": {"1": {"forward": 5}}})
    given = expand(defn, 2, 2, costs=spec)
    # the file (per type, then per stage), then the pairs; what neither names keeps the schedule's value
    assert given.cost[0] == [[3.0], [5.0]] and given.cost[1] == [[4.0], [4.0]]
    assert (given.latency, given.bandwidth) == (0.5, 2.0)
    assert expand(defn, 2, 2).cost == own.cost  # building with costs changed nothing of the schedule


def test_a_cost_pair_naming_no_job_type_is_refused_by_the_builder():
    assert codes(lambda: expand(resolve_text(GPIPE), 2, 2, costs=CostSpec({"fwd": 1}))) == ["E007"]


def test_a_memory_model_replaces_the_activation_counts_stage_by_stage():
    memory = MemoryModel({0: {"forward": 96, "backward": -96}, 1: {"forward": 64}})
    exp = expand(resolve_text(GPIPE), 2, 2, memory=memory)
    forward, backward, optimizer = (exp.defn.type_index(n) for n in ("forward", "backward", "optimizer"))
    assert exp.memory_unit == "bytes"
    assert exp.mem_delta[forward] == [[96.0], [64.0]]  # [rank][chunk]: rank r holds stage r
    assert exp.mem_delta[backward] == [[-96.0], [0.0]]  # a (stage, type) the model does not name changes nothing
    assert exp.mem_delta[optimizer] == [[0.0], [0.0]]


def test_a_memory_limit_from_outside_replaces_the_schedules_on_every_rank():
    defn = resolve_text("memory limit = pp - rank\n" + GPIPE)
    assert expand(defn, 2, 2).memory_limit == [2.0, 1.0]
    given = expand(defn, 2, 2, memory_limit=8)
    assert given.memory_limit == [8, 8] and given.memory_limit_given
    # the schedule's own limit is still evaluated: one that fails at these sizes is reported either way
    broken = resolve_text("memory limit = 1 / (pp - 2)\n" + GPIPE)
    assert codes(lambda: expand(broken, 2, 2, memory_limit=8)) == ["S111"]


def test_scaling_costs_is_a_new_expansion_with_the_same_orders():
    exp = expand(resolve_text("cost forward = 2\ncomm latency = 0.5\n" + GPIPE), 2, 2)
    half = scale_costs(exp, 0.5)
    assert half.cost[0] == [[1.0], [1.0]] and half.cost[1] == [[1.0], [1.0]]
    assert exp.cost[0] == [[2.0], [2.0]]  # the original is untouched
    assert half.jobs is exp.jobs and half.latency == exp.latency and half.mem_delta == exp.mem_delta
    for factor in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            scale_costs(exp, factor)
