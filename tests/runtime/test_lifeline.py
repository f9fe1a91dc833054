"""The guards around the launcher and each rank (ppdsl/runtime/lifeline.py), with small stand-in programs instead of
Paddle: a process dies with its parent, and a rank's guard records how and at which step its worker ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ppdsl.runtime.lifeline import RankStatus, status_path

from paths import ROOT

LIFELINE = ROOT / "ppdsl" / "runtime" / "lifeline.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's prctl")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has ended; only its parent's wait is missing
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_process_dies_when_its_parent_is_killed(tmp_path):
    """parent -> child; the child asks to die with its parent, then sleeps; SIGKILL of the parent ends it."""
    pid_file = tmp_path / "child.pid"
    child = textwrap.dedent(
        f"""
        import os, time
        from ppdsl.runtime.lifeline import die_with_parent
        die_with_parent(int(os.environ["PPDSL_PARENT_PID"]))
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
        """
    )
    parent = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {child!r}], env={{**os.environ, "PPDSL_PARENT_PID": str(os.getpid())}})
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], env=ENV, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        grandchild = int(pid_file.read_text())
        assert _alive(grandchild)
        proc.kill()
        proc.wait()
        assert _wait_gone(grandchild, 5), "the child outlived its parent"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_process_started_by_a_parent_already_gone_does_not_run():
    """PPDSL_PARENT_PID names a pid that is not the parent: it was orphaned before asking, so it ends at once."""
    code = "from ppdsl.runtime.lifeline import die_with_parent; die_with_parent(1 << 22); print('ran')"
    result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=30)
    assert result.returncode == 128 + signal.SIGKILL
    assert "ran" not in result.stdout


def _guard(tmp_path, worker: str, rank: int = 1) -> tuple[subprocess.CompletedProcess, RankStatus | None]:
    """Run `worker` (Python source) under a rank's guard, as the launcher would for rank `rank`."""
    env = {**ENV, "PADDLE_TRAINER_ID": str(rank), "PPDSL_PARENT_PID": str(os.getpid())}
    cmd = [sys.executable, str(LIFELINE), "rank", str(tmp_path), "--", sys.executable, "-c", worker]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    return result, RankStatus.read(status_path(tmp_path, rank))


WORKER_HEAD = "import os, signal\nfrom ppdsl.runtime.lifeline import worker_setup\np = worker_setup()\np.ready()\n"


def test_the_guard_records_the_signal_and_step_a_worker_died_at(tmp_path):
    worker = WORKER_HEAD + "for s in range(3):\n    p.step(s)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    result, status = _guard(tmp_path, worker)
    assert result.returncode == 128 + signal.SIGKILL
    assert status == RankStatus(1, "ended", 2, -signal.SIGKILL, None, status.time)
    assert abs(status.time - time.time()) < 60


def test_the_guard_records_an_exit_without_a_word_and_a_success(tmp_path):
    _, status = _guard(tmp_path, WORKER_HEAD + "p.step(0)\nos._exit(3)\n")
    assert (status.state, status.step, status.returncode, status.stopped_by) == ("ended", 0, 3, None)
    result, status = _guard(tmp_path, WORKER_HEAD + "p.step(0)\np.step(1)\n")
    assert result.returncode == 0
    assert (status.state, status.step, status.returncode) == ("ended", 1, 0)


def test_a_guard_told_to_stop_says_so(tmp_path):
    """The launcher stopping a rank signals its whole session: guard and worker both get SIGTERM."""
    worker = WORKER_HEAD + "import time\np.step(4)\ntime.sleep(60)\n"
    env = {**ENV, "PADDLE_TRAINER_ID": "0", "PPDSL_PARENT_PID": str(os.getpid())}
    cmd = [sys.executable, str(LIFELINE), "rank", str(tmp_path), "--", sys.executable, "-c", worker]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    deadline = time.monotonic() + 20
    while RankStatus.read(status_path(tmp_path, 0)) is None:
        assert time.monotonic() < deadline, "the worker never got ready"
        time.sleep(0.05)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    status = json.loads(status_path(tmp_path, 0).read_text())
    assert (status["state"], status["step"], status["returncode"], status["stopped_by"]) == (
        "ended",
        4,
        -signal.SIGTERM,
        signal.SIGTERM,
    )
