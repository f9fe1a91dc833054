"""`ppdsl run`: check the schedule, then train with it (one process, or one per rank), showing progress and a
summary.

Everything that can be wrong with the input is found before training starts: the checker's diagnostics, a
batch that does not split into micro-batches, a model path that does not import, a missing paddle, a
schedule that needs a split backward on a model that has none (found while the plan is built).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ppdsl.analysis.check import check
from ppdsl.analysis.expand import MAX_SIZE, parse_params
from ppdsl.analysis.scenario import Scenario, check_batch_size
from ppdsl.cli.app import app
from ppdsl.cli.common import VPP, Params, diagnosed, emit, err, out, styled, usage_error
from ppdsl.common.codes import EXIT_VALID
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, SourceCache, render_all
from ppdsl.common.files import check_output
from ppdsl.common.text import escaped
from ppdsl.common.units import format_bytes
from ppdsl.language.library import find_schedule


@dataclass
class RunOptions:
    schedule: str
    pp: int
    microbatches: int
    vpp: int = 1
    params: list[str] | None = None
    steps: int = 30
    model: str | None = None
    batch_size: int = 32
    lr: float = 0.01
    optimizer: str = "adam"
    seed: int = 0
    summary_json: Path | None = None
    save_dir: Path | None = None
    save_every: int = 0
    resume: Path | None = None
    profile: Path | None = None
    profile_steps: int = 3
    launch: object | None = None  # ppdsl.cli.launch.LaunchOptions: one process per rank


MAX_SEED = 2**31 - 2  # Paddle's program seed is a 32-bit int, and 2**31 - 1 stands in for seed 0 (runtime/program.py)
MAX_STEPS = 10**9  # far more than any run; past it `--steps` is a typo, and 10**30 trained without end
MAX_COMM_TIMEOUT = 24 * 3600.0  # seconds; a thread join refuses far larger timeouts


def _validate(opts: RunOptions) -> None:
    """Every numeric flag in range before anything runs: a NaN learning rate trains NaN parameters without an error."""
    problems = []
    if opts.steps < 0:
        problems.append(Diagnostic("E007", f"--steps must not be negative, got {opts.steps}"))
    if opts.steps > MAX_STEPS:
        problems.append(Diagnostic("E007", f"--steps must be at most {MAX_STEPS}, got {opts.steps}"))
    try:
        check_batch_size(opts.batch_size, opts.microbatches)
    except DiagnosticError as e:
        problems += e.diagnostics
    if opts.batch_size > MAX_SIZE:  # the feed is allocated whole: a larger one fails inside paddle, not here
        problems.append(Diagnostic("E007", f"--batch-size must be at most {MAX_SIZE}, got {opts.batch_size}"))
    if not (math.isfinite(opts.lr) and opts.lr > 0):
        problems.append(
            Diagnostic("E007", f"--lr must be a finite number above 0, got {opts.lr}", help="e.g. --lr 0.01")
        )
    if not 0 <= opts.seed <= MAX_SEED:
        problems.append(Diagnostic("E007", f"--seed must be an integer from 0 to {MAX_SEED}, got {opts.seed}"))
    if opts.optimizer not in ("adam", "sgd"):
        problems.append(Diagnostic("E007", f"unknown optimizer `{opts.optimizer}`", help="use adam or sgd"))
    if opts.save_every < 0:
        problems.append(Diagnostic("E007", f"--save-every must not be negative, got {opts.save_every}"))
    if opts.save_every and opts.save_dir is None:
        problems.append(Diagnostic("E007", "--save-every needs --save-dir"))
    if opts.profile_steps < 1:
        problems.append(Diagnostic("E007", f"--profile-steps must be at least 1, got {opts.profile_steps}"))
    timeout = getattr(opts.launch, "comm_timeout", 1.0)
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_COMM_TIMEOUT):
        problems.append(
            Diagnostic("E007", f"--comm-timeout must be seconds above 0, at most {MAX_COMM_TIMEOUT:g}, got {timeout}")
        )
    problems += [
        p
        for p in (_output_problem(opts.summary_json, "--summary-json"), _output_problem(opts.profile, "--profile"))
        if p
    ]
    if problems:
        raise DiagnosticError(problems)


def _output_problem(path: Path | None, flag: str) -> Diagnostic | None:
    """Why `path` could not be written at the end of the run, found before training: it is a directory, or its
    directory is missing or not writable (tried by creating and removing a temporary file there)."""
    if path is None or (os.path.lexists(path) and not os.path.isfile(path) and not os.path.isdir(path)):
        return None  # a device or FIFO is written through, not replaced (ppdsl.common.files)
    if os.path.isdir(path):
        return Diagnostic("E000", f"{flag} `{path}` is a directory", help="name a file")
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        return Diagnostic("E000", f"cannot write {flag} `{path}`: `{parent}` {what}")
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        return Diagnostic(
            "E000", f"cannot write {flag} `{path}`: {e.strerror or e}", help="choose a writable directory"
        )
    os.close(fd)
    os.unlink(probe)
    return None


def _resume_point(opts: RunOptions, exp, model_name: str, ranks=None) -> dict:
    """The checked checkpoint of each rank to resume (none without --resume), before paddle loads: whole, finite,
    of this run (schedule text, sizes, model, batch, --lr, --optimizer, --seed), every rank at one step, and not
    past --steps."""
    if opts.resume is None:
        return {}
    from ppdsl.runtime.checkpoint import read_resume, run_identity

    identity = run_identity(
        exp, model_name, batch_size=opts.batch_size, lr=opts.lr, optimizer=opts.optimizer, seed=opts.seed
    )
    return read_resume(opts.resume, identity, ranks, steps=opts.steps)


def _save_dir_lock(opts: RunOptions) -> contextlib.AbstractContextManager:
    """The save directory, created, proven writable and locked for this run (E000, E063), or nothing to hold."""
    if opts.save_dir is None:
        return contextlib.nullcontext()
    from ppdsl.runtime.checkpoint import lock_save_dir

    return lock_save_dir(opts.save_dir)


def run_training(opts: RunOptions, out: Console, err: Console) -> int:
    _validate(opts)
    params = parse_params(opts.params)
    result = check(Scenario(opts.schedule, opts.pp, opts.microbatches, opts.vpp, params))
    if result.diagnostics:
        err.print(render_all(result.diagnostics, SourceCache(), color=err.is_terminal), markup=False)
    if not result.valid:
        return result.exit_code
    for output in (opts.summary_json, opts.profile):  # refused now, not after the training it would record
        if output is not None:
            check_output(output)
    exp, sim = result.expansion, result.execution
    if opts.launch is not None:
        return _run_cluster(opts, exp, sim, out)

    from ppdsl.runtime.builtin_models import load_model  # no paddle yet: a bad model path fails fast

    model = load_model(opts.model)
    resume = _resume_point(opts, exp, model.name)  # and so does a checkpoint that cannot continue this run
    with _save_dir_lock(opts):
        return _train_one_process(opts, exp, sim, model, resume.get(0), out)


def _train_one_process(opts: RunOptions, exp, sim, model, resume, out: Console) -> int:
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, checksum, train

    t0 = time.perf_counter()
    trainer = PipelineTrainer(
        exp, model, TrainConfig(batch_size=opts.batch_size, lr=opts.lr, optimizer=opts.optimizer, seed=opts.seed)
    )
    build_seconds = time.perf_counter() - t0
    if resume is not None:
        start = trainer.restore(resume)
        out.print(f"resumed from `{opts.resume}` at step {start} of {opts.steps}: {opts.steps - start} to go")

    out.print(
        styled(
            (escaped(exp.defn.name), "bold"),
            f": pp={exp.pp} vpp={exp.vpp} microbatches={exp.microbatches}, "
            f"model {model.name}, batch {opts.batch_size}, {len(trainer.built.job_names)} jobs per step "
            f"(plan built in {trainer.built.seconds['total'] * 1e3:.0f} ms)",
        )
    )
    progress = Progress(
        TextColumn("[bold]training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TimeElapsedColumn(),
        console=out,
        transient=not out.is_terminal,
    )
    losses_seen: list[float] = []
    with progress:
        task = progress.add_task("train", total=opts.steps, completed=trainer.step_index, loss="-")

        def on_step(step: int, loss) -> None:
            mean = float(loss.mean())
            losses_seen.append(mean)
            progress.update(task, advance=1, loss=f"{mean:.4f}")
            if not out.is_terminal:
                out.print(f"step {step:4d}  loss {mean:.4f}")

        run = train(
            trainer,
            opts.steps,
            on_step=on_step,
            save_dir=opts.save_dir,
            save_every=opts.save_every,
            profile_steps=opts.profile_steps if opts.profile else 0,
            memory=opts.summary_json is not None or opts.profile is not None,
        )

    _print_summary(out, exp, sim, run, build_seconds)
    if opts.summary_json is not None:
        _write_summary(opts, exp, model.name, run, checksum(run.parameters))
    if opts.profile is not None:
        _write_profile(opts, exp, run)
        out.print(f"profile of the last {min(opts.profile_steps, opts.steps)} steps: `{opts.profile}`")
    return EXIT_VALID


def _write_profile(opts: RunOptions, exp, run) -> None:
    """The measured jobs as a Chrome trace (seconds), with what `ppdsl calibrate` needs to simulate the same."""
    from ppdsl.reports.trace import jobs_trace, trace_text

    meta = {
        "measured": True,
        "schedule_file": opts.schedule,
        "schedule": exp.defn.name,
        "pp": exp.pp,
        "vpp": exp.vpp,
        "microbatches": exp.microbatches,
        "params": exp.params,
        "steps": min(opts.profile_steps, opts.steps),
        "wall_seconds": run.profiled_seconds,
        "emulated_on_one_process": True,
    }
    trace = jobs_trace(run.profile or [], exp.pp, 1e6, meta, held_bytes=_held_track(run))
    emit(trace_text(trace), opts.profile)  # a write error is a clean E000 (ppdsl.cli.common.emit)


def _held_track(run) -> list[tuple[int, float, int]]:
    """(rank, seconds, bytes) at the end of every profiled job: the held bytes measured at the same job of the
    memory step (every step runs the plan's jobs in one order)."""
    if run.memory is None or not run.profile or not run.memory.samples:
        return []
    per_step = len(run.memory.samples)
    ends = sorted(job.end for job in run.profile)
    return [
        (rank, end, held[rank])
        for k, end in enumerate(ends)
        for held in [run.memory.samples[k % per_step][1]]
        for rank in range(len(held))
    ]


def _print_summary(out: Console, exp, sim, run, build_seconds: float) -> None:
    table = Table(title="summary", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    steady = run.step_seconds[1:] or run.step_seconds
    if run.losses:
        table.add_row("loss", f"{run.losses[0].mean():.4f} -> {run.losses[-1].mean():.4f}")
    if steady:
        per_step = statistics.median(steady)
        table.add_row(
            "time per step", f"{per_step * 1e3:.1f} ms (median; first step {run.step_seconds[0] * 1e3:.0f} ms)"
        )
        table.add_row("time per job", f"{per_step / max(run.jobs_per_step, 1) * 1e3:.3f} ms")
    table.add_row("jobs per step", str(run.jobs_per_step))
    table.add_row("plan build", f"{run.build_seconds * 1e3:.0f} ms (trainer ready in {build_seconds:.2f} s)")
    table.add_row("simulated bubble", f"{sim.bubble_ratio:.1%} (makespan {sim.makespan:g} in cost units)")
    peaks = ", ".join(f"{s.peak_activations:g}" for s in sim.ranks)
    table.add_row("peak activations", f"{peaks} (per rank, in micro-batch activations)")
    if run.memory is not None:
        held = ", ".join(format_bytes(b) for b in run.memory.peak)
        table.add_row("peak held", f"{held} (per rank, measured at job boundaries)")
    out.print(table)


def _write_summary(opts: RunOptions, exp, model_name: str, run, sums) -> None:

    data = {
        "schedule": exp.defn.name,
        "file": opts.schedule,
        "pp": exp.pp,
        "vpp": exp.vpp,
        "microbatches": exp.microbatches,
        "params": exp.params,
        "model": model_name,
        "batch_size": opts.batch_size,
        "lr": opts.lr,
        "optimizer": opts.optimizer,
        "seed": opts.seed,
        "first_step": run.started_at_step,
        "losses": [[float(x) for x in step] for step in run.losses],
        "step_seconds": run.step_seconds,
        "plan_build_seconds": run.build_seconds,
        "jobs_per_step": run.jobs_per_step,
        "parameters": sums,
        # activation bytes each rank holds at its fullest, measured at job boundaries (see ppdsl/runtime/profile.py)
        "peak_bytes": run.memory.peak if run.memory is not None else None,
    }
    emit(json.dumps(data, indent=1) + "\n", opts.summary_json)


def _run_cluster(opts: RunOptions, exp, sim, out: Console) -> int:
    """One process per rank through paddle.distributed.launch (or, with --dry-run, what would run)."""
    from ppdsl.cli.launch import dry_run_text, launch_command, next_launch_directory, validate

    launch = opts.launch
    validate(exp, launch)
    if launch.dry_run:
        command = launch_command(launch, next_launch_directory(launch.run_dir) / "spec.json")
        out.print(dry_run_text(exp, launch, command), markup=False, end="")
        return EXIT_VALID
    from ppdsl.runtime.builtin_models import load_model

    model = load_model(opts.model)  # a bad model path fails here, before any process starts
    local = range(launch.node_rank * launch.nproc_per_node, (launch.node_rank + 1) * launch.nproc_per_node)
    # and so does a checkpoint that cannot continue this run; the ranks read it again, the arrays are not kept here
    resume = {r: (c.path, c.step) for r, c in _resume_point(opts, exp, model.name, local).items()}
    with _save_dir_lock(opts):
        return _train_cluster(opts, exp, sim, resume, out)


def _train_cluster(opts: RunOptions, exp, sim, resume: dict[int, tuple[Path, int]], out: Console) -> int:
    from ppdsl.cli.launch import check_master_port, new_launch_directory, run_cluster

    launch = opts.launch
    spec = {
        "schedule": str(Path(opts.schedule).resolve()),
        "pp": exp.pp,
        "vpp": exp.vpp,
        "microbatches": exp.microbatches,
        "params": opts.params or [],
        "model": opts.model,
        # where the command was typed: each rank finds a `--model` module there (runtime/model.py: load_model)
        "model_dir": os.getcwd(),
        "batch_size": opts.batch_size,
        "lr": opts.lr,
        "optimizer": opts.optimizer,
        "seed": opts.seed,
        "steps": opts.steps,
        "comm_timeout": launch.comm_timeout,
        # each rank resumes from the file checked above: its own of the newest step all saved, or a checkpoint.npz
        "resume_files": {str(r): str(path.resolve()) for r, (path, _) in resume.items()},
        "resume_step": next(iter(resume.values()))[1] if resume else 0,
        "save_dir": str(opts.save_dir.resolve()) if opts.save_dir else None,
        "save_every": opts.save_every,
        # a testing hook: `rank=1,job=3[,step=0][,mode=hang]` makes that rank fail (or hang) before that job
        "fail": _parse_failure(os.environ.get(FAILURE_VARIABLE), exp.pp),
    }
    if resume:
        start = spec["resume_step"]
        out.print(f"resumed from `{opts.resume}` at step {start} of {opts.steps}: {opts.steps - start} to go")
    check_master_port(launch)  # before the launch's directory is made
    run_dir = new_launch_directory(launch.run_dir)
    out.print(
        styled(
            (escaped(exp.defn.name), "bold"),
            f": pp={exp.pp} vpp={exp.vpp} microbatches={exp.microbatches}, "
            f"{launch.nnodes} node(s) x {launch.nproc_per_node} processes, run directory `{run_dir}`",
        )
    )
    with out.status("training across processes") as status:

        def on_step(step: int) -> None:  # every rank of this node has started `step` (0-based)
            status.update(f"training across processes: step {step + 1} of {opts.steps} (the slowest rank's)")
            if not out.is_terminal:
                out.print(f"step {step:4d}  started by every rank")

        result = run_cluster(spec, exp, launch, run_dir, on_step=on_step)
    import numpy as np  # here, not at the top: every command imports this module, and numpy costs `check` 0.1 s

    table = Table(title="summary", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    if result.losses:
        table.add_row("loss", f"{np.mean(result.losses[0]):.4f} -> {np.mean(result.losses[-1]):.4f}")
    if result.step_seconds:
        steady = result.step_seconds[1:] or result.step_seconds
        table.add_row("time per step", f"{statistics.median(steady) * 1e3:.1f} ms (slowest rank, median)")
    comm = ", ".join(f"{s * 1e3:.0f}" for _, s in sorted(result.comm_seconds.items()))
    table.add_row("sending", f"{comm} ms per rank over the run")
    table.add_row("simulated bubble", f"{sim.bubble_ratio:.1%}")
    out.print(table)
    if opts.summary_json is not None:
        from ppdsl.runtime.train import checksum

        data = {
            "schedule": exp.defn.name,
            "file": opts.schedule,
            "pp": exp.pp,
            "vpp": exp.vpp,
            "microbatches": exp.microbatches,
            "processes": launch.nproc_per_node * launch.nnodes,
            "losses": result.losses,
            "step_seconds": result.step_seconds,
            "comm_seconds": {str(k): v for k, v in result.comm_seconds.items()},
            "parameters": checksum(result.parameters),
            # not measured here: a rank process moves values through its own buffers, not the plan's skip-GC
            "peak_bytes": None,
        }
        emit(json.dumps(data, indent=1) + "\n", opts.summary_json)
    return EXIT_VALID


FAILURE_VARIABLE = "PPDSL_INJECT_FAILURE"
FAILURE_MODES = ("raise", "hang", "exit", "kill")


def _parse_failure(text: str | None, pp: int) -> dict | None:
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
    numbers_ok = all(fields.get(k, "0").isdecimal() for k in ("rank", "job", "step"))
    if (
        not {"rank", "job"} <= fields.keys()
        or not numbers_ok
        or fields.get("mode", "raise") not in FAILURE_MODES
        or int(fields["rank"]) >= pp
    ):
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"{FAILURE_VARIABLE}={text!r} is not `rank=R,job=J[,step=S][,mode=M]` with R < {pp}",
                    help=f"modes: {', '.join(FAILURE_MODES)}; unset the variable to run without a failure",
                )
            ]
        )
    return {
        "rank": int(fields["rank"]),
        "job": int(fields["job"]),
        "step": int(fields.get("step", "0")),
        "mode": fields.get("mode", "raise"),
    }


