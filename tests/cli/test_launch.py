"""`ppdsl run --nproc-per-node` before and after its processes: what is refused before anything starts (`--master`,
a taken port, the failure-injection variable), and how the ranks' ends become one message naming the first."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, to_json
from ppdsl.runtime.launch import (
    RANK_DIAGNOSTICS_CAP,
    RANK_ERROR_CAP,
    RANK_REPORT_CAP,
    end_launcher,
    failure_diagnostic,
    failure_diagnostics,
    rank_output,
    rank_report,
    stop_requests,
)
from ppdsl.runtime.lifeline import RankStatus

runner = CliRunner()
TWO_NODES = ["run", "1f1b", "--pp", "2", "-m", "4", "--nproc-per-node", "1", "--nnodes", "2"]


@pytest.mark.parametrize(
    ("master", "fragment"),
    [
        (":99999", "`--master :99999`: no host, and port `99999` is not a number from 1 to 65535"),
        ("10.0.0.1:99999", "port `99999` is not a number from 1 to 65535"),
        ("10.0.0.1:abc", "port `abc` is not a number from 1 to 65535"),
        ("host:", "`--master host:`: no port"),
        (":8090", "`--master :8090`: no host"),
        ("10.0.0.1:0", "port `0` is not a number"),
        ("10.0.0.1", "`--master 10.0.0.1` has no port"),
        ("my host:8090", "host `my host` is not a host name or IPv4 address"),
        ("10.0.0.1: 8090", "port ` 8090` is not a number"),
        ("a..b:8090", "host `a..b` is not a host name"),
        ("10.0.0.1:٨٠٩٠", "is not a number from 1 to 65535"),  # digits, but not ASCII ones
    ],
)
def test_a_bad_master_is_refused_before_launch(master, fragment, tmp_path, in_repo):
    run_dir = tmp_path / "run"
    result = runner.invoke(app, [*TWO_NODES, "--master", master, "--run-dir", str(run_dir)])
    assert result.exit_code == 2, result.output
    assert "error[E070]" in result.stderr and fragment in result.stderr, result.stderr
    assert not run_dir.exists(), "nothing may be written for a launch refused up front"


def test_good_masters_pass(in_repo):
    for master in ("10.0.0.1:8090", "node-0.cluster.example:1", "localhost:65535"):
        result = runner.invoke(app, [*TWO_NODES, "--master", master, "--dry-run"])
        assert result.exit_code == 0, (master, result.stderr)


def test_an_empty_master_is_a_missing_one(in_repo):
    result = runner.invoke(app, [*TWO_NODES, "--master", "", "--dry-run"])
    assert result.exit_code == 2
    assert "several nodes need --master" in result.stderr and "E070" not in result.stderr


@pytest.mark.parametrize("flag", ["--rendezvous-timeout", "--comm-timeout"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_timeouts_must_be_positive_and_finite(flag, value, in_repo):
    result = runner.invoke(
        app, ["run", "1f1b", "--pp", "2", "-m", "4", "--nproc-per-node", "2", flag, value, "--dry-run"]
    )
    assert result.exit_code == 2
    # each is checked once, with the run's other options (ppdsl.runtime.request): one message, not two
    wanted = {"--comm-timeout": "must be seconds above 0, at most 86400", "--rendezvous-timeout": "must be a positive"}
    assert result.stderr.count("error[E007]") == 1, result.stderr
    assert f"{flag} {wanted[flag]}" in result.stderr, result.stderr


def test_a_taken_rendezvous_port_is_refused_at_once(tmp_path, in_repo):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        t0 = time.monotonic()
        result = runner.invoke(
            app, [*TWO_NODES, "--master", f"127.0.0.1:{port}", "--node-rank", "0", "--run-dir", str(tmp_path / "r")]
        )
    assert time.monotonic() - t0 < 10
    assert result.exit_code == 2, result.output
    assert f"error[E071]: port {port} of `--master 127.0.0.1:{port}` is in use by another process" in result.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "value",
    [
        "1",
        "garbage",
        "rank=1",
        "job=2",
        "rank=x,job=1",
        "rank=1,job=1,mode=explode",
        "rank=9,job=1",
        "rank=1,job=1,colour=red",
        "rank=1,rank=0,job=1",
        "rank=-1,job=1",
        "rank=0,job=" + "9" * 5000,  # past Python's 4300-digit limit: int() raised a traceback
        "rank=0,job=²",  # str.isdigit() holds, int() refuses
        "rank=٠,job=1",  # str.isdecimal() holds, and int() read it as 0
    ],
    ids=lambda value: value[:30],
)
def test_a_malformed_failure_injection_is_a_clean_error(value, tmp_path, in_repo):
    """Only `rank=R,job=J[,step=S][,mode=M]` acts; before, any value failed rank 0 (or raised a traceback)."""
    result = runner.invoke(
        app,
        ["run", "1f1b", "--pp", "2", "-m", "4", "--nproc-per-node", "2", "--run-dir", str(tmp_path / "r")],
        env={"PPDSL_INJECT_FAILURE": value},
    )
    assert result.exit_code == 2, result.output
    assert "error[E007]: PPDSL_INJECT_FAILURE=" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "r").exists(), "no process may start"


@pytest.mark.parametrize("planted", ["launch-²", "launch-٣", "launch-" + "9" * 200, "launch-1x", "launch-"])
def test_a_planted_launch_name_is_ignored(planted, tmp_path, in_repo):
    """Before: `launch-²` in the run directory (`isdigit()`, yet not an `int()`) was a traceback for every launch,
    and `launch-٣` took the number 3."""
    run_dir = tmp_path / "r"
    (run_dir / planted).mkdir(parents=True)
    (run_dir / "launch-2").mkdir()
    result = runner.invoke(
        app, ["run", "1f1b", "--pp", "2", "-m", "4", "--nproc-per-node", "2", "--run-dir", str(run_dir), "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert f"{run_dir / 'launch-3' / 'spec.json'}" in result.stdout, result.stdout


# ---------------------------------------------------------------- naming the first rank to fail


def _rank(run_dir, rank, *, state="ended", step=3, returncode=1, stopped_by=None, at=100.0, error=None):
    status = {
        "rank": rank,
        "state": state,
        "step": step,
        "returncode": returncode,
        "stopped_by": stopped_by,
        "time": at,
    }
    (run_dir / f"rank{rank}.status").write_text(json.dumps(status))
    if error is not None:
        (run_dir / f"rank{rank}.error").write_text(f"rank {rank} failed: {error}\n\nTraceback ...")


def _message(run_dir, ranks=range(2), returncode=1):
    statuses = {r: RankStatus.read(run_dir / f"rank{r}.status") for r in ranks}
    diag = failure_diagnostic(run_dir, ranks, statuses, returncode)
    assert diag.code == "E040"
    return diag.message


def test_a_killed_rank_is_named_before_the_survivor_it_broke(tmp_path):
    """The survivor's error may even carry the earlier time: a rank that died by itself is still the cause."""
    _rank(tmp_path, 0, at=100.0, error="RuntimeError: rank 0: communication failed: Connection reset by peer")
    _rank(tmp_path, 1, step=7, returncode=-9, at=100.2)
    assert _message(tmp_path) == (
        "rank 1 died (killed by signal 9, SIGKILL) at step 7; "
        "rank 0 then failed: RuntimeError: rank 0: communication failed: Connection reset by peer"
    )


