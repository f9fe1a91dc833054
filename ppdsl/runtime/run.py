"""A training run as one call: `run(RunRequest) -> RunReport`, what `ppdsl run` and `ppdsl.run(...)` both are.

Everything that can be wrong with the input is found before training starts: the request's values (`RunRequest`),
the checker's diagnostics, an output that could not be written, a model path that does not import, a missing
paddle, a checkpoint that cannot continue this run, a schedule that needs a split backward on a model that has
none (found while the plan is built). Then it trains on one process (every stage emulated) or one process per
rank (ppdsl.runtime.launch), and returns one `RunReport` whichever it was: the same fields, a figure one mode does
not measure None. What it shows while it runs goes to a `RunObserver` (the command line's draws a progress bar);
nothing here prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ppdsl.analysis.check import check
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import check_output, trusted_directory, write_output
from ppdsl.language.library import find_schedule
from ppdsl.runtime.request import RunRequest, TrainConfig, flag

if TYPE_CHECKING:  # imported when a run builds one: `check` alone never needs it
    from ppdsl.plan.spec import PlanSpec


@dataclass(frozen=True)
class RunStart:
    """What is about to train, as training starts (after any resume)."""

    schedule: str  # the schedule's name
    pp: int
    vpp: int
    microbatches: int
    steps: int
    first_step: int  # a resumed run starts past 0
    model: str
    batch_size: int
    jobs_per_step: int
    plan_build_seconds: float | None  # one process: the plan was built here
    nnodes: int = 1
    nproc_per_node: int | None = None  # one process per rank
    launch_dir: Path | None = None


class RunObserver(Protocol):
    """Told what happens during a run, in this order: warnings of the check, a resume, then either the dry run's
    text or `training(start)` around the steps, `step` after each, and `finished` before the outputs are written."""

    def warnings(self, diagnostics: list[Diagnostic]) -> None: ...
    def resumed(self, checkpoint: Path, step: int, steps: int) -> None: ...
    def dry_run(self, text: str) -> None: ...
    def training(self, start: RunStart) -> contextlib.AbstractContextManager[Any]: ...
    def step(self, step: int, loss: float) -> None: ...
    # one process per rank: every rank here began `step` (counted from 1, as `step(step, loss)` counts the steps done)
    def started_everywhere(self, step: int) -> None: ...
    def finished(self, report: RunReport) -> None: ...


def _counted_from_one(observer: RunObserver) -> Callable[[int], None]:
    """The cluster's `on_step`, which counts the steps it starts from 0, for an observer that counts from 1 (as one
    process's `step` does: `step 1` is the first in every mode)."""

    def started(index: int) -> None:
        observer.started_everywhere(index + 1)

    return started


class SilentObserver:
    """Shows nothing (a run from Python without an observer)."""

    def warnings(self, diagnostics: list[Diagnostic]) -> None:
        pass

    def resumed(self, checkpoint: Path, step: int, steps: int) -> None:
        pass

    def dry_run(self, text: str) -> None:
        pass

    def training(self, start: RunStart) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def step(self, step: int, loss: float) -> None:
        pass

    def started_everywhere(self, step: int) -> None:
        pass

    def finished(self, report: RunReport) -> None:
        pass


