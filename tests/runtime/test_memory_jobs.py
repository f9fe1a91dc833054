"""Recompute, offload and reload jobs run by the Paddle runtime (issue 17), on schedules written in the language.

The library's 1F1B with recompute (full and selective), and 1F1B with an offload after every forward and a reload
before every backward (`OFFLOAD_1F1B`, written here), each with its fractions declared (`memory recompute fraction`,
`memory offload fraction`). The plan takes what each memory job does from the plan specification
(`JobTypeSpec.memory` / `fraction`). Every run trains to the parameters of 1F1B without memory jobs, and the bytes
each rank holds at job boundaries (`held.plan_held_bytes`) are what `runtime/memory.py:predicted_peaks` predicts from the same
programs, within 10%.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load, resolve_text

from paths import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

TOLERANCE = 0.10

# 1F1B with every forward's activations offloaded right after it and reloaded right before its backward
OFFLOAD_1F1B = """
schedule "1F1B-Offload"
{fraction}
order {{
    let warmup = pp - rank
    repeat warmup {{ forward offload }}
    repeat microbatches - warmup {{ reload backward forward offload }}
    repeat warmup {{ reload backward }}
    optimizer
}}
"""


def offload_1f1b(pp: int, m: int, fraction: float | None = None):
    declared = "" if fraction is None else f"memory offload fraction = {fraction}"
    return expand(resolve_text(OFFLOAD_1F1B.format(fraction=declared)), pp, m)


def library(name: str, pp: int, m: int, text_before: str = "", vpp: int = 1, **params):
    """A library schedule, with `text_before` (a declaration) put before its text."""
    path = library_dir() / f"{name}.sched"
    defn = resolve_text(text_before + "\n" + path.read_text(), str(path)) if text_before else load(path)
    return expand(defn, pp, m, vpp, params=params or None)


def trainer(exp, model=None, batch=32, optimizer="adam"):
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig

    config = TrainConfig(batch_size=batch, optimizer=optimizer)
    return PipelineTrainer(checked_spec(exp), load_model(model), config)


def max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


def measured_peaks(t, steps: int):
    """Held bytes per rank (device, host store) of a step run after `steps`: the account of the plan the step ran
    (`held.plan_held_bytes`, what `ppdsl run` reports), the same every run; `test_held.py` holds it to the allocator's
    figures."""
    from ppdsl.runtime.train import train

    memory = train(t, steps + 1, memory=True).memory
    return memory.peak, memory.host_peak


def assert_near(measured: list[int], predicted: list[int]) -> None:
    for got, want in zip(measured, predicted, strict=True):
        assert want > 0 and abs(got / want - 1) <= TOLERANCE, (measured, predicted)


def run_and_compare(exp, base, steps=3, **kw):
    """Train `exp` and `base` `steps` steps from the same start; their largest parameter difference and the trainer."""
    from ppdsl.runtime.train import train

    t, ref = trainer(exp, **kw), trainer(base, **kw)
    train(t, steps)
    train(ref, steps)
    return max_difference(t.parameters(), ref.parameters()), t, ref


@pytest.fixture(scope="module")
def base():
    return expand(load(library_dir() / "1f1b.sched"), 4, 8)


@pytest.mark.e2e
def test_full_recompute_trains_alike_and_holds_one_micro_batch(base):
    """1F1B at pp=4, m=8, every (chunk, micro-batch) recomputed: parameters as without (1e-6); every rank but the
    last then holds one micro-batch's activations plus the stage inputs of those in flight, as predicted."""
    from ppdsl.runtime.memory import predicted_peaks

    exp = library("1f1b_recompute", 4, 8)
    diff, t, ref = run_and_compare(exp, base)
    assert diff <= 1e-6
    predicted = predicted_peaks(t.built.programs, t.built.job_names, exp.stage_of, t.built.memory_jobs)
    without = predicted_peaks(ref.built.programs, ref.built.job_names, base.stage_of, {})
    device, host = measured_peaks(t, 3)
    assert_near(device, predicted.device)
    assert host == [0] * exp.pp
    # the first rank kept 4 micro-batches in flight: now one whole and 3 stage inputs, under half
    assert device[0] < 0.5 * without.device[0]
    stage0 = t.built.programs["forward@0"]
    assert stage0 is not t.built.programs["recompute@0"]


