"""One process per rank through paddle.distributed.launch (gloo on CPU): the same training as one process.

Each case starts every rank from the single-process trainer's step-0 checkpoint (`--resume`), trains 3 steps,
and compares the parameters each rank wrote for its stages, and the last rank's per-micro-batch losses.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.cli import app
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load

from paths import GOLDEN, ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

STEPS = 3
runner = CliRunner()


def _single_process(stem, pp, m, vpp, tmp_path):
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train

    exp = expand(load(library_dir() / f"{stem}.sched"), pp, m, vpp)
    trainer = PipelineTrainer(
        checked_spec(exp), BUILTIN, TrainConfig(batch_size=2 * m, lr=0.05, optimizer="sgd", seed=3)
    )
    trainer.save(tmp_path / "init")
    run = train(trainer, STEPS)
    return run.parameters, run.losses


def _cluster(stem, pp, m, vpp, tmp_path, *extra, env=None):
    run_dir = tmp_path / "run"
    args = [
        "run",
        stem,
        "--pp",
        str(pp),
        "-m",
        str(m),
        "--vpp",
        str(vpp),
        "--steps",
        str(STEPS),
        "--batch-size",
        str(2 * m),
        "--lr",
        "0.05",
        "--optimizer",
        "sgd",
        "--seed",
        "3",
        "--nproc-per-node",
        str(pp),
        "--run-dir",
        str(run_dir),
        "--resume",
        str(tmp_path / "init"),
        *extra,
    ]
    result = runner.invoke(app, args, env=env)
    return result, run_dir / "launch-1"  # the launch's own directory in the (new) run directory


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("stem", "pp", "m", "vpp"),
    [
        ("1f1b", 2, 4, 1),
        ("fthenb", 2, 4, 1),
        ("vpp", 2, 4, 2),
        ("zbh1", 2, 4, 1),
        ("1f1b", 4, 8, 1),
        ("fthenb", 4, 4, 1),
        ("vpp", 4, 4, 2),
        ("zbh1", 4, 8, 1),
    ],
)
def test_processes_train_like_one_process(stem, pp, m, vpp, tmp_path):
    want_params, want_losses = _single_process(stem, pp, m, vpp, tmp_path)
    result, run_dir = _cluster(stem, pp, m, vpp, tmp_path)
    assert result.exit_code == 0, result.output + (result.stderr or "")
    # per-step progress, as one process shows it (issue 19: nothing until the summary), counted from 1 as there
    steps = range(1, STEPS + 1)
    assert [f"step {s:4d}  started by every rank" in result.stdout for s in steps] == [True] * STEPS
    assert "step    0" not in result.stdout
    got = {}
    for r in range(pp):
        with np.load(run_dir / f"rank{r}.npz") as data:
            assert not set(data.files) & set(got), "a parameter is owned by two ranks"
            got.update({k: data[k] for k in data.files})
    assert set(got) == set(want_params)
    for name, value in want_params.items():
        np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=0, err_msg=name)
    losses = json.loads((run_dir / f"rank{_loss_rank(stem, pp, vpp)}.json").read_text())["losses"]
    np.testing.assert_allclose(np.array(losses), np.stack(want_losses), atol=1e-5, rtol=0)


def _loss_rank(stem, pp, vpp):
    exp = expand(load(library_dir() / f"{stem}.sched"), pp, max(pp, 4), vpp)
    return exp.rank_of_stage()[exp.nstages - 1][0]


@pytest.mark.e2e
def test_a_failing_rank_ends_the_job_quickly_with_its_error(tmp_path):
    _single_process("1f1b", 2, 4, 1, tmp_path)
    t0 = time.monotonic()
    # The peer of the failed rank would wait for it until the communication timeout: the job must end well before
    # it, however slow the machine is (a wall-clock bound alone fails under load: 29 s on a busy 2-core machine).
    result, run_dir = _cluster(
        "1f1b", 2, 4, 1, tmp_path, "--comm-timeout", "300", env={**os.environ, "PPDSL_INJECT_FAILURE": "rank=1,job=3"}
    )
    elapsed = time.monotonic() - t0
    assert result.exit_code == 2
    assert "rank 1 failed: RuntimeError: failure injected before" in result.stderr
    assert "Traceback" not in result.stderr
    assert elapsed < 150, f"took {elapsed:.1f} s: the job waited for the timeout, not for the failure"
    assert not list(run_dir.glob("*.tmp")) and not list(run_dir.glob(".*.tmp")), "a half-written file was left"


@pytest.mark.e2e
def test_a_receive_that_waits_too_long_names_rank_job_and_peer(tmp_path):
    _single_process("1f1b", 2, 4, 1, tmp_path)
    env = {**os.environ, "PPDSL_INJECT_FAILURE": "rank=0,job=2,mode=hang"}
    result, _ = _cluster("1f1b", 2, 4, 1, tmp_path, "--comm-timeout", "3", env=env)
    assert result.exit_code == 2
    # rank 1 runs rF0 F0 B0 rF1 sB0 F1: F1 (step 5) reads the activation rank 0 never sends (the CPU job
    # programs of recv_forward hold no ops, so the forward itself is where the value is read)
    assert "rank 1 waited 3 s in `F1` (step 5) for `F1` from rank 0" in result.stderr, result.stderr


def test_dry_run_for_two_nodes_of_eight_processes(in_repo, golden):
    result = runner.invoke(
        app,
        [
            "run",
            "1f1b",
            "--pp",
            "16",
            "-m",
            "16",
            "--nproc-per-node",
            "8",
            "--nnodes",
            "2",
            "--master",
            "10.0.0.1:8090",
            "--node-rank",
            "1",
            "--dry-run",
        ],
    )
    assert result.exit_code == 0, result.output
    text = result.stdout.replace(sys.executable, "python").replace(str(ROOT / "ppdsl"), "<ppdsl>")
    golden(GOLDEN / "launch" / "1f1b-2x8.txt", text)
    assert "--nnodes 2 --master 10.0.0.1:8090 --rank 1" in text
    assert text.count("\nrank ") == 16


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--nproc-per-node", "3"], "1 node(s) x 3 processes = 3 ranks, but the schedule runs pp = 2"),
        (["--nproc-per-node", "1", "--nnodes", "2"], "several nodes need --master"),
        (["--dry-run"], "--dry-run goes with --nproc-per-node"),
        # issue 19: flags a one-process run would ignore, and a profile no process would write
        (["--nnodes", "2"], "--nnodes goes with --nproc-per-node: without it the run is one process"),
        (["--master", "10.0.0.1:8090", "--node-rank", "1"], "--master, --node-rank go with --nproc-per-node"),
        (["--comm-timeout", "5"], "--comm-timeout goes with --nproc-per-node"),
        (["--nproc-per-node", "2", "--profile", "p.json", "--dry-run"], "--profile records the jobs of one process"),
    ],
)
def test_bad_launch_options(args, fragment, in_repo):
    result = runner.invoke(app, ["run", "1f1b", "--pp", "2", "-m", "4", *args])
    assert result.exit_code == 2
    assert fragment in result.stderr


@pytest.mark.e2e
def test_processes_checkpoint_and_resume_bit_identically(tmp_path):
    """Every rank writes its own checkpoint atomically. A run that dies at step 2 of 3, rerun as the same command
    with `--resume` on its checkpoints, ends at step 3 with the uninterrupted run's parameters, bit for bit."""
    _single_process("zbh1", 2, 4, 1, tmp_path)  # writes the shared step-0 checkpoint into tmp_path/init
    straight, run_a = _cluster("zbh1", 2, 4, 1, tmp_path)
    assert straight.exit_code == 0, straight.output
    want = {r: dict(np.load(run_a / f"rank{r}.npz")) for r in range(2)}

    ckpt = tmp_path / "ckpt"
    save = ["--save-dir", str(ckpt), "--save-every", "2"]
    crash = {**os.environ, "PPDSL_INJECT_FAILURE": "rank=1,job=0,step=2"}
    first = runner.invoke(app, _args(tmp_path, "run_b", steps=STEPS, extra=save), env=crash)
    assert first.exit_code == 2 and "failure injected" in first.stderr, first.output
    # each rank's file of the step both saved; the lock the run held on the directory
    assert sorted(p.name for p in ckpt.iterdir()) == [
        ".ppdsl.lock",
        "checkpoint.step2.rank0.npz",
        "checkpoint.step2.rank1.npz",
    ]
    second = runner.invoke(app, _args(tmp_path, "run_c", steps=STEPS, resume=ckpt, extra=save))
    assert second.exit_code == 0, second.output
    for r in range(2):
        got = np.load(tmp_path / "run_c" / "launch-1" / f"rank{r}.npz")
        for name, value in want[r].items():
            assert np.array_equal(got[name], value), (r, name)
    # a checkpoint of another schedule is refused before any process starts
    other = runner.invoke(app, ["run", "1f1b", *_args(tmp_path, "run_d", steps=STEPS, resume=ckpt)[2:]])
    assert other.exit_code == 2 and "schedule `ZBH1` (this run: `1F1B`)" in other.stderr, other.output
    assert not (tmp_path / "run_d").exists()


