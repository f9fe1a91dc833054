"""ppdsl's `pipeline_scheduler_PPDSL` pass inside Paddle: `apply_pass`, `pipeline_pass` and the auto-parallel engine.

The job lists are compared with Paddle's own passes on the same program; the plans run on the standalone
executor and train like ppdsl's own runtime; Paddle's own modes still reach Paddle's code.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ppdsl
from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import SourceCache, render_all
from ppdsl.language.library import find_schedule, library_dir
from ppdsl.language.resolve import load
from ppdsl.plan.jobs import paddle_job_name

from paths import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed (pip install -e '.[test]')"
)

SPLIT_SCHEDULE = """\
\"\"\"Every forward, then every input gradient, then every weight gradient.\"\"\"
schedule "SplitAll"
order {
    forward * microbatches
    backward_b * microbatches
    backward_w * microbatches
    optimizer
}
"""


@pytest.fixture(scope="module")
def pp_pass():
    """`ppdsl.runtime.paddle_pass`, installed for this module's tests and uninstalled after them."""
    from ppdsl.runtime import paddle_pass
    from ppdsl.runtime.env import import_paddle

    import_paddle()
    paddle_pass.install()
    yield paddle_pass
    paddle_pass.uninstall()


def _program(vpp: int, m: int, micro_batch_size: int = 2, **kwargs):
    """One rank's training program of the built-in model (its chunks are stages 0 .. vpp-1), with roles and
    stages written in, as tests/test_runtime.py gives Paddle's passes (Paddle's VPP pass cannot place
    `embedding_grad` by itself)."""
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.program import build_training_program
    from ppdsl.runtime.stages import complete_roles, op_stages, stamp_stages

    paddle = import_paddle()
    program = build_training_program(
        paddle, BUILTIN, micro_batch_size=micro_batch_size, num_stages=vpp, microbatches=m, **{"lr": 0.1, **kwargs}
    )
    complete_roles(program.main)
    stamp_stages(program.main, op_stages(program.main))
    return program


def _jobs(plan) -> list[tuple[str, int]]:
    return [(job.type(), job.micro_batch_id()) for job in plan.job_list()]


def _attrs(pp: int, m: int, vpp: int, rank: int) -> dict:
    return {"num_micro_batches": m, "pp_degree": pp, "pp_stage": rank, "vpp_degree": vpp}


def _apply(mode: str, pp: int, m: int, vpp: int, rank: int, **attrs):
    from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass

    program = _program(vpp, m)
    return apply_pass(program.main, program.startup, mode, {**_attrs(pp, m, vpp, rank), **attrs})


# ---------------------------------------------------------------- (a) the same jobs as Paddle's passes


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("mode", "stem", "pp", "m", "vpp"),
    [
        ("FThenB", "fthenb", 2, 4, 1),
        ("FThenB", "fthenb", 3, 5, 1),
        ("1F1B", "1f1b", 4, 6, 1),
        ("1F1B", "1f1b", 3, 3, 1),
        ("VPP", "vpp", 2, 4, 2),
        ("VPP", "vpp", 3, 6, 2),
    ],
)
def test_ppdsl_mode_gives_paddles_job_list(pp_pass, mode, stem, pp, m, vpp):
    for rank in range(pp):
        theirs = _apply(mode, pp, m, vpp, rank)
        ours = _apply(f"ppdsl:{stem}", pp, m, vpp, rank)
        assert _jobs(ours) == _jobs(theirs), rank
        # every job type the jobs name has its program
        assert {t for t, _ in _jobs(ours)} == set(ours.job_types())


def test_a_sched_path_is_a_mode_too(pp_pass):
    path = str(library_dir() / "1f1b.sched")
    assert _jobs(_apply(path, 2, 4, 1, 1)) == _jobs(_apply("1F1B", 2, 4, 1, 1))


def test_registered_pass_honours_pipeline_pass_base_contract(pp_pass):
    """Driven through PipelinePassBase's own shared implementation (`_partial_pir_programs`, `_create_job_list`,
    Paddle's skip-GC), the pass gives the same jobs and job programs as its own `_apply_pir_single_impl`."""
    from paddle.distributed.passes.pass_base import PassBase, PassContext, new_pass
    from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_pass_base import PipelinePassBase

    assert PassBase._REGISTERED_PASSES[pp_pass.PASS_NAME] is pp_pass.PipelinePPDSLPass
    attrs = {**_attrs(2, 4, 1, 0), "ppdsl_schedule": "1f1b"}
    program = _program(1, 4)
    base_context = PassContext()
    PipelinePassBase._apply_pir_single_impl(new_pass(pp_pass.PASS_NAME, attrs), program.main, None, base_context)
    ours = pp_pass.apply_schedule(program.main, program.startup, "1f1b", _attrs(2, 4, 1, 0))
    base = base_context.get_attr("plan")
    assert _jobs(base) == _jobs(ours) == _jobs(_apply("1F1B", 2, 4, 1, 0))
    assert sorted(base.job_types()) == sorted(ours.job_types())