@dataclass(frozen=True)
class RunReport:
    """What a run did, the same for one process and one per rank (`--summary-json` is `to_json()`): a figure the
    mode does not measure is None."""

    schedule: str  # the schedule's name
    file: str  # the .sched file trained
    pp: int
    vpp: int
    microbatches: int
    params: dict[str, Any]
    model: str | None  # the model's name (None: a dry run, which loads none)
    config: TrainConfig  # batch size, learning rate, optimizer, seed (flat in the JSON, as the options are)
    processes: int  # 1, or one per rank of every node
    first_step: int  # the step the run started at (past 0 when resumed)
    losses: list[list[float]]  # per step run, the loss of each micro-batch (empty on a node without the last stage)
    step_seconds: list[float]  # per step run (one per rank: the slowest rank's)
    plan_build_seconds: float | None  # one process: building the plan; ranks build their own, not reported
    trainer_seconds: float | None  # one process: program, plan and startup until the first step could run
    jobs_per_step: int
    parameters: dict[str, dict[str, float]]  # per parameter its sum and sum of squares (this node's, per rank)
    # activation bytes each rank holds at its fullest job boundary: the named variables the plan keeps alive
    # between jobs, each at numel x itemsize (ppdsl/runtime/held.py: an account of the plan the steps ran, the same
    # every run, not the allocator's figures), with a summary or profile asked for; not per rank process: a rank
    # process moves values through its own buffers, not the plan's skip-GC
    peak_bytes: list[int] | None
    # what offload jobs copied out, apart from peak_bytes (None: nothing offloaded, or not measured); on CPU one
    # allocator holds both, so the device / host split is counted, not real (docs/runtime.md)
    host_peak_bytes: list[int] | None
    host_store: str | None  # with host_peak_bytes: what the split means on this machine
    comm_seconds: dict[str, float] | None  # per rank: seconds sending over the run (one process sends nothing)
    simulated_bubble: float  # what the checker's execution model predicts, in cost units
    simulated_makespan: float
    peak_activations: list[float]  # per rank, in micro-batch activations (the checker's count)
    launch_dir: str | None  # one process per rank: the launch's own directory (spec, logs, rank files)

    @property
    def final_loss(self) -> float | None:
        """The mean loss over the micro-batches of the last step run (None if this node saw no loss)."""
        return sum(self.losses[-1]) / len(self.losses[-1]) if self.losses and self.losses[-1] else None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "config"}
        options = dataclasses.asdict(self.config)
        at = list(data).index("model") + 1  # the options where the summary always had them, after the model
        items = list(data.items())
        return dict(items[:at] + list(options.items()) + items[at:])

    def to_json(self) -> str:
        """The `--summary-json` file's text."""
        return json.dumps(self.to_dict(), indent=1) + "\n"


def run(request: RunRequest, observer: RunObserver | None = None) -> RunReport:
    """Check the schedule, then train with it as `request` says; raises DiagnosticError for anything wrong with the
    input (before training) or the run (a rank that failed, a diverged loss), with nothing half-written."""
    observer = observer if observer is not None else SilentObserver()
    if not request.clustered and request.one_process_problems():
        raise DiagnosticError(request.one_process_problems())
    path = find_schedule(str(request.schedule))
    scenario = Scenario(
        str(path),
        request.pp,
        request.microbatches,
        request.vpp,
        request.params,
        dp=request.dp,
        layers=request.layers,
        partition=request.partition,  # else the file's: the plan carries the one in force to every rank
    )
    result = check(scenario, record_visits=True)  # the merged order goes into the plan specification
    if not result.valid:
        raise DiagnosticError(result.diagnostics)
    if result.diagnostics:
        observer.warnings(result.diagnostics)
    _check_outputs(request)  # after the check, which records the inputs an output must not overwrite
    from ppdsl.analysis.plan_spec import plan_spec  # here: `check` alone never needs it

    exp = result.expansion
    plan = plan_spec(result)  # what every process that trains builds its plan from
    context = _Context(request, str(path), exp, plan, result.execution, observer)
    if request.clustered:
        return _run_cluster(context)
    from ppdsl.runtime.builtin_models import load_model  # no paddle yet: a bad model path fails fast

    model = load_model(request.model)
    resume = _resume_point(request, plan, model.name)  # and so does a checkpoint that cannot continue this run
    with _save_dir_lock(request):
        return _train_one_process(context, model, resume.get(0))


@dataclass(frozen=True)
class _Context:
    request: RunRequest
    file: str
    exp: Expansion
    plan: PlanSpec
    sim: Any  # the checker's Execution
    observer: RunObserver

    def report(self, model: str | None, lr: float | None = None, **measured: Any) -> RunReport:
        """`lr`: the learning rate the run trained with, as its scope held it (None: the flag's, unread)."""
        exp, sim, request = self.exp, self.sim, self.request
        config = request.train_config if lr is None else dataclasses.replace(request.train_config, lr=lr)
        return RunReport(
            schedule=exp.defn.name,
            file=self.file,
            pp=exp.pp,
            vpp=exp.vpp,
            microbatches=exp.microbatches,
            params=dict(exp.params),
            model=model,
            config=config,
            simulated_bubble=sim.bubble_ratio,
            simulated_makespan=sim.makespan,
            peak_activations=[s.peak_activations for s in sim.ranks],
            **measured,
        )