def test_a_rank_that_exits_without_a_word_is_the_cause(tmp_path):
    _rank(tmp_path, 0, returncode=-15, stopped_by=15, at=101.0)
    _rank(tmp_path, 1, step=None, returncode=3, at=100.0)
    assert (
        _message(tmp_path)
        == "rank 1 died (exited with status 3) before its first step; the launcher then stopped rank(s) 0"
    )


def test_of_two_errors_the_first_written_is_the_cause(tmp_path):
    _rank(tmp_path, 0, at=100.5, error="CommTimeout: rank 0 waited 20 s")
    _rank(tmp_path, 1, at=100.1, error="ValueError: bad batch")
    assert (
        _message(tmp_path)
        == "rank 1 failed: ValueError: bad batch; rank 0 then failed: CommTimeout: rank 0 waited 20 s"
    )


def test_a_rank_whose_guard_was_killed_is_named(tmp_path):
    _rank(tmp_path, 0, at=100.5, error="RuntimeError: Connection reset by peer")
    assert _message(tmp_path).startswith("rank 1 ended without a report (its guard process was killed); rank 0 then")


def test_no_rank_to_blame_names_the_launcher(tmp_path):
    _rank(tmp_path, 0, returncode=0)
    _rank(tmp_path, 1, returncode=0)
    assert _message(tmp_path, returncode=7) == "the launcher exited with 7 and no rank reported an error"