# flags of a launch (parameter name for click): given without --nproc-per-node, one process would ignore them
LAUNCH_ONLY = (
    ("--nnodes", "nnodes"),
    ("--master", "master"),
    ("--node-rank", "node_rank"),
    ("--run-dir", "run_dir"),
    ("--comm-timeout", "comm_timeout"),
    ("--rendezvous-timeout", "rendezvous_timeout"),
    ("--dry-run", "dry_run"),
)


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether the flag was on the command line (or in the environment), not left at its default."""
    source = ctx.get_parameter_source(name)
    # by name: typer carries its own copy of click, whose ParameterSource is not click's
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


@app.command("run")
def run_cmd(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="A .sched file or shipped schedule name.")] = "1f1b",
    pp: Annotated[int, typer.Option("--pp", help="Pipeline degree (stages emulated on this machine).")] = 4,
    microbatches: Annotated[int, typer.Option("--microbatches", "-m", help="Micro-batches per step.")] = 8,
    vpp: VPP = 1,
    param: Params = None,
    steps: Annotated[
        int, typer.Option("--steps", help="Training steps in all (a resumed run ends at the same step).")
    ] = 30,
    model: Annotated[
        str | None, typer.Option("--model", help="`module:function` building the forward pass (see README).")
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Samples per step (all micro-batches).")] = 32,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 0.01,
    optimizer: Annotated[str, typer.Option("--optimizer", help="adam or sgd.")] = "adam",
    seed: Annotated[int, typer.Option("--seed", help="Seed of parameters and synthetic data.")] = 0,
    summary_json: Annotated[
        Path | None, typer.Option("--summary-json", help="Write losses, checksums and times here.")
    ] = None,
    save_dir: Annotated[Path | None, typer.Option("--save-dir", help="Write checkpoints here.")] = None,
    save_every: Annotated[int, typer.Option("--save-every", help="Checkpoint every N steps (0: at the end).")] = 0,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue from this --save-dir.")] = None,
    profile: Annotated[
        Path | None, typer.Option("--profile", help="Write the last steps' measured job timings (Chrome trace).")
    ] = None,
    profile_steps: Annotated[int, typer.Option("--profile-steps", help="How many final steps to profile.")] = 3,
    nproc_per_node: Annotated[
        int | None,
        typer.Option("--nproc-per-node", help="One process per rank via paddle.distributed.launch (K per node)."),
    ] = None,
    nnodes: Annotated[int, typer.Option("--nnodes", help="Nodes, with --nproc-per-node.")] = 1,
    master: Annotated[str | None, typer.Option("--master", help="HOST:PORT of the rendezvous, several nodes.")] = None,
    node_rank: Annotated[int, typer.Option("--node-rank", help="This node's index, several nodes.")] = 0,
    run_dir: Annotated[Path, typer.Option("--run-dir", help="Spec, logs and results of a launch.")] = Path("ppdsl-run"),
    comm_timeout: Annotated[
        float, typer.Option("--comm-timeout", help="Seconds a receive may wait before the run stops.")
    ] = 20.0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --nproc-per-node: print the command and every rank's jobs.")
    ] = False,
    rendezvous_timeout: Annotated[
        float,
        typer.Option("--rendezvous-timeout", help="Seconds for every rank of this node to meet its peers."),
    ] = 60.0,
) -> None:
    """Train with the schedule's plan: every stage emulated on this machine, Paddle's standalone executor."""
    options = RunOptions(
        schedule=str(find_schedule(file)),
        pp=pp,
        microbatches=microbatches,
        vpp=vpp,
        params=param,
        steps=steps,
        model=model,
        batch_size=batch_size,
        lr=lr,
        optimizer=optimizer,
        seed=seed,
        summary_json=summary_json,
        save_dir=save_dir,
        save_every=save_every,
        resume=resume,
        profile=profile,
        profile_steps=profile_steps,
    )
    if nproc_per_node is not None:
        from ppdsl.cli.launch import LaunchOptions

        options.launch = LaunchOptions(
            nproc_per_node,
            nnodes,
            master,
            node_rank,
            run_dir,
            comm_timeout=comm_timeout,
            dry_run=dry_run,
            rendezvous_timeout=rendezvous_timeout,
        )
        if profile is not None:
            usage_error(
                "--profile records the jobs of one process, and with --nproc-per-node each rank is a process of its "
                "own: no trace would be written",
                help="profile the same schedule and sizes without --nproc-per-node (every rank emulated in this "
                "process, one trace of all ranks); `ppdsl plot --measured` draws it",
            )
    else:
        given = [flag for flag, name in LAUNCH_ONLY if _given(ctx, name)]
        if given:
            verb, them = ("goes", "it") if len(given) == 1 else ("go", "them")
            usage_error(
                f"{', '.join(given)} {verb} with --nproc-per-node: without it the run is one process and would "
                f"ignore {them}",
                help="add --nproc-per-node K (one process per rank: K x --nnodes = --pp), or drop the flag",
            )
    raise typer.Exit(diagnosed(run_training, options, out, err))