def _check_outputs(request: RunRequest) -> None:
    """The summary and the profile, the run and save directories, refused now rather than after the training they
    would record."""
    problems = []
    for name in ("summary_json", "profile"):
        path = getattr(request, name)
        if path is not None:
            try:
                check_output(path, flag(name))
            except DiagnosticError as e:
                problems += e.diagnostics
    for name, what in (("run_dir", "--run-dir"), ("save_dir", "--save-dir")):
        path = getattr(request, name)
        if path is None or request.dry_run or (name == "run_dir" and not request.clustered):
            continue
        if not os.path.lexists(path):  # made later (with the same check), once the port and the rest are known good
            continue
        try:  # refused now if another user can change it or a directory above it (E054)
            trusted_directory(path, what, create=False).close()
        except DiagnosticError as e:
            problems += e.diagnostics
    if problems:
        raise DiagnosticError(problems)


def _write(text: str, output: Path) -> None:
    """An output of the run: `-` is stdout, anything else written atomically (ppdsl.common.files)."""
    if str(output) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_output(output, text)


def _resume_point(request: RunRequest, plan: PlanSpec, model_name: str, ranks=None) -> dict:
    """The checked checkpoint of each rank to resume (none without `resume`), before paddle loads: whole, finite,
    of this run (`run_identity`), every rank at one step, and not past `steps`."""
    if request.resume is None:
        return {}
    from ppdsl.runtime.checkpoint import read_resume, run_identity

    identity = run_identity(plan, model_name, request.train_config, request.dp)
    return read_resume(request.resume, identity, ranks, steps=request.steps)


def _save_dir_lock(request: RunRequest) -> contextlib.AbstractContextManager:
    """The save directory, created, proven writable and locked for this run (E000, E063), or nothing to hold."""
    if request.save_dir is None:
        return contextlib.nullcontext()
    from ppdsl.runtime.checkpoint import lock_save_dir

    return lock_save_dir(request.save_dir)


# ---------------------------------------------------------------- one process


def _train_one_process(context: _Context, model, resume) -> RunReport:
    from ppdsl.runtime.train import PipelineTrainer, checksum, train

    request, exp, observer = context.request, context.exp, context.observer
    t0 = time.perf_counter()
    trainer = PipelineTrainer(context.plan, model, request.train_config)
    trainer_seconds = time.perf_counter() - t0
    if resume is not None:
        start = trainer.restore(resume)
        observer.resumed(request.resume, start, request.steps)
    start = RunStart(
        schedule=exp.defn.name,
        pp=exp.pp,
        vpp=exp.vpp,
        microbatches=exp.microbatches,
        steps=request.steps,
        first_step=trainer.step_index,
        model=model.name,
        batch_size=request.batch_size,
        jobs_per_step=len(trainer.built.job_names),
        plan_build_seconds=trainer.built.seconds["total"],
    )
    with observer.training(start):
        run = train(
            trainer,
            request.steps,
            on_step=lambda step, loss: observer.step(step, float(loss.mean())),
            save_dir=request.save_dir,
            save_every=request.save_every,
            profile_steps=request.profile_steps if request.profile else 0,
            memory=request.summary_json is not None or request.profile is not None,
        )
    report = context.report(
        model.name,
        lr=trainer.learning_rate(),  # what it trained with, not what the flag asked for
        processes=1,
        first_step=run.started_at_step,
        losses=[[float(x) for x in step] for step in run.losses],
        step_seconds=run.step_seconds,
        plan_build_seconds=run.build_seconds,
        trainer_seconds=trainer_seconds,
        jobs_per_step=run.jobs_per_step,
        parameters=checksum(run.parameters),
        **held_figures(run.memory),
        comm_seconds=None,
        launch_dir=None,
    )
    observer.finished(report)
    if request.summary_json is not None:
        _write(report.to_json(), request.summary_json)
    if request.profile is not None:
        _write_profile(context, run, trainer)
    return report


