"""A user's own Paddle static program under a ppdsl plan (issue 19): op roles checked (E044) and set in one call,
gradients accumulated over the micro-batches as the full batch's mean, the loss fetchable."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ppdsl.common.diagnostics import DiagnosticError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed (pip install -e '.[test]')"
)

M, BATCH, STEPS = 4, 8, 2
RNG = np.random.default_rng(7)
X = RNG.standard_normal((STEPS, BATCH, 3, 4)).astype("float32")
Y = RNG.standard_normal((STEPS, BATCH, 3, 2)).astype("float32")
W = {"own.w1": RNG.standard_normal((4, 5)).astype("float32"), "own.w2": RNG.standard_normal((5, 2)).astype("float32")}


def _own_program(paddle, optimizer: str = "sgd"):
    """What a Paddle user writes: layers, a mean loss, `optimizer.minimize(loss)`, no role guards."""
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 3, 4], "float32")
        y = paddle.static.data("y", [-1, 3, 2], "float32")
        w1 = paddle.create_parameter([4, 5], "float32", name="own.w1")
        w2 = paddle.create_parameter([5, 2], "float32", name="own.w2")
        out = paddle.matmul(paddle.tanh(paddle.matmul(x, w1)), w2)
        loss = paddle.mean((out - y) ** 2)
        opt = paddle.optimizer.Adam(0.05) if optimizer == "adam" else paddle.optimizer.SGD(0.2)
        opt.minimize(loss)
    return main, startup, loss


def _start(paddle, scope, startup):
    place = paddle.CPUPlace()
    with paddle.static.scope_guard(scope):
        paddle.static.Executor(place).run(startup)
    for name, value in W.items():
        scope.find_var(name).get_tensor().set(value, place)


def _full_batch(paddle, optimizer: str):
    main, startup, loss = _own_program(paddle, optimizer)
    scope = paddle.static.Scope()
    _start(paddle, scope, startup)
    losses = []
    with paddle.static.scope_guard(scope):
        exe = paddle.static.Executor(paddle.CPUPlace())
        for step in range(STEPS):
            losses.append(float(exe.run(main, feed={"x": X[step], "y": Y[step]}, fetch_list=[loss])[0]))
        return losses, {n: np.array(scope.find_var(n).get_tensor()) for n in W}


def _run_plan(paddle, main, startup, plan, loss_value):
    """Startup after the plan is built (it creates the accumulators), then the plan on the whole batch."""
    scope = paddle.static.Scope()
    _start(paddle, scope, startup)
    losses = []
    with paddle.static.scope_guard(scope):
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe._set_plan(plan)
        for step in range(STEPS):
            out = exe.run(main, feed={"x": X[step], "y": Y[step]}, fetch_list=[loss_value])[0]
            losses.append(float(np.mean(out)))  # one loss per micro-batch: their mean is the full batch's
        return losses, {n: np.array(scope.find_var(n).get_tensor()) for n in W}


@pytest.fixture(scope="module")
def paddle():
    from ppdsl.runtime import paddle_pass
    from ppdsl.runtime.env import import_paddle

    module = import_paddle()
    paddle_pass.install()
    yield module
    paddle_pass.uninstall()


def _apply(main, startup, schedule="ppdsl:1f1b"):
    from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass

    return apply_pass(main, startup, schedule, {"num_micro_batches": M, "pp_degree": 1, "pp_stage": 0})


def test_a_program_without_op_roles_is_refused_with_the_one_call_that_fixes_it(paddle):
    main, startup, _ = _own_program(paddle)
    with pytest.raises(DiagnosticError) as err:
        _apply(main, startup)
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.code == "E044" and "no op of the program has an op role" in diagnostic.message
    assert "ppdsl.runtime.own_program.set_op_roles(main_program, loss)" in diagnostic.help


def test_roles_missing_at_the_end_or_between_regions_are_refused(paddle):
    from ppdsl.runtime.own_program import check_roles, set_op_roles

    main, _, loss = _own_program(paddle)
    set_op_roles(main, loss)
    ops = main.global_block().ops
    ops[-1].op_role = -1
    with pytest.raises(DiagnosticError, match="the last 1 ops"):
        check_roles(main)
    set_op_roles(main, loss)
    for op in ops:
        if op.op_role == 1:
            op.op_role = 2
    with pytest.raises(DiagnosticError, match="no backward ops"):
        check_roles(main)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_own_program_through_the_pass_trains_as_the_full_batch(paddle, optimizer):
    """Before: the plan stepped on micro-batch 0's gradient alone, silently, and had no loss to fetch."""
    from ppdsl.runtime.own_program import loss_value, set_op_roles

    main, startup, loss = _own_program(paddle, optimizer)
    set_op_roles(main, loss)
    plan = _apply(main, startup)
    losses, params = _run_plan(paddle, main, startup, plan, loss_value(plan))
    want_losses, want = _full_batch(paddle, optimizer)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for name, value in want.items():
        np.testing.assert_allclose(params[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert not np.allclose(params["own.w1"], W["own.w1"]), "the parameters should have trained"


def test_the_programs_own_loss_is_fetchable_from_the_plan(paddle):
    """Before: `fetch_list=[loss]` (the Value the user holds, of `main`, which no job program has) came back as an
    empty list and the user's `[0]` was `IndexError: list index out of range`."""
    from ppdsl.runtime.own_program import set_op_roles

    main, startup, loss = _own_program(paddle)
    set_op_roles(main, loss)
    plan = _apply(main, startup)
    losses, params = _run_plan(paddle, main, startup, plan, loss)
    want_losses, want = _full_batch(paddle, "sgd")
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(params["own.w2"], want["own.w2"], rtol=1e-5, atol=1e-6)


def test_another_value_of_the_planned_program_is_refused_as_a_fetch(paddle):
    from ppdsl.runtime.own_program import set_op_roles

    main, startup, loss = _own_program(paddle)
    set_op_roles(main, loss)
    plan = _apply(main, startup)
    hidden = next(op.result(0) for op in main.global_block().ops if op.name() == "pd_op.tanh")
    with pytest.raises(DiagnosticError) as err:
        _run_plan(paddle, main, startup, plan, hidden)
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.code == "E044" and "`fetch_list` names a value of the program the plan" in diagnostic.message


def test_a_startup_program_run_before_the_plan_is_a_diagnostic_saying_when_to_run_it(paddle):
    """Before: `ValueError: (InvalidArgument) The variable own.w1@GRAD@MERGE should exist`."""
    from ppdsl.runtime.own_program import loss_value, set_op_roles

    main, startup, loss = _own_program(paddle)
    set_op_roles(main, loss)
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)  # too early: the pass adds the accumulators to it
        plan = _apply(main, startup)
        exe._set_plan(plan)
        with pytest.raises(DiagnosticError) as err:
            exe.run(main, feed={"x": X[0], "y": Y[0]}, fetch_list=[loss_value(plan)])
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.code == "E044" and "@GRAD@MERGE` is not in the scope" in diagnostic.message
    assert "run the startup program after `apply_pass" in diagnostic.help
    assert "error[E044]" in str(err.value)  # what the traceback shows


def test_paddles_own_mode_on_a_program_of_your_own_says_which_mode_accumulates(paddle):
    """Before: Paddle's `1F1B` planned it silently (the optimizer on micro-batch 0's gradient alone), and
    `loss_value(plan)` said to call `set_op_roles`, which had been called."""
    from ppdsl.runtime.own_program import loss_value, set_op_roles

    main, startup, loss = _own_program(paddle)
    set_op_roles(main, loss)
    with pytest.warns(UserWarning, match="micro-batch 0's gradient alone.*`ppdsl:1f1b`"):
        plan = _apply(main, startup, "1F1B")
    with pytest.raises(DiagnosticError) as err:
        loss_value(plan)
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.code == "E044" and "Paddle's own passes" in diagnostic.message
    assert '"ppdsl:1f1b"' in diagnostic.help


AS_A_PADDLE_USER_WRITES_IT = """
import numpy as np
import paddle
from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass  # before ppdsl: Paddle's own function
from ppdsl.runtime.paddle_pass import loss_value, set_op_roles  # no paddle_pass.install(): the import is enough

paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [-1, 3, 4], "float32")
    w = paddle.create_parameter([4, 2], "float32", name="w", default_initializer=paddle.nn.initializer.Constant(0.5))
    loss = paddle.mean(paddle.matmul(x, w) ** 2)
    paddle.optimizer.SGD(0.1).minimize(loss)
set_op_roles(main, loss)
plan = apply_pass(main, startup, "ppdsl:1f1b", {"num_micro_batches": 4, "pp_degree": 1, "pp_stage": 0})
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(startup)
exe._set_plan(plan)
x = np.arange(96, dtype="float32").reshape(8, 3, 4) / 96
print(exe.run(main, feed={"x": x}, fetch_list=[loss])[0].tolist())
print(exe.run(main, feed={"x": x}, fetch_list=[loss_value(plan)])[0].tolist())
"""


def test_apply_pass_imported_first_takes_a_ppdsl_mode_without_an_install_call(tmp_path):
    """Before: `AssertionError: pipeline scheduler only support FThenB, 1F1B, Eager1F1B, VPP and ZBH1, but receive
    ppdsl:1f1b`, unless `paddle_pass.install()` came before `apply_pass` was imported. In a fresh process, as the
    README's snippet runs; `fetch_list=[loss]` then `[loss_value(plan)]`, two steps: the second loss is lower."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "own.py"
    script.write_text(AS_A_PADDLE_USER_WRITES_IT)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(root), "GLOG_minloglevel": "2"},
    )
    assert proc.returncode == 0, proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
    assert len(first) == len(second) == 4  # one loss per micro-batch
    assert np.mean(second) < np.mean(first)


def test_own_program_through_a_plan_module_trains_as_the_full_batch(paddle, tmp_path):
    """`ppdsl compile`'s `prepare` goes through the same preparation, and its BuiltPlan names the loss to fetch."""
    import ppdsl
    from ppdsl.runtime.own_program import set_op_roles

    target = tmp_path / "plan_fthenb.py"
    target.write_text(ppdsl.compile("fthenb"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("plan_fthenb_own", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    main, startup, loss = _own_program(paddle)
    set_op_roles(main, loss)
    for op in main.global_block().ops:  # one stage: every op on chunk 0
        op.set_int_attr("chunk_id", 0)
    built = module.prepare(main, startup, pp=1, microbatches=M)
    assert built.loss_value is not None
    losses, params = _run_plan(paddle, main, startup, built.plan, built.loss_value)
    want_losses, want = _full_batch(paddle, "sgd")
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    for name, value in want.items():
        np.testing.assert_allclose(params[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_hand_placed_model_that_leaves_stages_empty_is_refused_naming_them(tmp_path, monkeypatch):
    """Before: ops on stages 0 and 3 only trained at pp 4 without a word (ranks 1 and 2 only passed values on),
    where `ctx.pipeline` refuses such a split (E039)."""
    from typer.testing import CliRunner

    from ppdsl.cli import app
    from ppdsl.common.explanations.E064 import ENDS_ONLY

    monkeypatch.chdir(tmp_path)
    (tmp_path / ENDS_ONLY[0]).write_text(ENDS_ONLY[1])
    args = ["run", "1f1b", "-m", "4", "--batch-size", "4", "--steps", "1", "--model", "ends:build"]
    refused = CliRunner().invoke(app, [*args, "--pp", "4"])
    assert refused.exit_code == 2, refused.output
    assert (
        "error[E064]: stages 1-2 of 4 hold no op of the model: every op it builds is on stages 0, 3" in refused.stderr
    )
    assert "Traceback" not in refused.output
    assert CliRunner().invoke(app, [*args, "--pp", "2"]).exit_code == 0  # every stage holds ops


@pytest.mark.e2e
def test_the_seed_reaches_the_generator_a_static_dropout_draws_from(tmp_path, monkeypatch):
    """tests/models/dropout_mlp.py's dropouts have no fixed seed: their masks come from Paddle's global generator,
    which the program seed does not reach. Before, two runs with one --seed trained differently (each went on from
    whatever state the generator was in); now --seed seeds it, so they agree bit for bit, and another seed differs."""
    import json

    from typer.testing import CliRunner

    from ppdsl.cli import app

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    monkeypatch.chdir(tmp_path)
    args = ["run", "1f1b", "--pp", "2", "-m", "2", "--batch-size", "4", "--steps", "2", "--optimizer", "sgd"]
    args += ["--model", "tests.models.dropout_mlp:build"]

    def trained(seed: int, name: str) -> dict:
        summary = tmp_path / f"{name}.json"
        result = CliRunner().invoke(app, [*args, "--seed", str(seed), "--summary-json", str(summary)])
        assert result.exit_code == 0, result.output
        return json.loads(summary.read_text())

    first, again, other = trained(3, "first"), trained(3, "again"), trained(4, "other")
    assert first["losses"] == again["losses"]
    assert first["parameters"] == again["parameters"]  # sums and sums of squares, as floats: bit for bit
    assert first["parameters"] != other["parameters"]
