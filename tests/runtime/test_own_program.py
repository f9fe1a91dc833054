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
