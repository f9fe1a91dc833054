"""Training with a schedule's plan on one machine, and the plain full-batch reference it must equal.

A `PipelineTrainer` builds the training program at micro-batch size, the plan from the schedule's plan
specification (`PlanSpec`, the checked schedule as plain data: nothing of the language), and runs steps with
Paddle's standalone executor: the executor splits each fed array along dim 0 into one micro-batch per child scope.
Checkpoints (ppdsl.runtime.checkpoint) hold what the startup program initialises (parameters, gradient
accumulators, optimizer moments) but the learning rate, which is `--lr`'s; the next step and what run they belong
to. Every step's parameters are checked to be finite (`checkpoint.check_finite`): a diverged run stops, naming the
step, and saves nothing of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ppdsl.plan.spec import PlanSpec
from ppdsl.runtime.checkpoint import (
    CHECKPOINT,
    Checkpoint,
    check_finite,
    learning_rate_in,
    read_resume,
    restore_state,
    run_identity,
    startup_state_names,
    state_variables,
    write_checkpoint,
)
from ppdsl.runtime.env import import_paddle
from ppdsl.runtime.model import Model, synthetic_batch
from ppdsl.runtime.plan import BuiltPlan, build_plan
from ppdsl.runtime.program import TrainingProgram, build_training_program
from ppdsl.runtime.request import TrainConfig


@dataclass
class PipelineTrainer:
    """Training with the plan of `spec`, a checked schedule's plan specification (`ppdsl.analysis.plan_spec`:
    `plan_spec(result)` of a check, `checked_spec(exp)` of an expansion), on this one process."""

    spec: PlanSpec
    model: Model
    config: TrainConfig
    program: TrainingProgram = field(init=False)
    built: BuiltPlan = field(init=False)
    step_index: int = 0

    def __post_init__(self) -> None:
        from ppdsl.common.sizes import check_batch_size

        m = self.spec.microbatches
        check_batch_size(self.config.batch_size, m)
        paddle = self.paddle = import_paddle()
        self.program = build_training_program(
            paddle,
            self.model,
            micro_batch_size=self.config.batch_size // m,
            num_stages=self.spec.nstages,
            microbatches=m,
            lr=self.config.lr,
            optimizer=self.config.optimizer,
            seed=self.config.seed,
            partition=self.spec.partition,
        )
        refuse_shared_in_one_process(self.program)
        self.built = build_plan(self.program.main, self.program.startup, self.spec)
        self.scope = paddle.static.Scope()
        self.program.run_startup(paddle, self.scope)
        # one executor per scope: two executors on one scope can crash in FetchTensors
        self.executor = paddle.static.Executor(paddle.CPUPlace())
        self.executor._set_plan(self.built.plan)
        self.state_names = startup_state_names(self.program.startup)

    def batch(self, step: int) -> dict[str, np.ndarray]:
        if self.model.make_batch is not None:
            return self.model.make_batch(step, self.config.batch_size, self.config.seed)
        return synthetic_batch(self.program.inputs, self.config.batch_size, step, self.config.seed)

    def step(self) -> np.ndarray:
        """One training step; the loss of each micro-batch."""
        with self.paddle.static.scope_guard(self.scope):
            out = self.executor.run(
                self.program.main, feed=self.batch(self.step_index), fetch_list=[self.built.loss_value]
            )
        self.step_index += 1
        return np.asarray(out[0], dtype=np.float64).reshape(-1)

    # ------------------------------------------------------------ state

    def state(self) -> dict[str, np.ndarray]:
        """What a checkpoint holds (`state_variables`: all the startup program initialises but the learning rate),
        keyed by canonical name (see `canonical_name`)."""
        return {
            key: np.array(self.scope.find_var(n).get_tensor())
            for key, n in state_variables(self.program.startup, self.program.param_stage).items()
        }

    def parameters(self) -> dict[str, np.ndarray]:
        """The trainable parameters alone (a parameter's name is its canonical name): what each step checks."""
        return {
            n: np.array(self.scope.find_var(n).get_tensor()) for n in self.state_names if n in self.program.param_stage
        }

    def learning_rate(self) -> float:
        """The learning rate the optimizer runs with (`learning_rate_in`), not the flag."""
        return learning_rate_in(self.scope, self.state_names, self.program.param_stage, self.config.lr)

    def set_state(self, values: dict[str, np.ndarray], source: str = "the checkpoint") -> None:
        variables = state_variables(self.program.startup, self.program.param_stage)
        restore_state(self.scope, self.paddle.CPUPlace(), variables, values, source)

    @property
    def identity(self) -> dict:
        return run_identity(self.spec, self.model.name, self.config)

    def save(self, directory: str | Path) -> Path:
        """Write the whole state, the next step and the run's identity to DIR/checkpoint.npz, atomically (never a
        state with NaN or infinity in it: E060)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / CHECKPOINT
        write_checkpoint(target, self.step_index, self.identity, self.state())
        return target

    def restore(self, checkpoint: Checkpoint) -> int:
        """Continue from a checkpoint read by `read_resume` (so of this run); the step it is at."""
        self.set_state(checkpoint.arrays, str(checkpoint.path))
        self.step_index = checkpoint.step
        return checkpoint.step

    def resume(self, directory: str | Path) -> int:
        """Continue from DIR/checkpoint.npz (a whole, finite checkpoint of this run only); the step it is at."""
        return self.restore(read_resume(directory, self.identity)[0])


def refuse_shared_in_one_process(program: TrainingProgram) -> None:
    """E039 for a model sharing a parameter across stages: one process runs the whole plan inside Paddle's
    executor, where no `sync_shared` can sum the copies' gradients between jobs (ppdsl/runtime/shared.py)."""
    if not program.shared:
        return
    from ppdsl.common.diagnostics import Diagnostic, DiagnosticError

    name, copies = sorted(program.shared.items())[0]
    stages = ", ".join(str(program.param_stage[c]) for c in copies)
    raise DiagnosticError(
        [
            Diagnostic(
                "E039",
                f"parameter `{name}` is used on stages {stages}: one process trains a shared parameter on one "
                "stage only",
                help="train it with one process per rank (--nproc-per-node), where the schedule's `sync_shared` "
                "keeps the stages' copies in step, or with --pp 1",
            )
        ]
    )


def reference_run(
    model: Model,
    *,
    num_stages: int,
    microbatches: int,
    config: TrainConfig,
    steps: int,
    initial: dict[str, np.ndarray],
    batches,
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """The same model trained the plain way: one full-batch program, no plan. Also the loss of each
    micro-batch at the start of each step, from a forward-only program at micro-batch size."""
    paddle = import_paddle()
    full = build_training_program(
        paddle,
        model,
        micro_batch_size=config.batch_size,
        num_stages=num_stages,
        microbatches=1,
        lr=config.lr,
        optimizer=config.optimizer,
        seed=config.seed,
        accumulate=False,
    )
    mb_size = config.batch_size // microbatches
    probe = build_training_program(
        paddle,
        model,
        micro_batch_size=mb_size,
        num_stages=num_stages,
        microbatches=1,
        lr=config.lr,
        optimizer=config.optimizer,
        seed=config.seed,
        accumulate=False,
        train=False,
    )
    scope = paddle.static.Scope()
    exe = paddle.static.Executor(paddle.CPUPlace())
    losses = []
    full.run_startup(paddle, scope)
    with paddle.static.scope_guard(scope):
        for name, value in initial.items():
            var = scope.find_var(name)
            if var is not None:
                var.get_tensor().set(value, paddle.CPUPlace())
        for step in range(steps):
            batch = batches(step)
            per_mb = []
            for k in range(microbatches):
                part = {n: v[k * mb_size : (k + 1) * mb_size] for n, v in batch.items()}
                per_mb.append(float(np.asarray(exe.run(probe.main, feed=part, fetch_list=[probe.loss])[0])))
            losses.append(np.array(per_mb))
            exe.run(full.main, feed=batch, fetch_list=[full.loss])
        params = {n: np.array(scope.find_var(n).get_tensor()) for n in initial if n in full.param_stage}
    return params, losses


@dataclass
class RunResult:
    losses: list[np.ndarray]
    step_seconds: list[float]
    build_seconds: float
    jobs_per_step: int
    parameters: dict[str, np.ndarray]
    started_at_step: int = 0
    profile: list | None = None  # JobRecords of the profiled steps (seconds), with profile_steps
    profiled_seconds: float = 0.0  # wall time of the profiled steps
    memory: object | None = None  # ppdsl.runtime.held.HeldMemory of the plan's steps, with memory=True


def train(
    trainer: PipelineTrainer,
    steps: int,
    on_step=None,
    save_dir=None,
    save_every: int = 0,
    profile_steps: int = 0,
    memory: bool = False,
) -> RunResult:
    """Train until the trainer has done `steps` steps in all (a resumed trainer does the rest). The last
    `profile_steps` of them run under Paddle's host profiler (job timings). With `memory` (and a step to run), the
    bytes each rank holds at every job boundary of a step, accounted from the plan the steps ran
    (`held.plan_held_bytes`: the same for every step and every run of the plan, unlike the allocator's figures)."""
    from contextlib import ExitStack

    from ppdsl.runtime.held import plan_held_bytes
    from ppdsl.runtime.profile import host_profiler, job_records

    losses, times = [], []
    first = trainer.step_index
    todo = max(steps - first, 0)
    timed_from = steps - min(profile_steps, todo)  # steps from here on are timing-profiled
    events = None
    with ExitStack() as stack:
        while trainer.step_index < steps:
            index = trainer.step_index
            if profile_steps and events is None and index >= timed_from:
                events = stack.enter_context(host_profiler())
            t = time.perf_counter()
            loss = trainer.step()
            times.append(time.perf_counter() - t)
            check_finite(trainer.step_index, loss, trainer.parameters(), steps)
            losses.append(loss)
            if save_dir and save_every and trainer.step_index % save_every == 0:
                trainer.save(save_dir)
            if on_step:
                on_step(trainer.step_index, loss)
    if save_dir:
        trainer.save(save_dir)
    result = RunResult(
        losses, times, trainer.built.seconds["total"], len(trainer.built.job_names), trainer.parameters(), first
    )
    if events is not None:
        result.profile = job_records(trainer.spec, events)
        result.profiled_seconds = sum(times[-min(profile_steps, todo) :])
    if memory and todo:
        try:
            result.memory = plan_held_bytes(
                trainer.built, trainer.spec.stage_of, trainer.program.inputs, trainer.spec.microbatches
            )
        except ValueError:  # a variable held between jobs has a dynamic shape: the figures are null, not guessed
            result.memory = None
    return result


def checksum(params: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    return {
        n: {"sum": float(np.sum(v, dtype=np.float64)), "sum_sq": float(np.sum(np.square(v, dtype=np.float64)))}
        for n, v in sorted(params.items())
    }