def _write_profile(context: _Context, run, trainer) -> None:
    """The measured jobs as a Chrome trace (seconds), with what `ppdsl calibrate` needs to simulate the same, and
    (an `nn.Layer` model placed by `ctx.pipeline`) its layers per stage and each stage's activation bytes per
    micro-batch, from which `ppdsl calibrate --layers` writes a layer profile."""
    from ppdsl.reports.trace import jobs_trace, trace_text

    request, exp = context.request, context.exp
    meta = {
        "measured": True,
        "schedule_file": context.file,
        "schedule": exp.defn.name,
        "pp": exp.pp,
        "vpp": exp.vpp,
        "microbatches": exp.microbatches,
        "params": exp.params,
        "steps": min(request.profile_steps, request.steps),
        "wall_seconds": run.profiled_seconds,
        "emulated_on_one_process": True,
        **_layer_figures(trainer),
    }
    trace = jobs_trace(run.profile or [], exp.pp, 1e6, meta, held_bytes=_held_track(run))
    _write(trace_text(trace), request.profile)


def _layer_figures(trainer) -> dict[str, Any]:
    """`layers_per_stage` (the model's placement, embedding and head counted) and `activation_bytes_per_stage`
    (what one micro-batch's forward keeps for its backward on each stage: `memory.stage_memory` of the plan's job
    programs), or nothing for a model placed by hand."""
    from ppdsl.plan.jobs import program_name
    from ppdsl.runtime.memory import stage_memory

    placed = trainer.program.layer_stages
    if placed is None:
        return {}
    stages = trainer.program.num_stages
    built = trainer.built
    measured = stage_memory({program_name(built.keys[n]): p for n, p in built.programs.items() if n in built.keys})
    return {
        "layers_per_stage": [placed.count(s) for s in range(stages)],
        "activation_bytes_per_stage": [measured[s].saved_for_backward if s in measured else 0 for s in range(stages)],
    }


def _held_track(run) -> list[tuple[int, float, int]]:
    """(rank, seconds, bytes) at the end of every profiled job: the held bytes at the same job of the plan's step
    (`held.plan_held_bytes`; every step runs the plan's jobs in one order)."""
    if run.memory is None or not run.profile or not run.memory.samples:
        return []
    per_step = len(run.memory.samples)
    ends = sorted(job.end for job in run.profile)
    return [
        (rank, end, held[rank])
        for k, end in enumerate(ends)
        for held in [run.memory.samples[k % per_step]]
        for rank in range(len(held))
    ]


# ---------------------------------------------------------------- one process per rank


def _run_cluster(context: _Context) -> RunReport:
    """One process per rank through paddle.distributed.launch (or, with `dry_run`, what would run)."""
    from ppdsl.runtime.launch import dry_run_text, launch_command, next_launch_directory

    request, exp = context.request, context.exp
    if request.dry_run:
        command = launch_command(request, next_launch_directory(request.run_dir) / "spec.json")
        context.observer.dry_run(dry_run_text(context.plan, request, command))
        return context.report(
            None,
            **_nothing_measured(request),
            jobs_per_step=sum(map(len, exp.jobs)),
            launch_dir=None,
        )
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.launch_spec import model_sources

    model = load_model(request.model)  # a bad model path fails here, before any process starts
    sources = model_sources(request.model)  # what the ranks run of it: these bytes, checked (launch_spec.py)
    # and so does a checkpoint that cannot continue this run; the ranks read it again, the arrays are not kept here
    points = _resume_point(request, context.plan, model.name, request.local_ranks)
    resume = {r: (c.path, c.step) for r, c in points.items()}
    with _save_dir_lock(request):
        return _train_cluster(context, model.name, sources, resume)


def _located(diagnostic: Diagnostic, exp: Expansion) -> Diagnostic:
    """A rank's E095 (a shared parameter with no `sync_shared` on a rank holding it; the ranks see the plan, not
    the file) at the `optimizer` of the first rank whose order has no `sync_shared`: the line to add it before."""
    if diagnostic.code != "E095" or diagnostic.span is not None:
        return diagnostic
    names = exp.type_names
    for r, codes in enumerate(exp.jobs):
        kinds = [names[exp.decode(c)[0]] for c in codes]
        if "sync_shared" not in kinds and "optimizer" in kinds:
            site = exp.defn.sites[exp.sites[r][kinds.index("optimizer")]]
            label = f"rank {r}'s optimizer: `sync_shared` goes before it"
            return dataclasses.replace(diagnostic, span=site.span, label=label)
    return diagnostic