# ---------------------------------------------------------------- (b) schedules Paddle has no pass for


@pytest.mark.parametrize(("stem", "pp", "m", "vpp"), [("zbv", 2, 4, 2), ("zbh1", 2, 4, 1), ("dualpipev", 2, 4, 2)])
def test_schedule_paddle_lacks_gives_ppdsls_expansion(pp_pass, stem, pp, m, vpp):
    exp = expand(load(library_dir() / f"{stem}.sched"), pp, m, vpp)
    for rank in range(pp):
        plan = _apply(f"ppdsl:{stem}", pp, m, vpp, rank)
        want = [(paddle_job_name(t, c, vpp), mb) for t, c, mb in exp.job_tuples(rank)]
        assert _jobs(plan) == want, rank
        types = {t for t, _ in want}
        if "backward_w" in types:
            # the weight gradients really moved: backward_w runs the split-off weight-gradient matmuls
            ops = [op.name() for op in plan.ir_program("backward_w").global_block().ops]
            assert "pd_op.matmul" in ops, ops


def test_paddles_own_zbh1_cannot_split_pir_programs(pp_pass):
    """Why zbh1 above matters: Paddle registers ZBH1 but its pass has no PIR partitioning."""
    with pytest.raises(TypeError, match="cannot unpack non-iterable NoneType"):
        _apply("ZBH1", 2, 4, 1, 1)


def test_split_backward_attribute_reaches_a_schedule_that_declares_it(pp_pass):
    """Paddle's VPP pass reads `split_backward`; vpp.sched has that parameter, so the attribute sets it (vpp.sched,
    like Paddle, splits only when microbatches == pp)."""
    plain = _apply("ppdsl:vpp", 2, 2, 2, 0)
    split = _apply("ppdsl:vpp", 2, 2, 2, 0, split_backward=True)
    via_params = _apply("ppdsl:vpp", 2, 2, 2, 0, ppdsl_params={"split_backward": "true"})
    assert not any(t.startswith("backward_w") for t, _ in _jobs(plain))
    assert any(t.startswith("backward_w") for t, _ in _jobs(split))
    assert _jobs(via_params) == _jobs(split)


# ---------------------------------------------------------------- (c) the plan runs


@pytest.mark.e2e
def test_plan_from_apply_pass_trains_like_ppdsls_own_run(pp_pass):
    from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass

    from ppdsl.analysis.plan_spec import checked_spec
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.checkpoint import canonical_name
    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.program import LOSS_NAME
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train

    paddle = import_paddle()
    m, steps = 4, 2
    config = TrainConfig(batch_size=2 * m, lr=0.05, optimizer="adam", seed=3)
    own = PipelineTrainer(checked_spec(expand(load(library_dir() / "1f1b.sched"), 1, m)), BUILTIN, config)
    initial = own.state()
    reference = train(own, steps)

    program = _program(1, m, optimizer="adam", lr=config.lr, seed=config.seed)
    plan = apply_pass(program.main, program.startup, "ppdsl:1f1b", _attrs(1, m, 1, 0))
    # what Paddle's engine does: fetch the loss Value of the job program that computes it
    loss = plan.ir_program("forward").get_output_value_by_name(LOSS_NAME)
    scope = paddle.static.Scope()
    place = paddle.CPUPlace()
    with paddle.static.scope_guard(scope):
        paddle.static.Executor(place).run(program.startup)
        for name in scope.local_var_names():  # start from the same state, whatever the counters named it
            key = canonical_name(name, program.param_stage)
            if key in initial and scope.find_var(name).get_tensor()._is_initialized():
                scope.find_var(name).get_tensor().set(initial[key], place)
        exe = paddle.static.Executor(place)
        exe._set_plan(plan)
        losses = [
            np.asarray(exe.run(program.main, feed=own.batch(step), fetch_list=[loss])[0], dtype=np.float64).reshape(-1)
            for step in range(steps)
        ]
        params = {n: np.array(scope.find_var(n).get_tensor()) for n in program.param_stage}
    np.testing.assert_allclose(np.stack(losses), np.stack(reference.losses), atol=1e-5, rtol=0)
    for name, value in reference.parameters.items():
        np.testing.assert_allclose(params[name], value, atol=1e-5, rtol=0, err_msg=name)
    assert not np.allclose(losses[0], losses[1]), "the second step should see trained parameters"