@pytest.mark.e2e
def test_interleaved_offload_trains_like_interleaved_1f1b():
    """The library's interleaved 1F1B with offload (vpp 2): its copies run as memory programs (from the spec), the
    parameters equal interleaved 1F1B's at the same sizes and seed."""
    exp = library("interleaved1f1b_offload", 2, 4, vpp=2)
    assert "offload" in {t for r in range(exp.pp) for t, _, _ in exp.job_tuples(r)}
    diff, t, _ = run_and_compare(exp, library("interleaved1f1b", 2, 4, vpp=2), batch=16)
    assert diff <= 1e-6
    assert {job.kind for job in t.built.memory_jobs.values()} == {"offload", "reload"}
    assert "offload@0" in t.built.programs and "reload@0" in t.built.programs


def checker_peaks(name: str, pp: int, m: int, vpp: int = 1, batch: int = 32):
    """What `ppdsl check NAME --model builtin` predicts: bytes per rank on the device, and on the host."""
    from ppdsl.analysis.check import check
    from ppdsl.analysis.scenario import Scenario
    from ppdsl.runtime.memory import model_memory

    result = check(Scenario(name, pp, m, vpp, memory=model_memory(None, batch)))
    assert result.completed
    return result.peak_activations, result.host_peak


@pytest.mark.e2e
def test_the_checker_predicts_the_measured_peaks_of_full_recompute():
    """`check --model builtin` at pp=4, m=8: the measured model has the recompute's row (what it writes again), so the
    checker's bytes per rank are the measured peak within 10%, and the recompute's fall from 1F1B's is the measured
    one."""
    exp = library("1f1b_recompute", 4, 8)
    device, _ = measured_peaks(trainer(exp), 2)
    predicted, host = checker_peaks("1f1b_recompute", 4, 8)
    assert_near(device, [round(p) for p in predicted])
    assert host == 0
    without, _ = checker_peaks("1f1b", 4, 8)
    assert predicted[0] < 0.5 * without[0]


@pytest.mark.e2e
def test_the_checker_predicts_the_measured_device_peak_of_interleaved_offload():
    """The library's offload schedule at pp=4, m=8, vpp=2: the checker's device bytes per rank are the measured peak
    within 10%, rank 0 at most half of interleaved 1F1B's (measured), and the host store as the checker counts it."""
    exp = library("interleaved1f1b_offload", 4, 8, vpp=2)
    device, host = measured_peaks(trainer(exp), 1)
    predicted, host_predicted = checker_peaks("interleaved1f1b_offload", 4, 8, 2)
    assert_near(device, [round(p) for p in predicted])
    assert abs(sum(host) / host_predicted - 1) <= TOLERANCE  # the checker counts one host for all ranks
    without = measured_peaks(trainer(library("interleaved1f1b", 4, 8, vpp=2)), 1)[0]
    assert device[0] <= 0.5 * without[0]


@pytest.mark.e2e
def test_selective_recompute_keeps_some_micro_batches(base):
    """Two micro-batches of each rank's window recompute, the others keep: between the peaks of none and full, as
    predicted, same parameters. The lean forward is the same job program as the full one (skip-GC sets are per
    job)."""
    from ppdsl.runtime.memory import predicted_peaks

    exp = library("1f1b_selective", 4, 8, recomputed=2)
    full = library("1f1b_recompute", 4, 8)
    diff, t, ref = run_and_compare(exp, base)
    assert diff <= 1e-6
    predicted = predicted_peaks(t.built.programs, t.built.job_names, exp.stage_of, t.built.memory_jobs)
    t_full = trainer(full)
    lower = predicted_peaks(t_full.built.programs, t_full.built.job_names, full.stage_of, t_full.built.memory_jobs)
    upper = predicted_peaks(ref.built.programs, ref.built.job_names, base.stage_of, {})
    assert lower.device[0] < predicted.device[0] < upper.device[0]
    assert_near(measured_peaks(t, 3)[0], predicted.device)
    assert sum(1 for name in t.built.programs if name.startswith("forward@")) == exp.nstages


