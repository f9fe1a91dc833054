"""`ppdsl run --nproc-per-node K [--nnodes N --master HOST:PORT --node-rank R]`: one process per rank through
Paddle's own launcher, `paddle.distributed.launch`.

The run directory (`--run-dir`, default `ppdsl-run/`) holds the spec every rank reads, the launcher's logs, and
what each rank writes back (`rank<r>.json`, `rank<r>.npz`, or `rank<r>.error`). No paddle import here: the
processes import it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import write_atomic

PACKAGE = Path(__file__).resolve().parent.parent  # ppdsl/
WORKER = PACKAGE / "runtime" / "worker.py"
# `python -m paddle.distributed.launch` would put the current directory first on the launcher's sys.path, so a
# `json.py` there would run in it: the module is run from `-c` with that first entry (`""`, the cwd) removed.
LAUNCHER = (
    "import runpy, sys; sys.path[:1] = filter(None, sys.path[:1]); "
    'runpy.run_module("paddle.distributed.launch", run_name="__main__", alter_sys=True)'
)


@dataclass
class LaunchOptions:
    nproc_per_node: int
    nnodes: int = 1
    master: str | None = None
    node_rank: int = 0
    run_dir: Path = Path("ppdsl-run")
    comm_timeout: float = 20.0
    dry_run: bool = False


def validate(exp: Expansion, opts: LaunchOptions) -> None:
    problems = []
    if opts.nproc_per_node < 1 or opts.nnodes < 1:
        problems.append(Diagnostic("E007", "--nproc-per-node and --nnodes must be positive"))
    elif opts.nproc_per_node * opts.nnodes != exp.pp:
        problems.append(
            Diagnostic(
                "E038",
                f"{opts.nnodes} node(s) x {opts.nproc_per_node} processes = {opts.nnodes * opts.nproc_per_node} "
                f"ranks, but the schedule runs pp = {exp.pp}",
                help="one process per pipeline rank: --nproc-per-node * --nnodes must equal --pp",
            )
        )
    if opts.nnodes > 1 and not opts.master:
        problems.append(Diagnostic("E038", "several nodes need --master HOST:PORT", help="the rendezvous address"))
    if not 0 <= opts.node_rank < max(opts.nnodes, 1):
        problems.append(Diagnostic("E038", f"--node-rank {opts.node_rank} is not in 0 .. {opts.nnodes - 1}"))
    if problems:
        raise DiagnosticError(problems)


def launch_command(opts: LaunchOptions, spec_path: Path) -> list[str]:
    cmd = [sys.executable, "-c", LAUNCHER, "--nproc_per_node", str(opts.nproc_per_node)]
    if opts.nnodes > 1:
        cmd += ["--nnodes", str(opts.nnodes), "--master", str(opts.master), "--rank", str(opts.node_rank)]
    else:
        cmd += ["--host", "127.0.0.1"]
    cmd += ["--log_dir", str(opts.run_dir / "log"), str(WORKER), str(spec_path)]
    return cmd


def dry_run_text(exp: Expansion, opts: LaunchOptions, cmd: list[str]) -> str:
    lines = [shlex.join(cmd), ""]
    for r, jobs in enumerate(exp.jobs):
        node, local = divmod(r, opts.nproc_per_node)
        stages = ", ".join(map(str, exp.stage_of[r]))
        lines.append(f"rank {r} (node {node}, process {local}, stages {stages}): " + " ".join(map(exp.label, jobs)))
    return "\n".join(lines) + "\n"


@dataclass
class ClusterResult:
    losses: list[list[float]]
    step_seconds: list[float]  # the slowest rank's time per step
    comm_seconds: dict[int, float]
    parameters: dict[str, np.ndarray]
    ranks: list[dict]


def rank_environment() -> dict[str, str]:
    """The rank processes import the ppdsl that launched them (the worker script is this package's), whatever
    else is installed. Not the current directory: a `json.py` there would run in every rank; the `--model`
    module is found there by `load_model`, after everything else (the spec's `model_dir`)."""
    path = os.pathsep.join(p for p in (str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "GLOG_minloglevel": "2", "PYTHONPATH": path}


def run_cluster(spec: dict, exp: Expansion, opts: LaunchOptions) -> ClusterResult:
    """Start every rank of this node and wait; raise DiagnosticError naming the failed rank(s)."""
    run_dir = opts.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in list(run_dir.glob("rank*.json")) + list(run_dir.glob("rank*.npz")) + list(run_dir.glob("rank*.error")):
        stale.unlink()
    spec_path = run_dir / "spec.json"
    write_atomic(spec_path, json.dumps({**spec, "run_dir": str(run_dir.resolve())}, indent=1), make_parents=True)
    cmd = launch_command(opts, spec_path)
    with open(run_dir / "launch.log", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=rank_environment())
    local = range(opts.node_rank * opts.nproc_per_node, (opts.node_rank + 1) * opts.nproc_per_node)
    errors = sorted(run_dir.glob("rank*.error"), key=lambda p: int(p.stem[4:]))
    if proc.returncode != 0 or errors:
        diags = [
            Diagnostic("E040", p.read_text().split("\n\n")[0], help=f"details in {p} and {run_dir / 'log'}")
            for p in errors
        ]
        if not diags:
            diags = [
                Diagnostic(
                    "E040",
                    f"the launcher exited with {proc.returncode} and no rank reported an error",
                    help=f"see {run_dir / 'launch.log'} and {run_dir / 'log'}",
                )
            ]
        raise DiagnosticError(diags)
    reports = [json.loads((run_dir / f"rank{r}.json").read_text()) for r in local]
    params: dict[str, np.ndarray] = {}
    for r in local:
        with np.load(run_dir / f"rank{r}.npz") as data:
            params.update({k: data[k] for k in data.files})
    losses = next((rep["losses"] for rep in reports if rep["losses"]), [])
    steps = max(len(rep["step_seconds"]) for rep in reports)
    slowest = [max(rep["step_seconds"][i] for rep in reports if i < len(rep["step_seconds"])) for i in range(steps)]
    return ClusterResult(losses, slowest, {rep["rank"]: rep["comm_seconds"] for rep in reports}, params, reports)