# ---------------------------------------------------------------- (d) invalid schedules and sizes


@pytest.mark.parametrize(
    ("stem", "pp", "m", "vpp", "code", "fragment"),
    [
        ("1f1b", 4, 2, 1, "S100", "1F1B needs at least as many micro-batches as pipeline stages"),
        ("vpp", 4, 6, 2, "S105", "deadlock: ranks"),
    ],
)
def test_invalid_sizes_raise_the_checkers_diagnostics(pp_pass, stem, pp, m, vpp, code, fragment):
    with pytest.raises(pp_pass.ScheduleError) as err:
        _apply(f"ppdsl:{stem}", pp, m, vpp, 0)
    text = str(err.value)
    assert f"error[{code}]" in text and fragment in text
    # the same text `ppdsl check` prints (a library name is found as the command line finds it)
    path = find_schedule(stem)
    assert render_all(ppdsl.check(path, pp=pp, microbatches=m, vpp=vpp).errors, SourceCache()) in text
    assert f"pp={pp} vpp={vpp} microbatches={m}" in text


def test_broken_schedule_file_and_bad_params_are_diagnosed(pp_pass, tmp_path):
    broken = tmp_path / "broken.sched"
    broken.write_text('schedule "Broken"\norder { forward * microbatches backwrd optimizer }\n', encoding="utf-8")
    with pytest.raises(pp_pass.ScheduleError) as err:
        _apply(str(broken), 1, 2, 1, 0)
    assert "error[E" in str(err.value) and "backwrd" in str(err.value) and "broken.sched:2" in str(err.value)

    with pytest.raises(pp_pass.ScheduleError, match="has no parameter `nope`"):
        _apply("ppdsl:1f1b", 1, 2, 1, 0, ppdsl_params={"nope": 1})
    with pytest.raises(pp_pass.ScheduleError, match=r"error\[E000\].*cannot read"):
        _apply("ppdsl:no_such_schedule", 1, 2, 1, 0)
    with pytest.raises(ValueError, match=r"pp_stage 2 is outside 0 \.\. 1"):
        _apply("ppdsl:1f1b", 2, 2, 1, 2)


def test_vpp_without_chunk_ids_is_refused(pp_pass):
    from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass

    program = _program(1, 2)  # one chunk's worth of stage ids: every op is chunk 0
    for op in program.main.global_block().ops:
        if op.has_attr("chunk_id"):
            op.set_int_attr("chunk_id", -1)
    with pytest.raises(ValueError, match="no forward op of the program carries a chunk id"):
        apply_pass(program.main, program.startup, "ppdsl:interleaved1f1b", _attrs(1, 2, 2, 0))


# ---------------------------------------------------------------- (e) Paddle's own modes are untouched


@pytest.mark.e2e
def test_paddles_modes_reach_paddle_unchanged(pp_pass):
    from paddle.distributed.auto_parallel.static import engine, pir_pass
    from paddle.distributed.passes import pipeline_scheduler_pass as scheduler

    assert pp_pass.installed()
    wrapped = scheduler.apply_pass
    original = wrapped.__ppdsl_original__
    pp_pass.install()  # idempotent: still one layer of wrapping
    assert scheduler.apply_pass is wrapped and not hasattr(original, "__ppdsl_original__")
    assert engine.pipeline_pass is not pir_pass.pipeline_pass  # both wrapped, each around its own reference
    assert engine.pipeline_pass.__ppdsl_original__ is pir_pass.pipeline_pass.__ppdsl_original__

    for mode, pp, m, vpp in [("FThenB", 2, 4, 1), ("1F1B", 2, 3, 1), ("VPP", 2, 4, 2)]:
        program = _program(vpp, m)
        want = _jobs(original(program.main, program.startup, mode, _attrs(pp, m, vpp, 1)))
        assert _jobs(_apply(mode, pp, m, vpp, 1)) == want, mode
    with pytest.raises(AssertionError, match="pipeline scheduler only support"):
        _apply("NoSuchMode", 2, 4, 1, 0)