@pytest.mark.e2e
def test_offload_moves_activations_to_the_host_store(base):
    """Offload after every forward, reload before every backward: same parameters; on the device a rank holds one
    micro-batch's activations, the host store holds what the rank had in flight (CPU: an emulation, one allocator)."""
    from ppdsl.runtime.memory import predicted_peaks

    exp = offload_1f1b(4, 8)
    diff, t, ref = run_and_compare(exp, base)
    assert diff <= 1e-6
    predicted = predicted_peaks(t.built.programs, t.built.job_names, exp.stage_of, t.built.memory_jobs)
    without = predicted_peaks(ref.built.programs, ref.built.job_names, base.stage_of, {})
    device, host = measured_peaks(t, 3)
    assert_near(device, predicted.device)
    assert_near(host, predicted.host)
    assert device[0] <= 0.5 * without.device[0]
    assert abs(predicted.host[0] / without.device[0] - 1) <= 0.02  # what rank 0 kept, moved


@pytest.mark.e2e
def test_partial_offload_moves_the_largest_activations_first(base):
    """An offload of half (a fraction of its job type) moves at least half of the stage's bytes and fewer values than
    a whole one; training is unchanged."""
    from ppdsl.runtime.memory import predicted_peaks

    exp = offload_1f1b(4, 8, fraction=0.5)
    diff, t, _ = run_and_compare(exp, base)
    assert diff <= 1e-6
    assert t.built.memory_jobs["reload"].fraction == 0.5  # from the spec: a reload moves what its offload moved
    whole = trainer(offload_1f1b(4, 8))
    moved = [len(p.global_block().kwargs()) for p in (t.built.programs["offload@0"], whole.built.programs["offload@0"])]
    assert 0 < moved[0] < moved[1]
    part = predicted_peaks(t.built.programs, t.built.job_names, exp.stage_of, t.built.memory_jobs)
    full = predicted_peaks(whole.built.programs, whole.built.job_names, exp.stage_of, whole.built.memory_jobs)
    assert 0.5 * full.host[0] <= part.host[0] < full.host[0]


@pytest.mark.e2e
def test_partial_recompute_keeps_the_rest():
    """A recompute of half (its job type's fraction) writes again fewer values than a whole one, the largest first;
    the forward before it keeps the rest; training is unchanged."""
    from ppdsl.runtime.memory import predicted_peaks
    from ppdsl.runtime.skip_gc import defined_values

    base = expand(load(library_dir() / "1f1b.sched"), 2, 4)
    exp = library("1f1b_recompute", 2, 4, "memory recompute fraction = 0.5")
    diff, t, ref = run_and_compare(exp, base, batch=16)
    assert diff <= 1e-6
    whole = trainer(library("1f1b_recompute", 2, 4), batch=16)
    written = [len(defined_values(x.built.programs["recompute@0"])) for x in (t, whole)]
    assert 0 < written[0] < written[1]
    peaks = [
        predicted_peaks(x.built.programs, x.built.job_names, exp.stage_of, x.built.memory_jobs) for x in (t, whole)
    ]
    none = predicted_peaks(ref.built.programs, ref.built.job_names, base.stage_of, {})
    assert peaks[1].device[0] < peaks[0].device[0] < none.device[0]


def test_recompute_replays_the_dropout_masks(monkeypatch):
    """A dropout drawing from the generator: with a recompute, the backward must see the forward's mask. Both runs
    get the same seed ops (`seed_random_ops`, applied here to the reference by hand), and start from the same
    generator state: equal parameters. Without the replay (the recompute drawing again) they differ."""
    import paddle

    from ppdsl.runtime import plan as plan_module
    from ppdsl.runtime.recompute import seed_random_ops

    monkeypatch.syspath_prepend(str(ROOT))
    model = "tests.models.dropout_mlp:build"
    base = expand(load(library_dir() / "1f1b.sched"), 2, 4)
    exp = library("1f1b_recompute", 2, 4)

    def trained(e, seeded_by_hand=False):
        from ppdsl.runtime.train import train

        paddle.seed(7)
        t = trainer(e, model, batch=8, optimizer="sgd")
        if seeded_by_hand:  # the reference program gets the seed ops the recompute run gets
            assert seed_random_ops(t.program.main) == 2
            t = _rebuilt(t, e)
        paddle.seed(7)
        train(t, 2)
        return t.parameters()

    reference = trained(base, seeded_by_hand=True)
    assert max_difference(trained(exp), reference) <= 1e-6
    monkeypatch.setattr(plan_module, "seed_random_ops", lambda main, stages=None: 0)
    assert max_difference(trained(exp), reference) > 1e-4