def test_a_launcher_that_ignores_sigterm_is_killed_after_the_grace_period():
    """The launcher's group gets SIGTERM, then SIGKILL: a stop never waits on a process that will not end."""
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline() == "up\n"
    t0 = time.monotonic()
    end_launcher(proc, grace=0.5)
    assert proc.returncode == -signal.SIGKILL
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_stop_signals_are_recorded_while_the_launcher_runs_and_restored_after(sig):
    """Each of the three becomes a request to stop the launcher (the multi-process test sends SIGTERM), not
    ppdsl's sudden end; afterwards the previous handler is back."""
    before = signal.getsignal(sig)
    with stop_requests() as received:
        os.kill(os.getpid(), sig)
        deadline = time.monotonic() + 5
        while not received and time.monotonic() < deadline:
            time.sleep(0.01)
    assert received == [sig]
    assert signal.getsignal(sig) is before


def test_dry_run_shows_the_copy_jobs_of_the_gpu_path(tmp_path):
    """A schedule with offload / reload jobs (every micro-batch offloaded): the dry run adds, per rank, which copy op
    each runs, where it lands and on which stream; an order without them shows nothing more."""
    from ppdsl.analysis.expand import expand
    from ppdsl.analysis.plan_spec import expansion_spec
    from ppdsl.language.library import library_dir
    from ppdsl.language.resolve import load, resolve_text
    from ppdsl.runtime.launch import dry_run_text
    from ppdsl.runtime.request import RunRequest

    base = expand(load(library_dir() / "1f1b.sched"), 2, 4)
    opts = RunRequest(pp=2, microbatches=4, nproc_per_node=2, run_dir=tmp_path)
    assert "copies" not in dry_run_text(expansion_spec(base), opts, ["ppdsl"])
    offload_all = resolve_text(
        'job recv_forward : forward ops "pd_op.recv_v2" before forward receives\n'
        'job send_backward : backward ops "pd_op.send_v2" after backward sends\n'
        "order { repeat microbatches { recv_forward forward offload }\n"
        " repeat microbatches { reload backward send_backward }\n optimizer }\n"
    )
    text = dry_run_text(expansion_spec(expand(offload_all, 2, 2)), opts, ["ppdsl"])
    assert "stages 0): recv_forward0 F0 O0 recv_forward1 F1 O1 L0 B0 send_backward0 L1 B1 " in text
    assert (
        "rank 1 offload (2 jobs): pd_op.memcpy_d2h to CUDA pinned host memory (dst_place_type=1) on stream copy_stream"
        in text
    )
    assert "rank 0 reload (2 jobs): pd_op.memcpy_h2d back to the GPU (dst_place_type=1) on stream copy_stream" in text