@pytest.mark.e2e
def test_pipeline_pass_dispatches_on_the_strategys_schedule_mode(pp_pass):
    """`pir_pass.pipeline_pass` as the engine calls it, with a real `strategy.pipeline`."""
    import paddle.distributed as dist
    from paddle.distributed.auto_parallel.static import engine

    def run(mode: str, vpp: int = 1, m: int = 4, **extra):
        strategy = dist.Strategy()
        strategy.pipeline.enable = True
        strategy.pipeline.schedule_mode = mode
        strategy.pipeline.accumulate_steps = m
        strategy.pipeline.vpp_degree = vpp
        for key, value in extra.items():
            setattr(strategy.pipeline, key, value)
        program = _program(vpp, m)
        return _jobs(engine.pipeline_pass([program.main], [program.startup], strategy.pipeline))

    assert run("ppdsl:fthenb") == run("FThenB")
    assert run("ppdsl:1f1b") == run("1F1B")
    assert run("ppdsl:vpp", 2) == run("VPP", 2)
    # one process is pp_degree 1, and vpp.sched splits the backward when microbatches == pp
    split = run("ppdsl:vpp", 2, 1, ppdsl_params={"split_backward": True})
    assert ("backward_w1", 0) in split and split == run("ppdsl:vpp", 2, 1, split_backward=True)
    with pytest.raises(AssertionError, match="FThenB, 1F1B and VPP"):
        run("ZBH1")  # the engine's own whitelist, still Paddle's


def test_uninstall_restores_paddles_functions():
    from paddle.distributed.auto_parallel.static import engine, pir_pass
    from paddle.distributed.passes import pipeline_scheduler_pass as scheduler

    from ppdsl.runtime import paddle_pass

    was = paddle_pass.installed()
    paddle_pass.install()
    original = scheduler.apply_pass.__ppdsl_original__
    paddle_pass.uninstall()
    paddle_pass.uninstall()
    assert scheduler.apply_pass is original and not paddle_pass.installed()
    assert not hasattr(pir_pass.pipeline_pass, "__ppdsl_original__")
    assert not hasattr(engine.pipeline_pass, "__ppdsl_original__")
    if was:
        paddle_pass.install()


# ---------------------------------------------------------------- the auto-parallel engine


VPP2 = ["VPP@vpp=2", "ppdsl:zbv@vpp=2"]


@pytest.mark.e2e
def test_auto_parallel_engine_trains_with_a_sched_file(tmp_path):
    """`dist.to_static` with `strategy.pipeline.schedule_mode` set to a `.sched`: same losses and parameters as
    Paddle's own 1F1B, and the plan's jobs are the schedule's (one process, pp_degree 1: see the script).

    vpp > 1 cannot run in one process: Paddle's engine refuses VPP at pp_degree 1, and for any other mode it
    writes no chunk ids, which the pass reports."""
    split = tmp_path / "split_all.sched"
    split.write_text(SPLIT_SCHEDULE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        # the failing vpp=2 builds first: after other builds in the process, Paddle's VPP build segfaults
        [sys.executable, str(ROOT / "tests" / "auto_parallel_run.py"), "3", *VPP2, "1F1B", "ppdsl:1f1b", str(split)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    paddle_run, ours, split_run = runs["1F1B"], runs["ppdsl:1f1b"], runs[str(split)]
    assert ours["jobs"] == paddle_run["jobs"]
    assert [tuple(j) for j in split_run["jobs"]] == [
        ("forward", 0),
        ("forward", 1),
        ("backward_b", 0),
        ("backward_b", 1),
        ("backward_w", 0),
        ("backward_w", 1),
        ("optimizer", 0),
    ]
    assert "pd_op.matmul" in split_run["ops"]["backward_w"]
    for run in (ours, split_run):
        np.testing.assert_allclose(run["losses"], paddle_run["losses"], atol=1e-6, rtol=0)
        assert run["params"].keys() == paddle_run["params"].keys()
        for name, value in paddle_run["params"].items():
            np.testing.assert_allclose(run["params"][name], value, atol=1e-6, rtol=0, err_msg=name)
    assert len(paddle_run["losses"]) == 3 and paddle_run["losses"][0] != paddle_run["losses"][2]
    assert runs["VPP@vpp=2"]["error"] == "ValueError: VPP schedule mode only can be set in pipeline mode."
    # what the engine lacks and the path that runs it, named (issue 19)
    error = runs["ppdsl:zbv@vpp=2"]["error"]
    assert "`zbv` at vpp_degree 2 cannot run through Paddle's auto-parallel engine" in error
    assert "`complete_chunk_id`" in error and "ppdsl run zbv --vpp 2" in error and "pir_chunk_id_guard" in error


def test_front_end_does_not_import_the_pass():
    """`ppdsl.runtime.paddle_pass` imports paddle at module level, so the command line and the front end never import it."""
    code = (
        "import sys, ppdsl, ppdsl.cli, ppdsl.analysis.check, ppdsl.analysis.expand, ppdsl.language.resolve, ppdsl.reports.compare\n"
        "bad = sorted(n for n in sys.modules if n == 'paddle' or n.startswith('paddle.') or n == 'ppdsl.runtime.paddle_pass')\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