def _args(tmp_path, run, steps, resume=None, extra=()):
    return [
        "run",
        "zbh1",
        "--pp",
        "2",
        "-m",
        "4",
        "--steps",
        str(steps),
        "--batch-size",
        "8",
        "--lr",
        "0.05",
        "--optimizer",
        "sgd",
        "--seed",
        "3",
        "--nproc-per-node",
        "2",
        "--run-dir",
        str(tmp_path / run),
        "--resume",
        str(resume or tmp_path / "init"),
        *extra,
    ]


def test_rank_processes_import_this_ppdsl_and_not_the_working_directory(tmp_path, monkeypatch):
    from ppdsl.runtime.launch import rank_environment

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    path = rank_environment()["PYTHONPATH"].split(os.pathsep)
    # the working directory's modules would shadow the standard library: the model is found there by load_model
    assert path == [str(ROOT), "/elsewhere"]


# ---------------------------------------------------------------- stopping, dying, peers that never come


def _tagged(tag: str) -> list[int]:
    """Every process whose environment carries PPDSL_TEST_TAG=tag: ppdsl, the launcher, the guards, the ranks."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                zombie = f.read().rsplit(") ", 1)[1].startswith("Z")
        except OSError:
            continue
        if f"PPDSL_TEST_TAG={tag}".encode() in environ and not zombie:
            found.append(int(entry))
    return found


def _start_long_run(tmp_path, tag: str) -> subprocess.Popen:
    """A 2-process run of many steps, in a session of its own, once both ranks are training."""
    env = {
        **os.environ,
        "PPDSL_TEST_TAG": tag,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    args = ["run", "1f1b", "--pp", "2", "-m", "4", "--batch-size", "8", "--steps", "100000", "--nproc-per-node", "2"]
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ppdsl.cli", *args, "--run-dir", str(run_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    try:
        while not all((run_dir / "launch-1" / f"rank{r}.status").exists() for r in range(2)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ranks never got ready"
            time.sleep(0.2)
        time.sleep(1)  # into the training steps
        assert len(_tagged(tag)) >= 6, "ppdsl, the launcher, two guards and two ranks"
    except BaseException:  # a run of 100,000 steps must not outlive a failed test
        for pid in _tagged(tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise
    return proc


def _gone_within(tag: str, seconds: float) -> float:
    t0 = time.monotonic()
    while _tagged(tag):
        assert time.monotonic() - t0 < seconds, f"still running after {seconds} s: {_tagged(tag)}"
        time.sleep(0.1)
    return time.monotonic() - t0


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_ppdsl_ends_the_launcher_and_every_rank(sig, tmp_path):
    """Before: SIGTERM or SIGKILL of `ppdsl` left the launcher and both ranks training."""
    tag = f"stop-{sig.name}-{os.getpid()}"
    proc = _start_long_run(tmp_path, tag)
    try:
        proc.send_signal(sig)
        took = _gone_within(tag, 10)
        _, stderr = proc.communicate(timeout=10)
    finally:
        for pid in _tagged(tag):
            os.kill(pid, signal.SIGKILL)
    print(f"{sig.name}: every process gone after {took:.2f} s")
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:
        assert proc.returncode == 2
        # under load the ranks may not have reached their first step yet: either way the message says where
        assert re.search(r"error\[E073\]: stopped by SIGTERM (at step \d+|before the first step)", stderr), stderr
        assert "Traceback" not in stderr


@pytest.mark.e2e
def test_the_rank_that_died_first_is_named(tmp_path):
    """Rank 1 SIGKILLs itself in step 1; before, the message blamed rank 0 ("communication failed")."""
    _single_process("1f1b", 2, 4, 1, tmp_path)
    env = {**os.environ, "PPDSL_INJECT_FAILURE": "rank=1,job=2,step=1,mode=kill"}
    result, _ = _cluster("1f1b", 2, 4, 1, tmp_path, env=env)
    assert result.exit_code == 2
    assert "error[E040]: rank 1 died (killed by signal 9, SIGKILL) at step 1" in result.stderr, result.stderr
    assert "rank 0 failed" not in result.stderr


@pytest.mark.e2e
def test_a_peer_that_never_comes_is_a_timeout(tmp_path):
    """Node 0 of two, and no node 1: before, this waited forever."""
    with socket.socket() as s:  # a port free now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["run", "1f1b", "--pp", "2", "-m", "4", "--batch-size", "8", "--nproc-per-node", "1", "--nnodes", "2"]
    args += ["--master", f"127.0.0.1:{port}", "--node-rank", "0", "--rendezvous-timeout", "5"]
    t0 = time.monotonic()
    result = runner.invoke(app, [*args, "--run-dir", str(tmp_path / "run")])
    took = time.monotonic() - t0
    assert result.exit_code == 2, result.output
    assert f"error[E072]: the rendezvous at `127.0.0.1:{port}` did not complete within 5 s" in result.stderr
    assert took < 15, f"took {took:.1f} s"
    assert not subprocess.run(["pgrep", "-f", f"master 127.0.0.1:{port}"], capture_output=True).stdout


@pytest.mark.e2e
@pytest.mark.parametrize(("stem", "vpp"), [("1f1b_recompute", 1), ("interleaved1f1b_offload", 2)])
def test_processes_with_memory_actions_train_like_one_process(stem, vpp, tmp_path):
    """1F1B with full recompute, interleaved 1F1B with offload, on two processes (pp=2): each rank builds its memory
    programs from the plan spec, and the transport hands them what they read (`communication_plan`'s memory inputs:
    the stage input, the variables a recompute or reload writes again, the host store), so parameters and losses
    are the one process's. Before, the recompute failed (`The variable ppdsl.298.pd_op.layer_norm.1 should exist`)
    and the offload waited for the next rank's gradient, which a plan of one rank took for an activation."""
    exp = expand(load(library_dir() / f"{stem}.sched"), 2, 4, vpp)
    used = {t for r in range(2) for t, _, _ in exp.job_tuples(r)}
    assert used >= ({"recompute"} if vpp == 1 else {"offload", "reload"})
    want_params, want_losses = _single_process(stem, 2, 4, vpp, tmp_path)
    result, run_dir = _cluster(stem, 2, 4, vpp, tmp_path)
    assert result.exit_code == 0, result.output + (result.stderr or "")
    got = {}
    for r in range(2):
        with np.load(run_dir / f"rank{r}.npz") as data:
            got.update({k: data[k] for k in data.files})
    assert set(got) == set(want_params)
    for name, value in want_params.items():
        np.testing.assert_allclose(got[name], value, atol=1e-6, rtol=0, err_msg=name)
    losses = json.loads((run_dir / f"rank{_loss_rank(stem, 2, vpp)}.json").read_text())["losses"]
    np.testing.assert_allclose(np.array(losses), np.stack(want_losses), atol=1e-6, rtol=0)