def test_a_rank_that_refused_with_a_diagnostic_is_reported_by_that_diagnostic_not_inside_e040(tmp_path):
    """Before: a rank's E095 (a tied weight with no `sync_shared`) came back as `E040: rank 1 failed: [E095] ...`,
    exit status 1, its help lost. Now the rank's own diagnostic, with a note naming the rank."""
    refusal = Diagnostic("E095", "parameter `w` is shared by stages 0, 1", help="add `sync_shared`")
    _rank(tmp_path, 1, at=100.0, error="[E095] parameter `w` is shared by stages 0, 1")
    (tmp_path / "rank1.diagnostics.json").write_text(to_json([refusal]))
    _rank(tmp_path, 0, returncode=-15, stopped_by=15, at=101.0)
    statuses = {r: RankStatus.read(tmp_path / f"rank{r}.status") for r in range(2)}
    (got,) = failure_diagnostics(tmp_path, range(2), statuses, 1)
    assert (got.code, got.message, got.help) == ("E095", refusal.message, refusal.help)
    assert any("rank 1 refused to train" in note for note in got.notes)
    # a rank that died by itself is still the cause, before a diagnosed failure it may have caused
    _rank(tmp_path, 0, returncode=-9, at=101.0)
    (first,) = failure_diagnostics(tmp_path, range(2), statuses | {0: RankStatus.read(tmp_path / "rank0.status")}, 1)
    assert first.code == "E040" and first.message.startswith("rank 0 died")


def test_a_rank_diagnostics_file_that_is_not_a_small_regular_file_is_not_read(tmp_path):
    """The launcher reads `rank<r>.diagnostics.json` through the bounded reader: a FIFO planted there (which a
    plain read would block on) or a file over the cap is ignored, and the failure is reported as E040."""
    _rank(tmp_path, 1, at=100.0, error="[E095] parameter `w` is shared by stages 0, 1")
    _rank(tmp_path, 0, returncode=-15, stopped_by=15, at=101.0)
    statuses = {r: RankStatus.read(tmp_path / f"rank{r}.status") for r in range(2)}
    found = tmp_path / "rank1.diagnostics.json"
    os.mkfifo(found)
    (fifo,) = failure_diagnostics(tmp_path, range(2), statuses, 1)
    assert fifo.code == "E040"
    found.unlink()
    refusal = Diagnostic("E095", "parameter `w` is shared by stages 0, 1", help="add `sync_shared`")
    found.write_text(to_json([refusal]) + " " * RANK_DIAGNOSTICS_CAP)
    (large,) = failure_diagnostics(tmp_path, range(2), statuses, 1)
    assert large.code == "E040"


def test_a_rank_error_file_that_is_a_fifo_or_huge_is_read_bounded(tmp_path):
    """Before: the launcher read `rank<r>.error` whole with `read_text`, so a FIFO planted there hung it and a
    huge file was read into memory. Now the bounded reader: a FIFO is named as unreadable, a huge file is read
    from its start only (its message comes first)."""
    _rank(tmp_path, 0, returncode=-15, stopped_by=15, at=101.0)
    _rank(tmp_path, 1, at=100.0)
    os.mkfifo(tmp_path / "rank1.error")
    statuses = {r: RankStatus.read(tmp_path / f"rank{r}.status") for r in range(2)}
    fifo = failure_diagnostic(tmp_path, range(2), statuses, 1)
    assert fifo.code == "E040" and "rank1.error could not be read" in fifo.message
    (tmp_path / "rank1.error").unlink()
    (tmp_path / "rank1.error").write_text("rank 1 failed: out of memory\n\n" + "x" * (4 * RANK_ERROR_CAP))
    huge = failure_diagnostic(tmp_path, range(2), statuses, 1)
    assert huge.message.startswith("rank 1 failed: out of memory")


@pytest.mark.parametrize("name", ["rank0.json", "rank0.npz"])
def test_a_rank_result_that_is_not_a_regular_file_is_e040_not_a_hang(tmp_path, name):
    """The results a rank writes back (`rank<r>.json`, `rank<r>.npz`) are opened through the bounded reader: a
    FIFO there (a plain `read_text` / `np.load` blocks on it) is E040 naming the file; a report over its cap too."""
    os.mkfifo(tmp_path / name)
    with pytest.raises(DiagnosticError) as err:
        if name.endswith(".json"):
            rank_report(tmp_path / name)
        else:
            rank_output(tmp_path / name).close()
    (diag,) = err.value.diagnostics
    assert diag.code == "E040" and name in diag.message and "not a regular file" in diag.message
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(RANK_REPORT_CAP + 1)
    with pytest.raises(DiagnosticError, match="larger than"):
        rank_report(big)