def _rebuilt(t, exp):
    from ppdsl.runtime.plan import build_plan

    t.built = build_plan(t.program.main, t.program.startup, t.spec)
    t.executor._set_plan(t.built.plan)
    return t


def test_gpu_copies_go_to_pinned_memory_on_the_copy_stream():
    """The GPU path's programs (built, not run: no GPU here): memcpy_d2h to CUDA pinned memory and memcpy_h2d back,
    each on `copy_stream`; `describe` is what a dry run shows of them."""
    import paddle

    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.offload import GPU, describe, offload_program, reload_program

    import_paddle()
    source = paddle.static.Program()
    with paddle.static.program_guard(source):
        x = paddle.static.data("x", [2, 3])
    types = {"x": x.type()}
    lines = describe({"offload@1": offload_program(types, 1, GPU), "reload@1": reload_program(types, 1, GPU)})
    assert lines == [
        "offload@1: pd_op.memcpy_d2h x -> x@HOST1 dst_place_type=1 (CUDA pinned) stream copy_stream",
        "reload@1: pd_op.memcpy_h2d x@HOST1 -> x dst_place_type=1 (GPU) stream copy_stream",
    ]


@pytest.mark.parametrize(
    ("order", "message"),
    [
        (
            [("forward", 0, 0), ("offload", 0, 0), ("backward", 0, 0)],
            "`backward` of micro-batch 0 on rank 0 cannot run: its activations were offloaded by `offload`",
        ),
        ([("recompute", 0, 0), ("forward", 0, 0)], "`recompute` of micro-batch 0 on rank 0 cannot run: its forward "),
        (
            [("forward", 0, 0), ("reload", 0, 0), ("backward", 0, 0)],
            "`reload` of micro-batch 0 on rank 0 cannot run: no offload of it runs before",
        ),
        (
            [("forward", 0, 0), ("offload_half", 0, 0), ("reload", 0, 0), ("backward", 0, 0)],
            "`reload` of micro-batch 0 on rank 0 cannot run: `offload_half` moved another fraction",
        ),
    ],
)
def test_memory_jobs_out_of_order_are_refused(order, message):
    """E086 before any program is built: out of order, a job would read activations never made or already freed."""
    from ppdsl.common.diagnostics import DiagnosticError
    from ppdsl.runtime.memory_jobs import KINDS, MemoryJob, check_memory_orders

    actions = {**{kind: MemoryJob(kind) for kind in KINDS}, "offload_half": MemoryJob("offload", 0.5)}
    with pytest.raises(DiagnosticError) as err:
        check_memory_orders([order], [[0]], actions)
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.code == "E086" and diagnostic.message.startswith(message), diagnostic.message
    check_memory_orders([[("forward", 0, 0), ("offload", 0, 0), ("reload", 0, 0), ("backward", 0, 0)]], [[0]], actions)


def test_a_plan_modules_memory_actions_come_from_its_job_types():
    """`ppdsl compile`'s JOB_TYPES carry a memory action's fraction: the spec a plan module hands build_plan says
    what each does, as a checked schedule's does."""
    from ppdsl.analysis.plan_spec import expansion_spec
    from ppdsl.plan.spec import plan_module_spec
    from ppdsl.runtime.memory_jobs import MemoryJob, memory_actions

    exp = library("1f1b_recompute", 2, 4, "memory offload fraction = 0.25")
    orders = [exp.job_tuples(r) for r in range(2)]
    spec = plan_module_spec([jt.to_dict() for jt in exp.defn.job_types], exp.stage_of, orders, [], 4)
    want = {
        "recompute": MemoryJob("recompute"),
        "offload": MemoryJob("offload", 0.25),
        "reload": MemoryJob("reload", 0.25),
    }
    assert memory_actions(spec) == memory_actions(expansion_spec(exp)) == want
    assert memory_actions(spec, used={"forward", "recompute"}) == {"recompute": MemoryJob("recompute")}
