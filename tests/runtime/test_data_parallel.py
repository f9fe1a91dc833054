"""Data-parallel pipelines (`ppdsl run --dp D`, issue 29): `--dp D -m M` on pp x D processes trains the step of
`--dp 1 -m D*M`; where the replicas' gradient reduction runs; a dead replica stops the job.

The layout and reduction-point tests need no paddle; the training ones launch processes (e2e).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import find_schedule, library_dir
from ppdsl.language.resolve import load
from ppdsl.plan.jobs import ProgramKey
from ppdsl.runtime.replicas import RankLayout, reduction_points
from ppdsl.runtime.request import RunRequest

needs_paddle = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")
runner = CliRunner()
STEPS = 2
LR, SEED = "0.05", "3"


def test_layout_is_replica_major_as_paddles_topology():
    layout = RankLayout(pp=2, dp=3)
    assert layout.world == 6
    assert [(layout.replica_of(g), layout.rank_of(g)) for g in range(6)] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]
    assert layout.replica_group(1) == [1, 3, 5]
    assert [layout.rows(r, 12) for r in range(3)] == [slice(0, 4), slice(4, 8), slice(8, 12)]


def test_reductions_run_at_reduce_grads_jobs_and_the_rest_before_the_optimizer():
    param_stage = {"w0": 0, "b0": 0, "w2": 2, "w4": 4}  # rank 0 holds stages 0 and 2 (vpp 2); stage 4 is elsewhere
    keys = [ProgramKey("forward", 0), ProgramKey("backward", 2), ProgramKey("reduce_grads", 2)]
    keys += [ProgramKey("backward", 0), ProgramKey("optimizer", 0)]
    points = reduction_points(keys, param_stage, [0, 2])
    assert points == {ProgramKey("reduce_grads", 2): ["w2"], ProgramKey("optimizer", 0): ["b0", "w0"]}
    # no reduce_grads job: everything right before the optimizer
    assert reduction_points(keys[:2] + keys[3:], param_stage, [0, 2]) == {
        ProgramKey("optimizer", 0): ["b0", "w0", "w2"]
    }


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"dp": 2, "nproc_per_node": 2}, "the schedule runs pp x dp = 2 x 2 = 4 ranks"),
        ({"dp": 0, "nproc_per_node": 2}, "--dp must be at least 1"),
        ({"dp": 3, "nproc_per_node": 6, "batch_size": 16}, "does not split into 12 micro-batches"),
    ],
)
def test_bad_data_parallel_requests(kwargs, fragment):
    with pytest.raises(DiagnosticError) as err:
        RunRequest(pp=2, microbatches=4, **kwargs)
    assert any(fragment in d.message for d in err.value.diagnostics), [d.message for d in err.value.diagnostics]


def test_one_process_refuses_replicas_and_says_what_trains_the_same_step(in_repo):
    result = runner.invoke(app, ["run", "1f1b", "--pp", "2", "--dp", "2", "-m", "4", "--steps", "1"])
    assert result.exit_code == 2
    assert "error[E007]: --dp 2 needs one process per rank" in result.stderr
    assert "--nproc-per-node 4" in result.stderr and "--dp 1 -m 8" in result.stderr


def test_a_schedule_that_never_reduces_is_refused_at_dp_2(tmp_path, in_repo):
    never = _without_reductions(tmp_path, "1f1b")
    result = runner.invoke(
        app, ["run", str(never), "--pp", "2", "--dp", "2", "-m", "4", "--nproc-per-node", "4", "--dry-run"]
    )
    assert result.exit_code != 0
    assert "error[E092]" in result.stderr, result.stderr


def test_dry_run_names_every_process_and_where_it_reduces(tmp_path, in_repo):
    args = ["run", "interleaved1f1b", "--pp", "2", "--dp", "2", "-m", "4", "--vpp", "2", "--nproc-per-node", "4"]
    result = runner.invoke(app, [*args, "--dry-run", "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "rank 3 (replica 1, pipeline rank 1, node 0, process 3, stages 1, 3):" in result.stdout
    assert "pipeline rank 0 over ranks {0, 2}: at reduce_grads0.c1, reduce_grads0.c0" in result.stdout, result.stdout


# ---------------------------------------------------------------- training over processes


def _without_reductions(tmp_path, stem):
    """A library schedule without its `reduce_grads` jobs (their lines dropped: an `if` may be left empty)."""
    text = (library_dir() / f"{stem}.sched").read_text()
    text, dropped = re.subn(r"^\s*reduce_grads\b.*\n", "", text, flags=re.MULTILINE)
    assert dropped
    path = tmp_path / f"{stem}_never_reduced.sched"
    path.write_text(text)
    return path


def _reduced_at_the_end(tmp_path, stem):
    """A library schedule with each chunk's reduction moved right before its optimizer, none overlapping a
    backward (the library places them after each chunk's last backward)."""
    text = _without_reductions(tmp_path, stem).read_text()
    text = text.replace("\n    optimizer\n", "\n    for c in 0 .. vpp { reduce_grads(chunk = c) }\n    optimizer\n")
    path = tmp_path / f"{stem}_reduced_at_the_end.sched"
    path.write_text(text)
    return path


def _one_replica(schedule, pp, m, vpp, steps=STEPS):
    """`--dp 1 -m m` on one process: the parameters and per-micro-batch losses the replicas must reach."""
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train

    exp = expand(load(find_schedule(str(schedule))), pp, m, vpp)
    config = TrainConfig(batch_size=2 * m, lr=float(LR), optimizer="sgd", seed=int(SEED))
    run = train(PipelineTrainer(checked_spec(exp), BUILTIN, config), steps)
    return run.parameters, run.losses


def _replicas(schedule, pp, dp, m, vpp, tmp_path, env=None, steps=STEPS, extra=()):
    run_dir = tmp_path / "run"
    args = ["run", str(schedule), "--pp", str(pp), "--dp", str(dp), "-m", str(m), "--vpp", str(vpp)]
    args += ["--steps", str(steps), "--batch-size", str(2 * m * dp), "--lr", LR, "--optimizer", "sgd"]
    args += ["--seed", SEED, "--nproc-per-node", str(pp * dp), "--run-dir", str(run_dir)]
    args += ["--summary-json", str(tmp_path / "summary.json"), *extra]
    return runner.invoke(app, args, env=env), run_dir / "launch-1"


@needs_paddle
@pytest.mark.e2e
@pytest.mark.parametrize(("stem", "vpp"), [("1f1b", 1), ("zbh1", 1), ("interleaved1f1b", 2), ("at_end", 2)], ids=str)
def test_two_replicas_of_four_microbatches_train_the_step_of_one_of_eight(stem, vpp, tmp_path):
    # the library's files, whose chunk 1 reduces right after its last backward, before chunk 0's backwards end;
    # `at_end`: interleaved 1F1B with both chunks' reductions right before the optimizer
    schedule = _reduced_at_the_end(tmp_path, "interleaved1f1b") if stem == "at_end" else stem
    pp, dp, m = 2, 2, 4
    want, want_losses = _one_replica(schedule, pp, dp * m, vpp)
    result, launch = _replicas(schedule, pp, dp, m, vpp, tmp_path)
    assert result.exit_code == 0, result.output + (result.stderr or "")
    layout = RankLayout(pp, dp)
    replicas = []
    for replica in range(dp):
        got = {}
        for r in range(pp):
            with np.load(launch / f"rank{layout.process(replica, r)}.npz") as data:
                got.update({k: data[k] for k in data.files})
        replicas.append(got)
    assert set(replicas[0]) == set(want)
    for name, value in want.items():
        np.testing.assert_allclose(replicas[0][name], value, rtol=1e-5, atol=1e-7, err_msg=name)
        np.testing.assert_array_equal(replicas[1][name], replicas[0][name], err_msg=f"replicas differ on {name}")
    # the step's losses: replica 0's micro-batches, then replica 1's, as one replica of eight trains them
    losses = json.loads((tmp_path / "summary.json").read_text())["losses"]
    np.testing.assert_allclose(np.array(losses), np.stack(want_losses), rtol=1e-5, atol=1e-6)
    reports = [json.loads((launch / f"rank{g}.json").read_text()) for g in range(layout.world)]
    assert all(rep["reduce_seconds"] > 0 for rep in reports), "a rank never reduced its gradients"


@needs_paddle
def test_a_small_two_by_two_step_equals_one_replica(tmp_path):
    """The quick suite's case (about 15 s): one step of 2 replicas x 2 stages x 2 micro-batches."""
    schedule = "1f1b"
    want, _ = _one_replica(schedule, 2, 4, 1, steps=1)
    result, launch = _replicas(schedule, 2, 2, 2, 1, tmp_path, steps=1)
    assert result.exit_code == 0, result.output + (result.stderr or "")
    for replica in (0, 1):
        got = {}
        for g in (2 * replica, 2 * replica + 1):
            with np.load(launch / f"rank{g}.npz") as data:
                got.update({k: data[k] for k in data.files})
        assert set(got) == set(want)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-7, err_msg=f"replica {replica}: {name}")


