"""A run with `nproc_per_node` (`ppdsl run --nproc-per-node K [--nnodes N --master HOST:PORT --node-rank R]`):
one process per rank through Paddle's own launcher, `paddle.distributed.launch`.

Each launch makes a directory of its own in the run directory (`--run-dir`, default `ppdsl-run/`):
`launch-<n>/`, the next free n, created new, so ppdsl writes only there and never deletes or overwrites a file
of the run directory it did not make. It holds the spec every rank reads (`spec.json`) and the plan specification
of the checked schedule it names (`plan.json`, ppdsl.plan.spec), both bound to the launch by their sha256
(ppdsl/runtime/launch_spec.py: each rank gets the spec's on its command line), the launcher's logs
(`launch.log`, `log/`), and what each rank writes back (`rank<r>.json`, `rank<r>.npz`, or `rank<r>.error`). No
paddle import here: the processes import it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.files import new_owned_directory, next_owned_number
from ppdsl.common.regular_files import NotRegular, TooLarge, open_regular, read_regular
from ppdsl.common.text import ascii_number, shortened
from ppdsl.plan.spec import PlanSpec
from ppdsl.runtime.launch_spec import FAILURE_MODES, FailureSpec, LaunchSpec, write_launch
from ppdsl.runtime.lifeline import PARENT_PID, STOP_SIGNALS, RankStatus, status_path
from ppdsl.runtime.request import MASTER_HELP, RunRequest

PACKAGE = Path(__file__).resolve().parent.parent  # ppdsl/
WORKER = PACKAGE / "runtime" / "worker.py"
LIFELINE = PACKAGE / "runtime" / "lifeline.py"  # the launcher's and each rank's guard (see that module)
LAUNCH_PREFIX = "launch-"  # a launch's own directory in --run-dir: launch-1, launch-2, ...
STOP_GRACE_SECONDS = 4.0  # after SIGTERM, the launcher stops its ranks; what is left after this gets SIGKILL
POLL_SECONDS = 0.2
# `python -m paddle.distributed.launch` would put the current directory first on the launcher's sys.path, so a
# `json.py` there would run in it: the module is run from `-c` with that first entry (`""`, the cwd) removed.
LAUNCHER = (
    "import runpy, sys; sys.path[:1] = filter(None, sys.path[:1]); "
    'runpy.run_module("paddle.distributed.launch", run_name="__main__", alter_sys=True)'
)

RANK_DIAGNOSTICS_CAP = 1 << 20  # bytes of a rank's `rank<r>.diagnostics.json`: a few diagnostics, far less
RANK_ERROR_CAP = 1 << 16  # bytes of a rank's error file the launcher reads: its message comes first
RANK_REPORT_CAP = 1 << 26  # bytes of `rank<r>.json`: losses and step times, a few hundred bytes a step


def check_master_port(opts: RunRequest) -> None:
    """Node 0 hosts the rendezvous (Paddle's launcher starts its server there, on every interface): a port that
    is taken would make it talk to whatever holds the port and wait forever. Probed by binding it, as the
    server will; a host that is not this machine's is another node's business."""
    if opts.nnodes < 2 or opts.master is None:
        return
    host, _, port_text = opts.master.rpartition(":")
    port = int(port_text)
    try:
        address = socket.gethostbyname(host)
    except (OSError, UnicodeError) as e:
        raise DiagnosticError(
            [Diagnostic("E070", f"`--master {opts.master}`: host `{host}` does not resolve ({e})", help=MASTER_HELP)]
        ) from None
    if opts.node_rank != 0:
        return
    with socket.socket() as probe:
        try:
            probe.bind((address, 0))
        except OSError:  # not an address of this machine
            return
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is not busy
        try:
            probe.bind(("", port))
        except OSError as e:
            why = "is in use by another process" if e.errno == errno.EADDRINUSE else f"cannot be used ({e.strerror})"
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E071",
                        f"port {port} of `--master {opts.master}` {why}",
                        help="node 0 serves the rendezvous there: pick a free port for every node's --master",
                    )
                ]
            ) from None


SPEC_DIGEST_SHOWN = "<sha256 of spec.json>"  # what `--dry-run` shows, before the spec is written


def launch_command(opts: RunRequest, spec_path: Path, spec_digest: str = SPEC_DIGEST_SHOWN) -> list[str]:
    """Paddle's launcher under a guard, each rank under one (ppdsl/runtime/lifeline.py: none outlives ppdsl); each
    rank gets the spec's path and the sha256 of its bytes, so it reads only the spec its launcher wrote."""
    cmd = [sys.executable, str(LIFELINE), "launcher", "--"]
    cmd += [sys.executable, "-c", LAUNCHER, "--nproc_per_node", str(opts.nproc_per_node)]
    if opts.nnodes > 1:
        cmd += ["--nnodes", str(opts.nnodes), "--master", str(opts.master), "--rank", str(opts.node_rank)]
    else:
        cmd += ["--host", "127.0.0.1"]
    launch_dir = spec_path.parent
    cmd += ["--log_dir", str(launch_dir / "log"), str(LIFELINE), "rank", str(launch_dir), "--"]
    cmd += [sys.executable, "-u", str(WORKER), str(spec_path), spec_digest]
    return cmd


def dry_run_text(plan: PlanSpec, opts: RunRequest, cmd: list[str]) -> str:
    """What `--dry-run` prints: the command, every rank's jobs of `plan`, and the copy jobs of the GPU path."""
    from ppdsl.runtime.replicas import RankLayout

    layout = RankLayout(plan.pp, opts.dp)
    lines = [shlex.join(cmd), ""]
    for g in range(layout.world):
        r = layout.rank_of(g)
        node, local = divmod(g, opts.nproc_per_node)
        stages = ", ".join(map(str, plan.stage_of[r]))
        replica = "" if layout.dp == 1 else f"replica {layout.replica_of(g)}, pipeline rank {r}, "
        lines.append(
            f"rank {g} ({replica}node {node}, process {local}, stages {stages}): "
            + " ".join(map(plan.label, plan.orders[r]))
        )
    if layout.dp > 1:
        lines += ["", *_reduction_lines(plan, layout)]
    from ppdsl.runtime.memory_jobs import dry_run_lines  # no Paddle: what the GPU path's copy jobs run

    copies = dry_run_lines(plan)
    if copies:
        lines += ["", "copies on the GPU path (on CPU the same jobs copy into an emulated host store):", *copies]
    return "\n".join(lines) + "\n"


def _reduction_lines(plan: PlanSpec, layout) -> list[str]:
    """Where each pipeline rank all-reduces its gradients over its replicas (`replicas.reduction_points` at run
    time: at the schedule's `reduce_grads` jobs, the rest before the optimizer)."""
    from ppdsl.plan.kinds import REDUCE_GRADS_NAME

    lines = [f"gradient reduction (all-reduce, mean over {layout.dp} replicas):"]
    for r in range(layout.pp):
        group = ", ".join(map(str, layout.replica_group(r)))
        jobs = [plan.label(j) for j in plan.orders[r] if plan.job_types[j[0]].name == REDUCE_GRADS_NAME]
        where = (
            f"at {', '.join(jobs)}"
            if jobs
            else "once, right before the optimizer (the schedule places no reduce_grads job)"
        )
        lines.append(f"  pipeline rank {r} over ranks {{{group}}}: {where}")
    return lines


def next_launch_directory(run_dir: Path) -> Path:
    """The directory the next launch into `run_dir` will make (what `--dry-run` shows)."""
    return run_dir / f"{LAUNCH_PREFIX}{next_owned_number(run_dir, LAUNCH_PREFIX)}"


def new_launch_directory(run_dir: Path) -> Path:
    """A new directory for one launch's files in `run_dir`, made here (so nothing in it is the user's)."""
    return new_owned_directory(run_dir, LAUNCH_PREFIX)


@dataclass
class ClusterResult:
    losses: list[list[float]]
    step_seconds: list[float]  # the slowest rank's time per step
    comm_seconds: dict[int, float]
    parameters: dict[str, np.ndarray]
    ranks: list[dict]

    @property
    def learning_rate(self) -> float | None:
        """What the ranks' optimizers trained with, read from their scopes (None: no rank said, or they differ)."""
        rates = {rep.get("learning_rate") for rep in self.ranks}
        return rates.pop() if len(rates) == 1 else None


def rank_environment() -> dict[str, str]:
    """The rank processes import the ppdsl that launched them (the worker script is this package's), whatever
    else is installed. Not the current directory: a `json.py` there would run in every rank; the `--model`
    module is found there by `load_model`, after everything else (the spec's `model_dir`)."""
    path = os.pathsep.join(p for p in (str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "GLOG_minloglevel": "2", "PYTHONPATH": path}


def run_cluster(
    spec: LaunchSpec, run_dir: Path, plan: PlanSpec, on_step: Callable[[int], None] | None = None
) -> ClusterResult:
    """Start every rank of this node with `run_dir` (from `new_launch_directory`) as their directory, and wait;
    raise DiagnosticError naming the failed rank(s). Check the port (`check_master_port`) before making `run_dir`.
    Every rank builds its plan from `plan`, written beside the spec, and from nothing else of the schedule.
    `on_step(step)` is called with each new step (0-based) that every rank of this node has started."""
    opts = spec.request
    spec_path, digest = write_launch(run_dir, spec, plan.to_json(), plan.fingerprint)
    cmd = launch_command(opts, spec_path, digest)
    local = range(opts.node_rank * opts.nproc_per_node, (opts.node_rank + 1) * opts.nproc_per_node)
    started = time.time()
    with open(run_dir / "launch.log", "x") as log:  # "x": the directory is new, and so is everything in it
        returncode, stopped_by, rendezvous_done = _supervise(cmd, log, opts, run_dir, local, started, on_step)
    statuses = _statuses(run_dir, local, started)
    if stopped_by is not None:
        raise DiagnosticError([_stopped_diagnostic(stopped_by, statuses, run_dir)])
    if not rendezvous_done:
        raise DiagnosticError([_rendezvous_diagnostic(opts, run_dir, statuses, local)])
    errors = [r for r in local if (run_dir / f"rank{r}.error").exists()]
    if returncode != 0 or errors:
        raise DiagnosticError(failure_diagnostics(run_dir, local, statuses, returncode))
    reports = [json.loads(rank_report(run_dir / f"rank{r}.json")) for r in local]
    params: dict[str, np.ndarray] = {}
    for r in local:
        with rank_output(run_dir / f"rank{r}.npz") as f, np.load(f) as data:
            params.update({k: data[k] for k in data.files})
    losses = _step_losses(reports)
    steps = max(len(rep["step_seconds"]) for rep in reports)
    slowest = [max(rep["step_seconds"][i] for rep in reports if i < len(rep["step_seconds"])) for i in range(steps)]
    return ClusterResult(losses, slowest, {rep["rank"]: rep["comm_seconds"] for rep in reports}, params, reports)


def rank_report(path: Path) -> bytes:
    """The bytes of a rank's `rank<r>.json`, through the bounded reader (at most RANK_REPORT_CAP); E040 naming the
    file when it is not a regular file, too large, or unreadable."""
    try:
        data, _ = read_regular(path, RANK_REPORT_CAP)
    except (NotRegular, TooLarge, OSError, ValueError) as err:
        raise _unreadable_output(path, err) from None
    return data


def rank_output(path: Path) -> BinaryIO:
    """A file a rank wrote back (`rank<r>.npz`), open, through the bounded reader: a planted FIFO never hangs the
    launcher; E040 naming the file when it is not a regular file or unreadable."""
    try:
        f, _ = open_regular(path)
    except (NotRegular, OSError, ValueError) as err:
        raise _unreadable_output(path, err) from None
    return f


def _unreadable_output(path: Path, err: Exception) -> DiagnosticError:
    if isinstance(err, NotRegular):
        why = "is not a regular file"
    elif isinstance(err, TooLarge):
        why = f"is larger than {RANK_REPORT_CAP} bytes"
    else:
        why = f"cannot be read ({err})"
    return DiagnosticError(
        [
            Diagnostic(
                "E040",
                f"the ranks ended, but {path} {why}",
                help=f"a rank writes it when it ends; see {path.parent / 'log'}, and run again in a new run dir",
            )
        ]
    )


def _step_losses(reports: list[dict]) -> list[list[float]]:
    """Per step, the loss of each micro-batch of the step: every replica's last stage reports its own, and
    replica r trains the step's micro-batches after replica r - 1's (replicas.py), so they go in replica order."""
    holders = sorted((rep for rep in reports if rep["losses"]), key=lambda rep: rep.get("replica", 0))
    if not holders:
        return []
    steps = min(len(rep["losses"]) for rep in holders)
    return [[loss for rep in holders for loss in rep["losses"][i]] for i in range(steps)]


@contextlib.contextmanager
def stop_requests() -> Iterator[list[int]]:
    """SIGTERM, SIGINT and SIGHUP to ppdsl, recorded (in the list yielded) instead of ending it at once, so that it
    can stop the launcher and the ranks first. Outside the main thread, where handlers cannot be set, nothing."""
    received: list[int] = []
    previous = {}
    try:
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda signum, _frame: received.append(signum))
    except ValueError:
        pass
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _supervise(
    cmd: list[str],
    log,
    opts: RunRequest,
    run_dir: Path,
    local: range,
    started: float,
    on_step: Callable[[int], None] | None = None,
) -> tuple[int, int | None, bool]:
    """Run the launcher in a session of its own and wait for it; stop it (and so every rank) on a stop signal or
    when this node's ranks are not all past the rendezvous within `--rendezvous-timeout`.
    Returns (the launcher's exit status, the stop signal or None, whether the rendezvous completed)."""
    env = {**rank_environment(), PARENT_PID: str(os.getpid())}
    with stop_requests() as received:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + opts.rendezvous_timeout
        ready = False
        shown = [-1]

        def report() -> None:
            if on_step is None:
                return
            step = slowest_step(_statuses(run_dir, local, started))
            # every rank past `step` has started each step before it: a step shorter than a poll is one too
            for each in range(shown[0] + 1, -1 if step is None else step + 1):
                on_step(each)
                shown[0] = each

        while True:
            try:
                code = proc.wait(timeout=POLL_SECONDS)
                report()  # the steps started since the last poll
                return code, None, True
            except subprocess.TimeoutExpired:
                pass
            report()
            if received:
                end_launcher(proc)
                return proc.returncode, received[0], True
            if not ready:
                statuses = _statuses(run_dir, local, started)
                ready = all(s is not None for s in statuses.values())  # "ready", or already ended
                if not ready and time.monotonic() > deadline:
                    end_launcher(proc)
                    return proc.returncode, None, False


def slowest_step(statuses: dict[int, RankStatus | None]) -> int | None:
    """The step every rank has started (the slowest rank's), or None before each has started one."""
    steps = [s.step if s is not None else None for s in statuses.values()]
    return None if not steps or None in steps else min(steps)


def end_launcher(proc: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM to the launcher's process group (it then stops each rank's session), SIGKILL after `grace` seconds;
    a rank still running then is killed by the kernel as its guard dies (see ppdsl/runtime/lifeline.py)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _statuses(run_dir: Path, local: range, started: float) -> dict[int, RankStatus | None]:
    """Each rank's status from its guard, this launch's only (an older file in the run directory is ignored)."""
    found = {r: RankStatus.read(status_path(run_dir, r)) for r in local}
    return {r: s if s is not None and s.time >= started else None for r, s in found.items()}


def _at_step(status: RankStatus | None) -> str:
    if status is None or status.step is None:
        return "before its first step"
    return f"at step {status.step}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _stopped_diagnostic(signum: int, statuses: dict[int, RankStatus | None], run_dir: Path) -> Diagnostic:
    steps = sorted({s.step for s in statuses.values() if s is not None and s.step is not None})
    where = f" at step {steps[-1]}" if steps else " before the first step"
    return Diagnostic(
        "E073",
        f"stopped by {_signal_name(signum)}{where}: the launcher and every rank of this node were ended",
        help=f"rerun the same command to start again (with --resume if it saved checkpoints); logs in {run_dir}",
    )


def _rendezvous_diagnostic(
    opts: RunRequest, run_dir: Path, statuses: dict[int, RankStatus | None], local: range
) -> Diagnostic:
    waiting = [r for r in local if statuses[r] is None]
    ranks = ", ".join(map(str, waiting))
    if opts.nnodes > 1:
        message = (
            f"the rendezvous at `{opts.master}` did not complete within {opts.rendezvous_timeout:g} s "
            f"(--rendezvous-timeout): rank(s) {ranks} of node {opts.node_rank} still waited for the other nodes"
        )
        fix = f"start the same `ppdsl run` with every --node-rank from 0 to {opts.nnodes - 1}, one per node"
    else:
        message = f"rank(s) {ranks} did not start within {opts.rendezvous_timeout:g} s (--rendezvous-timeout)"
        fix = "a loaded machine starts Paddle slowly: raise --rendezvous-timeout"
    return Diagnostic("E072", message, help=f"{fix}; the launcher's log is {run_dir / 'launch.log'}")


def failure_diagnostics(
    run_dir: Path, local: range, statuses: dict[int, RankStatus | None], returncode: int
) -> list[Diagnostic]:
    """What a failed launch reports: when the rank that failed first refused to train with a diagnostic of its
    own (a model sharing a parameter with no `sync_shared` to keep it, E095), that diagnostic as it is, with a note
    naming the rank; else E040 (`failure_diagnostic`), the rank that failed first and what followed."""
    events, _ = _failure_events(run_dir, local, statuses)
    if events and events[0][3]:
        rank = events[0][1]
        found = run_dir / f"rank{rank}.diagnostics.json"
        try:  # (through the bounded reader: a rank's few diagnostics, never a planted FIFO or a huge file)
            data, _ = read_regular(found, RANK_DIAGNOSTICS_CAP)
            diagnostics = [_diagnostic_of(d) for d in json.loads(data)]
        except (OSError, ValueError, TypeError, KeyError, NotRegular, TooLarge):
            diagnostics = []
        if diagnostics:
            note = f"rank {rank} refused to train; the launcher stopped the other ranks (details in {run_dir / 'log'})"
            return [replace(d, notes=[*d.notes, note]) for d in diagnostics]
    return [failure_diagnostic(run_dir, local, statuses, returncode)]


def _diagnostic_of(data: dict) -> Diagnostic:
    """A diagnostic a rank wrote (`Diagnostic.to_dict`), read back."""
    span = None
    if data.get("file"):
        span = Span(data["file"], data["line"], data["col"], data["end_line"], data["end_col"])
    return Diagnostic(
        str(data["code"]), str(data["message"]), span, str(data["label"]), str(data["help"]), list(data["notes"])
    )


def _failure_events(run_dir: Path, local: range, statuses: dict[int, RankStatus | None]):
    """(time, rank, text, diagnosed) of each rank that failed, the cause first (see `failure_diagnostic`), and the
    ranks the launcher stopped."""
    causes, failures, stopped = [], [], []
    for r in local:
        status, error = statuses[r], run_dir / f"rank{r}.error"
        when = status.time if status is not None else math.inf
        if error.exists():
            first = _error_summary(error)
            failures.append((when, r, first, (run_dir / f"rank{r}.diagnostics.json").exists()))
        elif status is None or status.state != "ended":
            causes.append((math.inf, r, f"rank {r} ended without a report (its guard process was killed)", False))
        elif status.stopped_by is not None:
            stopped.append(r)
        elif status.returncode:
            code = status.returncode
            how = f"killed by signal {-code}, {_signal_name(-code)}" if code < 0 else f"exited with status {code}"
            causes.append((when, r, f"rank {r} died ({how}) {_at_step(status)}", False))
    return sorted(causes) + sorted(failures), stopped


def _error_summary(error: Path) -> str:
    """The first paragraph of a rank's error file (its message; the traceback follows), read through the bounded
    reader: at most RANK_ERROR_CAP bytes of its start, never a planted FIFO."""
    try:
        f, _ = open_regular(error)
        with f:
            text = f.read(RANK_ERROR_CAP).decode(errors="replace")
    except (NotRegular, OSError, ValueError):
        return f"rank {error.stem.removeprefix('rank')} failed ({error} could not be read)"
    return text.split("\n\n")[0].strip()


def failure_diagnostic(
    run_dir: Path, local: range, statuses: dict[int, RankStatus | None], returncode: int
) -> Diagnostic:
    """One message that names the rank that failed first, then what followed. A rank that died by itself (a
    signal, an exit without an error file) is the cause: the others' errors ("Connection reset by peer") are
    what its death did to them. Else the first error written; ranks the launcher then stopped come last."""
    events, stopped = _failure_events(run_dir, local, statuses)
    if not events:
        return Diagnostic(
            "E040",
            f"the launcher exited with {returncode} and no rank reported an error",
            help=f"see {run_dir / 'launch.log'} and {run_dir / 'log'}",
        )
    (_, first_rank, text, _), *then = events
    parts = [text]
    for _, r, later, _ in then:
        prefix = f"rank {r} failed: "
        parts.append(f"rank {r} then failed: {later.removeprefix(prefix)}" if later.startswith(prefix) else later)
    if stopped:
        parts.append(f"the launcher then stopped rank(s) {', '.join(map(str, stopped))}")
    details = run_dir / f"rank{first_rank}.error"
    where = f"{details} and " if details.exists() else ""
    return Diagnostic("E040", "; ".join(parts), help=f"details in {where}{run_dir / 'log'}")


FAILURE_VARIABLE = "PPDSL_INJECT_FAILURE"


def parse_failure(text: str | None, pp: int) -> FailureSpec | None:
    """The testing hook `rank=R,job=J[,step=S][,mode=raise|hang|exit|kill]`: rank R fails before its J-th job of
    step S. Anything else is refused, rather than failing some rank the value did not name."""
    if not text:
        return None
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, eq, value = part.strip().partition("=")
        if not eq or key not in ("rank", "job", "step", "mode") or key in fields:
            fields = {}
            break
        fields[key] = value.strip()
    # ASCII numerals of at most 9 digits: `int()` refuses 5000 digits with a traceback, and reads `٣` as 3
    numbers = {k: ascii_number(fields.get(k, "0")) for k in ("rank", "job", "step")}
    if (
        not {"rank", "job"} <= fields.keys()
        or None in numbers.values()
        or fields.get("mode", "raise") not in FAILURE_MODES
        or numbers["rank"] >= pp
    ):
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"{FAILURE_VARIABLE}={shortened(repr(text), 80)} is not `rank=R,job=J[,step=S][,mode=M]` with "
                    f"R < {pp} (numbers of at most 9 digits)",
                    help=f"modes: {', '.join(FAILURE_MODES)}; unset the variable to run without a failure",
                )
            ]
        )
    return FailureSpec(numbers["rank"], numbers["job"], numbers["step"], fields.get("mode", "raise"))