HOST_STORE_ON_CPU = "emulated on CPU: the copies are real, the device / host split is counted (one memory)"


def held_figures(memory) -> dict[str, Any]:
    """A run's held memory (`held.HeldMemory`, or None when not asked for) as the report's figures: the
    device-resident peak per rank, and what offloads held in the host store, apart (None when nothing was)."""
    if memory is None:
        return {"peak_bytes": None, "host_peak_bytes": None, "host_store": None}
    offloaded = any(memory.host_peak)
    return {
        "peak_bytes": memory.peak,
        "host_peak_bytes": memory.host_peak if offloaded else None,
        "host_store": HOST_STORE_ON_CPU if offloaded else None,
    }


def _nothing_measured(request: RunRequest) -> dict[str, Any]:
    return {
        "processes": request.nproc_per_node * request.nnodes,
        "first_step": 0,
        "losses": [],
        "step_seconds": [],
        "plan_build_seconds": None,
        "trainer_seconds": None,
        "parameters": {},
        "peak_bytes": None,
        "host_peak_bytes": None,
        "host_store": None,
        "comm_seconds": None,
    }


def _train_cluster(
    context: _Context, model_name: str, sources: tuple, resume: dict[int, tuple[Path, int]]
) -> RunReport:
    from ppdsl.runtime.launch import (
        FAILURE_VARIABLE,
        check_master_port,
        new_launch_directory,
        parse_failure,
        run_cluster,
    )
    from ppdsl.runtime.launch_spec import LaunchSpec
    from ppdsl.runtime.train import checksum

    request, exp, observer = context.request, context.exp, context.observer
    spec = LaunchSpec(
        request=request,  # every option, as each rank rebuilds the request (RunRequest.from_spec)
        # where the command was typed: what the `--model` module's own imports find there (builtin_models.py)
        model_dir=os.getcwd(),
        model_sources=sources,
        # each rank resumes from the file checked above: its own of the newest step all saved, or a checkpoint.npz
        resume_files={r: str(path.resolve()) for r, (path, _) in resume.items()},
        resume_step=next(iter(resume.values()))[1] if resume else 0,
        # a testing hook: `rank=1,job=3[,step=0][,mode=hang]` makes that rank fail (or hang) before that job
        fail=parse_failure(os.environ.get(FAILURE_VARIABLE), request.world_size),
    )
    if resume:
        observer.resumed(request.resume, spec.resume_step, request.steps)
    check_master_port(request)  # before the launch's directory is made
    launch_dir = new_launch_directory(request.run_dir)
    start = RunStart(
        schedule=exp.defn.name,
        pp=exp.pp,
        vpp=exp.vpp,
        microbatches=exp.microbatches,
        steps=request.steps,
        first_step=spec.resume_step,
        model=model_name,
        batch_size=request.batch_size,
        jobs_per_step=sum(map(len, exp.jobs)),
        plan_build_seconds=None,
        nnodes=request.nnodes,
        nproc_per_node=request.nproc_per_node,
        launch_dir=launch_dir,
    )
    with observer.training(start):
        try:
            result = run_cluster(spec, launch_dir, context.plan, on_step=_counted_from_one(observer))
        except DiagnosticError as err:  # a rank's own diagnostic, placed in the schedule where the fix goes
            raise DiagnosticError([_located(d, exp) for d in err.diagnostics]) from None
    report = context.report(
        model_name,
        lr=result.learning_rate,  # what the ranks trained with, not what the flag asked for
        **{
            **_nothing_measured(request),
            "first_step": spec.resume_step,
            "losses": result.losses,
            "step_seconds": result.step_seconds,
            "parameters": checksum(result.parameters),
            "comm_seconds": {str(k): v for k, v in sorted(result.comm_seconds.items())},
        },
        jobs_per_step=start.jobs_per_step,
        launch_dir=str(launch_dir),
    )
    observer.finished(report)
    if request.summary_json is not None:
        _write(report.to_json(), request.summary_json)
    return report
