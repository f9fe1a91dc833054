"""No rank outlives `ppdsl run`, and every rank's end is recorded: the two small programs around Paddle's launcher.

`ppdsl run --nproc-per-node K` starts a chain of processes: ppdsl -> the launcher (`python -m
paddle.distributed.launch`) -> one guard per rank -> that rank's worker. Paddle starts each rank in a session of
its own, so a signal to ppdsl's process group never reaches them, and a launcher killed with SIGKILL leaves them
training. Each link of the chain therefore asks the kernel to kill it when its parent dies (Linux
`prctl(PR_SET_PDEATHSIG, SIGKILL)`, a polling thread elsewhere), and checks that the parent it was started by is
still there (else it was orphaned before asking):

* `python lifeline.py launcher -- CMD...` asks, then becomes the launcher (exec keeps the request);
* `python lifeline.py rank RUN_DIR -- CMD...` (what the launcher starts per rank) asks, runs the worker `CMD`,
  and writes `rank<r>.status` when the worker is ready (past the rendezvous) and when it ended: its exit status
  or the signal that killed it, the step it was at (the worker reports each step through a pipe), when, and
  whether a signal told this rank to stop (the launcher stopping the others, or ppdsl being stopped). A rank
  killed by a signal writes nothing itself; its guard does.

Nothing heavy is imported (no numpy, no paddle), so the guards start in milliseconds.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ppdsl.common.files import write_atomic

PARENT_PID = "PPDSL_PARENT_PID"  # set by the process that starts a link: the pid its child must see as parent
PROGRESS_FD = "PPDSL_PROGRESS_FD"  # the worker's end of the pipe to its guard
_PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def status_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"rank{rank}.status"


@dataclass
class RankStatus:
    """What a rank's guard knows of it. `state`: "ready" (past the rendezvous) or "ended"."""

    rank: int
    state: str
    step: int | None = None  # the step the worker last started; None before the first
    returncode: int | None = None  # the worker's exit status, negative for the signal that ended it
    stopped_by: int | None = None  # the signal that told the rank to stop, if one did before it ended
    time: float = 0.0  # wall clock (time.time()) of the record, the same clock on every rank of a machine

    @classmethod
    def read(cls, path: Path) -> RankStatus | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None


def die_with_parent(parent: int | None) -> None:
    """Be killed when the parent process dies; if it already has (our parent is not `parent`), die now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        asked = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux
        asked = False
    if parent is not None and os.getppid() != parent:
        os._exit(128 + signal.SIGKILL)
    if not asked:
        start = os.getppid()

        def watch() -> None:
            while os.getppid() == start:
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=watch, daemon=True, name="ppdsl-die-with-parent").start()


def _expected_parent() -> int | None:
    text = os.environ.get(PARENT_PID, "")
    return int(text) if text.isdecimal() else None


class Progress:
    """The worker's side: tells its guard (if it has one) that it is ready and which step it starts."""

    def __init__(self) -> None:
        text = os.environ.pop(PROGRESS_FD, "")
        self._fd = int(text) if text.isdecimal() else None

    def _say(self, line: str) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, (line + "\n").encode())
        except OSError:  # the guard is gone: the kernel is about to end this process too
            self._fd = None

    def ready(self) -> None:
        self._say("ready")

    def step(self, step: int) -> None:
        self._say(f"step {step}")


def worker_setup() -> Progress:
    """Called first by a rank's worker: die with the guard that started it, and report to it."""
    die_with_parent(_expected_parent())
    return Progress()


def _exec_launcher(cmd: list[str]) -> None:
    die_with_parent(_expected_parent())
    # the launcher's own children (the guards) check that it is still their parent
    os.environ[PARENT_PID] = str(os.getpid())
    os.execv(cmd[0], cmd)


class _Guard:
    def __init__(self, run_dir: Path, cmd: list[str]):
        die_with_parent(_expected_parent())
        self.run_dir = run_dir
        self.rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
        self.step: int | None = None
        self.stopped_by: int | None = None
        self.child: subprocess.Popen | None = None
        self.lock = threading.Lock()  # the reader's "ready" and the final "ended" are written one at a time
        self.ended = False
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._stop)
        read, write = os.pipe()
        env = {**os.environ, PARENT_PID: str(os.getpid()), PROGRESS_FD: str(write)}
        self.child = subprocess.Popen(cmd, env=env, pass_fds=(write,))
        os.close(write)
        # a thread reads the reports, for a process the worker forks may hold the pipe open after it ended
        self.reader = threading.Thread(target=self._read, args=(os.fdopen(read, "r"),), daemon=True)
        self.reader.start()

    def _stop(self, signum: int, _frame) -> None:
        """The launcher signals a rank's whole session, so the worker has it too; pass it on anyway, for a
        signal sent to the guard alone."""
        if self.stopped_by is None:
            self.stopped_by = signum
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def _read(self, reports) -> None:
        for line in reports:
            word, _, arg = line.strip().partition(" ")
            if word == "ready":
                self._write("ready")
            elif word == "step" and arg.isdecimal():
                self.step = int(arg)
                self._write("ready")  # the step in the status too: the launching command shows the ranks' progress

    def _write(self, state: str, returncode: int | None = None) -> None:
        with self.lock:
            if self.ended:
                return
            self.ended = state == "ended"
            status = RankStatus(self.rank, state, self.step, returncode, self.stopped_by, time.time())
            write_atomic(status_path(self.run_dir, self.rank), json.dumps(asdict(status)))

    def run(self) -> int:
        code = self.child.wait()
        self.reader.join(timeout=1.0)  # the last step reported, unless something else holds the pipe
        self._write("ended", code)
        return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "launcher" and argv[1] == "--":
        _exec_launcher(argv[2:])
    if len(argv) >= 4 and argv[0] == "rank" and argv[2] == "--":
        return _Guard(Path(argv[1]), argv[3:]).run()
    print("usage: lifeline.py launcher -- CMD... | lifeline.py rank RUN_DIR -- CMD...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