@needs_paddle
@pytest.mark.e2e
def test_a_dead_replica_stops_the_job_as_a_dead_pipeline_rank_does(tmp_path):
    env = {**os.environ, "PPDSL_INJECT_FAILURE": "rank=3,job=2,mode=kill"}  # replica 1's last stage
    result, _ = _replicas("1f1b", 2, 2, 4, 1, tmp_path, env=env)
    assert result.exit_code == 2, result.output
    assert re.search(r"rank 3 died \(killed by signal 9, SIGKILL\)", result.stderr), result.stderr
    assert "Traceback" not in result.stderr


@needs_paddle
@pytest.mark.e2e
def test_a_data_parallel_run_resumed_from_its_checkpoints_ends_where_the_uninterrupted_run_ends(tmp_path):
    """`--dp 2 --save-dir D` killed after its step-2 save, rerun with `--resume D`: every replica's rank ends with
    the uninterrupted run's parameters, bit for bit; the checkpoints are refused at another --dp."""
    pp, dp, m, steps = 2, 2, 2, 3
    for run in "abce":
        (tmp_path / run).mkdir()
    straight, launch = _replicas("1f1b", pp, dp, m, 1, tmp_path / "a", steps=steps)
    assert straight.exit_code == 0, straight.output + (straight.stderr or "")
    want = {g: dict(np.load(launch / f"rank{g}.npz")) for g in range(pp * dp)}
    ckpt = tmp_path / "ckpt"
    save = ["--save-dir", str(ckpt), "--save-every", "2"]
    crash = {**os.environ, "PPDSL_INJECT_FAILURE": "rank=3,job=0,step=2"}  # replica 1's last stage, in step 3
    first, _ = _replicas("1f1b", pp, dp, m, 1, tmp_path / "b", env=crash, steps=steps, extra=save)
    assert first.exit_code == 2 and "failure injected" in first.stderr, first.output
    assert sorted(p.name for p in ckpt.glob("checkpoint.step2.*")) == [
        f"checkpoint.step2.rank{g}.npz" for g in range(pp * dp)
    ]
    second, resumed = _replicas("1f1b", pp, dp, m, 1, tmp_path / "c", steps=steps, extra=[*save, "--resume", str(ckpt)])
    assert second.exit_code == 0, second.output + (second.stderr or "")
    for g in range(pp * dp):
        got = np.load(resumed / f"rank{g}.npz")
        assert set(got.files) == set(want[g])
        for name, value in want[g].items():
            assert np.array_equal(got[name], value), (g, name)
    # resumed again at its last step, nothing to go: before, every rank failed closing senders it never started
    again, done = _replicas("1f1b", pp, dp, m, 1, tmp_path / "e", steps=steps, extra=["--resume", str(ckpt)])
    assert again.exit_code == 0, again.output + (again.stderr or "")
    assert all(np.array_equal(np.load(done / "rank3.npz")[k], v) for k, v in want[3].items())
    # the same global batch on one replica is another run: refused before any process starts
    one = ["run", "1f1b", "--pp", str(pp), "-m", str(m), "--steps", str(steps), "--batch-size", str(2 * m * dp)]
    one += ["--lr", LR, "--optimizer", "sgd", "--seed", SEED, "--nproc-per-node", str(pp)]
    other = runner.invoke(app, [*one, "--run-dir", str(tmp_path / "d"), "--resume", str(ckpt)])
    assert other.exit_code == 2 and "error[E037]" in other.stderr, other.output + (other.stderr or "")
