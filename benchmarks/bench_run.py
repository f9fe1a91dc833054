"""How fast does a ppdsl plan run on Paddle, and how much memory does it keep?  Five parts, their targets and checks.

1. ppdsl's plan against Paddle's own ``apply_pass`` plan, same program, same data, same initial state, each in
   its own scope with its own executor, alternating step by step in one process: FThenB, 1F1B (vpp=1) and VPP
   (vpp=2) at pp=1, where both plans run every job of the program on this process.  ppdsl: the library
   schedule expanded at pp=1 and ``build_plan(..., rank=0)``.  Targets: median step ppdsl / Paddle at most
   1.05; the bytes micro-batch 0's forwards keep alive (skip-GC, activations only), ppdsl / Paddle, at most 1.00.
   Checks: both give the same losses; the job order and each job program's op count are equal, and at pp=1
   ``rank=None`` builds the same plan.  Also compared: each job's skip-GC set (names normalised: Paddle names a
   crossing value ``var_<i>_<op>_<r>``, ppdsl ``ppdsl.<i>.<op>.<r>``).  A control, a second identical Paddle plan
   in the same rotation, gives the noise floor of the ratio (on a loaded machine it can reach several percent).
   1b. The same bytes for split-backward schedules against their unsplit counterparts (ZB-H1 / 1F1B, split VPP /
   VPP, ZB-V / interleaved 1F1B) over every rank of pp=2, ppdsl only (Paddle's own PIR passes cannot split
   those), and what their backward_b jobs keep for backward_w: no target.
2. Plan build time, ``build_plan(...)`` total (prepare + split + skip-GC + Plan), for the 24-layer MLP at
   pp=4, vpp=2, microbatches=16 with ``vpp.sched`` and ``interleaved1f1b.sched`` (rank=None, every rank in this
   process).  Target: under 2 s (the slowest of the repeats, the first included).
3. The single-machine emulated pipeline (rank=None: every rank's jobs in one process) against the plain
   full-batch run of the same model on the same data: step times, and the overhead per job = (pipeline step -
   full-batch step) / jobs per step.  No target; check: the first step's loss equals the full-batch loss.
4. The bytes each rank holds at job boundaries, measured on a training step of the built-in model (1F1B, ZB-H1,
   ZB-V at pp=4, m=8, batch 32), against ``ppdsl check --model builtin``'s estimate.  Target: within 10% per rank.
5. ``ppdsl run`` with no arguments in a fresh process.  Target: under 10 s, with the loss falling.

Run ``python benchmarks/bench_run.py`` (``--quick`` for a shorter run).  A table goes to stdout, and the last line
of stdout is one JSON object with every figure.  Progress notes go to stderr.  Exit code 0 only if every target
and check passes.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEDULES = ROOT / "schedules"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ppdsl.analysis.check import check  # noqa: E402
from ppdsl.analysis.expand import expand  # noqa: E402
from ppdsl.analysis.plan_spec import checked_spec  # noqa: E402
from ppdsl.analysis.scenario import Scenario  # noqa: E402
from ppdsl.language.resolve import load  # noqa: E402
from ppdsl.runtime import plan as plan_module  # noqa: E402
from ppdsl.runtime.builtin_models import GPTConfig, MLPConfig, gpt_model, load_model, tiny_mlp_model  # noqa: E402
from ppdsl.runtime.env import import_paddle  # noqa: E402
from ppdsl.runtime.memory import model_memory  # noqa: E402
from ppdsl.runtime.model import Model  # noqa: E402
from ppdsl.runtime.plan import build_plan  # noqa: E402
from ppdsl.runtime.program import LOSS_NAME, build_training_program  # noqa: E402
from ppdsl.runtime.stages import complete_roles, op_stages, stamp_stages  # noqa: E402
from ppdsl.runtime.train import (  # noqa: E402
    PipelineTrainer,
    TrainConfig,
    canonical_name,
    startup_state_names,
    train,
)

TARGET_RATIO = 1.05  # median step ppdsl / Paddle, at most
TARGET_BYTES_RATIO = 1.00  # bytes micro-batch 0's forwards keep alive, ppdsl / Paddle, at most
TARGET_MEMORY_ERROR = 0.10  # measured peak bytes per rank against `check --model`'s estimate, at most
TARGET_DEFAULT_RUN_SECONDS = 10.0  # `ppdsl run` with no arguments, under
TARGET_BUILD_SECONDS = 2.0  # build_plan total, 24 layers pp=4 vpp=2 m=16, under
LOSS_TOLERANCE = 1e-5  # ppdsl vs Paddle (the same jobs), and first pipelined step vs full batch

# (Paddle pass mode, library schedule, vpp) for part 1
PAIRS = [("FThenB", "fthenb", 1), ("1F1B", "1f1b", 1), ("VPP", "vpp", 2)]
# (schedule, pp, vpp) for part 3; microbatches from --microbatches
EMULATED = [("fthenb", 1, 1), ("1f1b", 4, 1), ("interleaved1f1b", 4, 2), ("zbv", 4, 2)]
# part 1b: a split schedule and its unsplit counterpart, (label, schedule, vpp, params), every rank of pp=SPLIT_PP
SPLIT_PP = 2
# (split, unsplit, micro-batches: None for --microbatches; Paddle's VPP splits only where microbatches == pp)
SPLIT_PAIRS = [
    (("ZB-H1", "zbh1", 1, None), ("1F1B", "1f1b", 1, None), None),
    (("VPP split", "vpp", 2, {"split_backward": True}), ("VPP", "vpp", 2, None), SPLIT_PP),
    (("ZB-V", "zbv", 2, None), ("Interleaved 1F1B", "interleaved1f1b", 2, None), None),
]
# part 4: (schedule, pp, vpp) whose measured memory is compared with the estimate, on the built-in model
MEMORY_CASES = [("1f1b", 4, 1), ("zbh1", 4, 1), ("zbv", 4, 2)]
BUILD_CASES = ["vpp", "interleaved1f1b"]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _model(config: GPTConfig) -> Model:
    """The built-in GPT at the benchmark's size."""
    return gpt_model(config, f"gpt(hidden={config.hidden}, layers={config.layers}, seq={config.seq_len})")


def _schedule(stem: str):
    return load(SCHEDULES / f"{stem}.sched")


# --------------------------------------------------------------------------------------------------------------
# running a plan: one scope, one executor
# --------------------------------------------------------------------------------------------------------------


class Runner:
    """A plan (or a plain program when `plan` is None) with its own scope and executor."""

    def __init__(self, paddle, label: str, program, plan, loss_value) -> None:
        self.paddle, self.label, self.loss_value = paddle, label, loss_value
        self.main, self.startup = program.main, program.startup
        self.jobs = 1 if plan is None else len(plan.job_list())
        self.ops = len(self.main.global_block().ops) if plan is None else _ops_per_step(plan)
        self.scope = paddle.static.Scope()
        place = paddle.CPUPlace()
        program.run_startup(paddle, self.scope)  # the startup program, then the eager layers' values
        # one executor per scope: two executors on one scope can crash in FetchTensors
        self.executor = paddle.static.Executor(place)
        if plan is not None:
            self.executor._set_plan(plan)
        self.seconds: list[float] = []  # timed steps only
        self.losses: list[np.ndarray] = []  # every step

    def step(self, feed: dict[str, np.ndarray], timed: bool) -> np.ndarray:
        with self.paddle.static.scope_guard(self.scope):
            t0 = time.perf_counter()
            out = self.executor.run(self.main, feed=feed, fetch_list=[self.loss_value])
            seconds = time.perf_counter() - t0
        loss = np.asarray(out[0], dtype=np.float64).reshape(-1)
        if timed:
            self.seconds.append(seconds)
        self.losses.append(loss)
        return loss

    def state(self) -> dict[str, np.ndarray]:
        """Everything the startup program initialises, by canonical name (optimizer state has a counter)."""
        names = startup_state_names(self.startup)
        return {canonical_name(n, ()): np.array(self.scope.find_var(n).get_tensor()) for n in names}

    def set_state(self, values: dict[str, np.ndarray]) -> int:
        """Set what this runner's startup initialised from `values` (canonical names); returns how many."""
        place = self.paddle.CPUPlace()
        done = 0
        for name in startup_state_names(self.startup):
            value = values.get(canonical_name(name, ()))
            if value is not None:
                self.scope.find_var(name).get_tensor().set(value, place)
                done += 1
        return done

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _rounded(seconds: list[float]) -> list[float]:
    """Per-step times for the JSON, to the microsecond."""
    return [round(x, 6) for x in seconds]


def _loss_value(plan):
    """The loss Value of whichever job program of `plan` publishes it."""
    for job_type in plan.job_types():
        for op in plan.ir_program(job_type).global_block().ops:
            if op.name() == "builtin.shadow_output" and op.attrs()["output_name"] == LOSS_NAME:
                return op.operand_source(0)
    raise RuntimeError("no job program computes the loss")


def _alternate(runners: list[Runner], batches: list[dict], warmup: int, rounds: int) -> None:
    """Warm-up steps, then `rounds` rounds of one step each, the order rotating every round so that neither side
    always runs first.  Every runner gets the same batch in a round.  Python's GC is off while timing."""
    for step in range(warmup):
        for r in runners:
            r.step(batches[step], timed=False)
    gc.collect()
    gc.disable()
    try:
        for i in range(rounds):
            k = i % len(runners)
            for r in runners[k:] + runners[:k]:
                r.step(batches[warmup + i], timed=True)
    finally:
        gc.enable()


# --------------------------------------------------------------------------------------------------------------
# 1. ppdsl's plan against Paddle's apply_pass plan
# --------------------------------------------------------------------------------------------------------------


class _RecordingJob:
    """Stands in for a `core.Job` while skip-GC variables are set, and records what each job got."""

    def __init__(self, job, log: list) -> None:
        self._job, self._log = job, log

    def type(self) -> str:
        return self._job.type()

    def micro_batch_id(self) -> int:
        return self._job.micro_batch_id()

    def set_skip_gc_vars(self, names) -> None:
        self._log.append((self._job.type(), self._job.micro_batch_id(), frozenset(names)))
        self._job.set_skip_gc_vars(names)


@contextlib.contextmanager
def _record_skip_gc(module, log: list) -> Iterator[None]:
    """Wrap `module.set_skip_gc_vars` so the sets it gives each job land in `log` (the plan is unchanged)."""
    original = module.set_skip_gc_vars

    def recording(num_micro_batches, job_types, programs, jobs):
        return original(num_micro_batches, job_types, programs, [_RecordingJob(j, log) for j in jobs])

    module.set_skip_gc_vars = recording
    try:
        yield
    finally:
        module.set_skip_gc_vars = original


_CROSSING = [re.compile(r"^var_(\d+)_(.+)_(\d+)$"), re.compile(r"^ppdsl\.(\d+)\.(.+)\.(\d+)$")]


def _normal_var(name: str) -> str:
    for pattern in _CROSSING:
        hit = pattern.match(name)
        if hit:
            return f"<{hit[1]}:{hit[2]}:{hit[3]}>"
    return name


def _skip_gc_summary(log: list) -> dict[tuple[str, int], frozenset]:
    return {(t, mb): frozenset(_normal_var(n) for n in names) for t, mb, names in log}


def _program_shape(plan) -> dict[str, dict[str, Any]]:
    out = {}
    for job_type in plan.job_types():
        block = plan.ir_program(job_type).global_block()
        ops = [op.name() for op in block.ops]
        out[job_type] = {"ops": len(ops), "kwargs": len(block.kwargs()), "op_names": Counter(ops)}
    return out


def _ops_per_step(plan) -> int:
    """Ops the executor runs in one step: each job's program, once per job."""
    sizes = {t: len(plan.ir_program(t).global_block().ops) for t in plan.job_types()}
    return sum(sizes[j.type()] for j in plan.job_list())


def _value_bytes(plan) -> dict[str, int]:
    """Bytes of every named non-persistable value of the plan's job programs whose shape is static (persistable
    ones, parameters and accumulators, are never freed: Paddle's sets name them, at no cost)."""
    from paddle.base import core

    out: dict[str, int] = {}

    def add(name: str, value) -> None:
        shape = list(value.shape)
        if all(d >= 0 for d in shape) and not value.persistable:
            out[name] = int(np.prod(shape, dtype=np.int64)) * core.size_of_dtype(value.dtype)

    for job_type in plan.job_types():
        block = plan.ir_program(job_type).global_block()
        for name, value in block.kwargs().items():
            add(name, value)
        for op in block.ops:
            for value in (*op.operands_source(), *op.results()):
                if value.has_name:
                    add(value.name, value)
    return out


def _forward_hold_bytes(log: list, sizes: dict[str, int]) -> int:
    """Bytes the forward jobs of micro-batch 0 keep alive for later jobs: the activation memory of one micro-batch
    in flight."""
    return sum(sizes.get(n, 0) for t, mb, names in log if mb == 0 and t.startswith("forward") for n in names)


def _pair_in_process(mode: str, argv: list[str] | None) -> dict[str, Any]:
    """`bench_pair` in a fresh process. Run one after another in one process, a later comparison came out 5-11%
    against ppdsl where the same comparison alone gave 1.00 (the earlier pairs' executors and plans still around);
    a process per comparison leaves nothing behind."""
    import subprocess

    cmd = [sys.executable, str(Path(__file__).resolve()), *(argv if argv is not None else sys.argv[1:]), "--pair", mode]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_pair(paddle, model: Model, mode: str, stem: str, vpp: int, args) -> dict[str, Any]:
    from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass, pipeline_pass_base

    m, mbs = args.microbatches, args.micro_batch_size
    exp = expand(_schedule(stem), 1, m, vpp)
    programs = [
        build_training_program(
            paddle, model, micro_batch_size=mbs, num_stages=vpp, microbatches=m, lr=args.lr, seed=args.seed
        )
        for _ in range(3)
    ]
    for program in programs:
        # Paddle's VPP pass guesses backward chunk ids from neighbouring ops and cannot place `embedding_grad`:
        # give both sides the program with every op's stage written in (as the runtime tests do)
        complete_roles(program.main)
        stamp_stages(program.main, op_stages(program.main))
    ours_prog, theirs_prog, control_prog = programs

    ours_log: list = []
    theirs_log: list = []
    with _record_skip_gc(plan_module, ours_log):
        t0 = time.perf_counter()
        ours = build_plan(
            ours_prog.main,
            ours_prog.startup,
            checked_spec(exp),
            rank=0,
        )
        ours_build = time.perf_counter() - t0
    with _record_skip_gc(pipeline_pass_base, theirs_log):
        t0 = time.perf_counter()
        attrs = {"num_micro_batches": m, "pp_degree": 1, "pp_stage": 0, "vpp_degree": vpp}
        theirs = apply_pass(theirs_prog.main, theirs_prog.startup, mode, attrs)
        theirs_build = time.perf_counter() - t0
    # the control: a second, identical Paddle plan in its own scope; Paddle / Paddle shows the noise floor
    attrs = {"num_micro_batches": m, "pp_degree": 1, "pp_stage": 0, "vpp_degree": vpp}
    control = apply_pass(control_prog.main, control_prog.startup, mode, attrs)

    ours_jobs = [(j.type(), j.micro_batch_id()) for j in ours.plan.job_list()]
    # at pp=1 the single-machine emulation (rank=None) must be the same plan under its own job names
    emulated = build_plan(
        ours_prog.main,
        ours_prog.startup,
        checked_spec(exp),
        rank=None,
    )

    def rank_name(name: str) -> str:  # `forward@1` -> `forward1` (vpp > 1) or `forward`; `optimizer@r0` -> `optimizer`
        base, _, stage = name.partition("@")
        return base if base == "optimizer" or vpp == 1 else f"{base}{stage}"

    emulated_jobs = [(rank_name(j.type()), j.micro_batch_id()) for j in emulated.plan.job_list()]
    emulated_ops = {rank_name(t): len(p.global_block().ops) for t, p in emulated.programs.items()}
    theirs_jobs = [(j.type(), j.micro_batch_id()) for j in theirs.job_list()]
    ours_shape, theirs_shape = _program_shape(ours.plan), _program_shape(theirs)
    op_counts_equal = {t: s["ops"] for t, s in ours_shape.items()} == {t: s["ops"] for t, s in theirs_shape.items()}
    op_names_equal = {t: s["op_names"] for t, s in ours_shape.items()} == {
        t: s["op_names"] for t, s in theirs_shape.items()
    }
    ours_gc, theirs_gc = _skip_gc_summary(ours_log), _skip_gc_summary(theirs_log)
    gc_differs = sorted(k for k in set(ours_gc) | set(theirs_gc) if ours_gc.get(k) != theirs_gc.get(k))
    gc_superset = set(ours_gc) == set(theirs_gc) and all(theirs_gc[k] <= ours_gc[k] for k in ours_gc)
    gc_example = None
    if gc_differs:
        k = gc_differs[0]
        a, b = ours_gc.get(k, frozenset()), theirs_gc.get(k, frozenset())
        gc_example = {"job": f"{k[0]}#{k[1]}", "only_ppdsl": sorted(a - b)[:5], "only_paddle": sorted(b - a)[:5]}

    # the control first, so that neither measured side is the first runner of the process
    c = Runner(paddle, "paddle (2nd)", control_prog, control, _loss_value(control))
    a = Runner(paddle, "ppdsl", ours_prog, ours.plan, ours.loss_value)
    b = Runner(paddle, "paddle", theirs_prog, theirs, _loss_value(theirs))
    initial = a.state()
    # every side's state set the same way (tensors set from numpy are fresh allocations)
    a.set_state(initial)
    copied = b.set_state(initial)
    c.set_state(initial)
    same_start = all(np.array_equal(v, r.state()[k]) for r in (b, c) for k, v in initial.items())
    batch_size = m * mbs
    batches = [model.make_batch(s, batch_size, args.seed) for s in range(args.warmup + args.rounds)]
    _alternate([a, b, c], batches, args.warmup, args.rounds)

    held_ours = _forward_hold_bytes(ours_log, _value_bytes(ours.plan))
    held_theirs = _forward_hold_bytes(theirs_log, _value_bytes(theirs))
    loss_diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a.losses, b.losses, strict=True))
    control_loss_diff = max(float(np.max(np.abs(x - y))) for x, y in zip(c.losses, b.losses, strict=True))
    per_round = [x / y for x, y in zip(a.seconds, b.seconds, strict=True)]
    ratio = a.median / b.median
    return {
        "mode": mode,
        "schedule": exp.defn.name,
        "pp": 1,
        "vpp": vpp,
        "microbatches": m,
        "micro_batch_size": mbs,
        "jobs": len(ours_jobs),
        "job_sequence_equal": ours_jobs == theirs_jobs,
        "rank_none_same_plan": emulated_jobs == ours_jobs
        and emulated_ops == {t: s["ops"] for t, s in ours_shape.items()},
        "job_programs": {
            t: {"ppdsl_ops": ours_shape[t]["ops"], "paddle_ops": theirs_shape.get(t, {}).get("ops")}
            for t in sorted(ours_shape)
        },
        "program_types_equal": set(ours_shape) == set(theirs_shape),
        "op_counts_equal": op_counts_equal,
        "op_names_equal": op_names_equal,
        "skip_gc_jobs": len(ours_gc),
        "skip_gc_vars_ppdsl": sum(len(v) for v in ours_gc.values()),
        "skip_gc_vars_paddle": sum(len(v) for v in theirs_gc.values()),
        "skip_gc_equal": not gc_differs,
        "skip_gc_ppdsl_superset": gc_superset,
        "skip_gc_jobs_differing": len(gc_differs),
        "skip_gc_example": gc_example,
        "skip_gc_forward_bytes_ppdsl": held_ours,
        "skip_gc_forward_bytes_paddle": held_theirs,
        "skip_gc_bytes_ratio": held_ours / held_theirs if held_theirs else None,
        "skip_gc_bytes_target": TARGET_BYTES_RATIO,
        "skip_gc_bytes_pass": held_ours <= TARGET_BYTES_RATIO * held_theirs,
        "ops_per_step_ppdsl": _ops_per_step(ours.plan),
        "ops_per_step_paddle": _ops_per_step(theirs),
        "state_copied": copied,
        "same_initial_state": same_start,
        "ppdsl_build_seconds": ours_build,
        "paddle_build_seconds": theirs_build,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "ppdsl_median_seconds": a.median,
        "paddle_median_seconds": b.median,
        "ppdsl_min_seconds": min(a.seconds),
        "paddle_min_seconds": min(b.seconds),
        "ppdsl_seconds": _rounded(a.seconds),
        "paddle_seconds": _rounded(b.seconds),
        "ratio": ratio,
        "ratio_of_mins": min(a.seconds) / min(b.seconds),
        "median_round_ratio": statistics.median(per_round),
        "control_median_seconds": c.median,
        "control_seconds": _rounded(c.seconds),
        "control_ratio": c.median / b.median,
        "control_max_loss_diff": control_loss_diff,
        "ratio_target": TARGET_RATIO,
        "ratio_pass": ratio <= TARGET_RATIO,
        "steps_compared": len(a.losses),
        "max_loss_diff": loss_diff,
        "loss_pass": loss_diff <= LOSS_TOLERANCE and same_start,
        "final_mean_loss": float(a.losses[-1].mean()),
    }


def _skip_gc_bytes(paddle, model: Model, stem: str, vpp: int, params, m: int, args) -> dict[str, Any]:
    """Bytes micro-batch 0's forward jobs, and its backward_b jobs, keep alive in ppdsl's plan for every rank of
    pp=SPLIT_PP (rank=None): the split schedules split only where a rank has a bubble to fill."""
    mbs = args.micro_batch_size
    exp = expand(_schedule(stem), SPLIT_PP, m, vpp, params)
    program = build_training_program(
        paddle, model, micro_batch_size=mbs, num_stages=exp.nstages, microbatches=m, lr=args.lr, seed=args.seed
    )
    log: list = []
    with _record_skip_gc(plan_module, log):
        built = build_plan(
            program.main,
            program.startup,
            checked_spec(exp),
        )
    sizes = _value_bytes(built.plan)

    def kept(prefix: str) -> int:
        return sum(sizes.get(n, 0) for t, mb, names in log if mb == 0 and t.startswith(prefix) for n in names)

    used = {t for t, _, _ in log}
    return {
        "forward_bytes": kept("forward"),
        "backward_b_bytes": kept("backward_b"),
        "split": any(t.startswith("backward_w") for t in used),
    }


def bench_split_bytes(paddle, model: Model, args) -> list[dict[str, Any]]:
    """Split schedules against their unsplit counterparts: what skip-GC keeps for micro-batch 0 (no target)."""
    rows = []
    for split, whole, microbatches in SPLIT_PAIRS:
        m = microbatches or args.microbatches
        a = _skip_gc_bytes(paddle, model, *split[1:], m, args)
        b = _skip_gc_bytes(paddle, model, *whole[1:], m, args)
        rows.append(
            {
                "split": split[0],
                "unsplit": whole[0],
                "vpp": split[2],
                "microbatches": m,
                "split_forward_bytes": a["forward_bytes"],
                "split_backward_b_bytes": a["backward_b_bytes"],
                "splits": a["split"],
                "unsplit_forward_bytes": b["forward_bytes"],
                "forward_ratio": a["forward_bytes"] / b["forward_bytes"] if b["forward_bytes"] else None,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------------------------
# 4. measured memory against the estimate
# --------------------------------------------------------------------------------------------------------------


def bench_memory(args) -> list[dict[str, Any]]:
    """The built-in model at `ppdsl run`'s default size: the bytes each rank holds at job boundaries, as `ppdsl
    run` reports them (ppdsl/runtime/held.py: the plan's variables kept between jobs), against `ppdsl check --model
    builtin`'s estimate."""
    model = load_model(None)
    batch = 32
    rows = []
    for stem, pp, vpp in MEMORY_CASES:
        m = 8
        exp = expand(_schedule(stem), pp, m, vpp)
        trainer = PipelineTrainer(exp, model, TrainConfig(batch_size=batch, seed=args.seed))
        run = train(trainer, 3, memory=True)
        result = check(Scenario(SCHEDULES / f"{stem}.sched", pp, m, vpp, memory=model_memory(None, batch)))
        estimate = [int(r.peak_activations) for r in result.execution.ranks]
        errors = [got / want - 1 for got, want in zip(run.memory.peak, estimate, strict=True)]
        rows.append(
            {
                "schedule": exp.defn.name,
                "pp": pp,
                "vpp": vpp,
                "microbatches": m,
                "batch_size": batch,
                "measured_peak_bytes": run.memory.peak,
                "estimated_peak_bytes": estimate,
                "errors": errors,
                "max_abs_error": max(abs(e) for e in errors),
                "target": TARGET_MEMORY_ERROR,
                "pass": all(abs(e) <= TARGET_MEMORY_ERROR for e in errors),
            }
        )
    return rows


# --------------------------------------------------------------------------------------------------------------
# 5. the default `ppdsl run`
# --------------------------------------------------------------------------------------------------------------


def bench_default_run() -> dict[str, Any]:
    """`python -m ppdsl.cli run` with no arguments, wall time in a fresh process (this checkout's ppdsl)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "ppdsl.cli", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    seconds = time.perf_counter() - t0
    losses = re.search(r"loss\s+([\d.]+) -> ([\d.]+)", proc.stdout)
    return {
        "seconds": seconds,
        "exit_code": proc.returncode,
        "first_loss": float(losses[1]) if losses else None,
        "last_loss": float(losses[2]) if losses else None,
        "target_seconds": TARGET_DEFAULT_RUN_SECONDS,
        "pass": proc.returncode == 0 and seconds < TARGET_DEFAULT_RUN_SECONDS and bool(losses),
    }


# --------------------------------------------------------------------------------------------------------------
# 2. plan build time
# --------------------------------------------------------------------------------------------------------------


def bench_build(paddle, stem: str, pp: int, vpp: int, m: int, layers: int, repeats: int, seed: int) -> dict[str, Any]:
    # the MLP, as when the target was set: the GPT has several times the ops per layer (see the report's note)
    config = MLPConfig(layers=layers)
    model = tiny_mlp_model(config, f"tiny_mlp(layers={layers})")
    t0 = time.perf_counter()
    exp = expand(_schedule(stem), pp, m, vpp)
    t1 = time.perf_counter()
    program = build_training_program(
        paddle, model, micro_batch_size=2, num_stages=exp.nstages, microbatches=m, lr=0.01, seed=seed
    )
    t2 = time.perf_counter()
    runs = []
    for _ in range(repeats):
        gc.collect()
        built = build_plan(
            program.main,  # build_plan works on a clone: the same program serves every repeat
            program.startup,
            checked_spec(exp),
            rank=None,
        )
        runs.append(dict(built.seconds))
        jobs, job_programs = len(built.job_names), len(built.programs)
        del built
    worst = max(runs, key=lambda r: r["total"])
    best = min(runs, key=lambda r: r["total"])
    return {
        "schedule": exp.defn.name,
        "file": f"schedules/{stem}.sched",
        "pp": pp,
        "vpp": vpp,
        "microbatches": m,
        "layers": layers,
        "program_ops": len(program.main.global_block().ops),
        "jobs": jobs,
        "job_programs": job_programs,
        "expand_seconds": t1 - t0,
        "program_seconds": t2 - t1,
        "repeats": repeats,
        "runs": runs,
        "first": runs[0],
        "best": best,
        "worst_seconds": worst["total"],
        "target_seconds": TARGET_BUILD_SECONDS,
        "pass": worst["total"] < TARGET_BUILD_SECONDS,
    }


# --------------------------------------------------------------------------------------------------------------
# 3. emulated pipeline against the plain full-batch run
# --------------------------------------------------------------------------------------------------------------


def bench_emulated(paddle, model: Model, args) -> dict[str, Any]:
    m, mbs = args.microbatches, args.micro_batch_size
    batch_size = m * mbs
    config = TrainConfig(batch_size=batch_size, lr=args.lr, optimizer="adam", seed=args.seed)
    runners: list[Runner] = []
    meta = []
    for stem, pp, vpp in EMULATED:
        _progress(f"  [3] build {stem} pp={pp} vpp={vpp} m={m}")
        exp = expand(_schedule(stem), pp, m, vpp)
        trainer = PipelineTrainer(exp, model, config)
        built = trainer.built
        runner = Runner(paddle, f"{stem} pp={pp} vpp={vpp}", trainer.program, built.plan, built.loss_value)
        del trainer  # its scope and executor are not used: the runner has its own
        runners.append(runner)
        meta.append({"schedule": exp.defn.name, "file": stem, "pp": pp, "vpp": vpp, "build": built.seconds["total"]})

    full = build_training_program(
        paddle,
        model,
        micro_batch_size=batch_size,
        num_stages=1,
        microbatches=1,
        lr=args.lr,
        seed=args.seed,
        accumulate=False,
    )
    plain = Runner(paddle, "full batch", full, None, full.loss)
    initial = runners[0].state()
    for r in [*runners, plain]:  # every runner's state set the same way (see bench_pair)
        r.set_state(initial)
    params = {n: v for n, v in initial.items() if n in full.param_stage}
    same_start = all(
        np.array_equal(v, np.array(r.scope.find_var(n).get_tensor()))
        for r in [*runners, plain]
        for n, v in params.items()
    )
    batches = [model.make_batch(s, batch_size, args.seed) for s in range(args.warmup + args.rounds)]
    _alternate([plain, *runners], batches, args.warmup, args.rounds)

    full_median = plain.median
    base = runners[0]  # the pp=1 micro-batched plan: the micro-batching alone, few jobs
    rows = []
    for r, info in zip(runners, meta, strict=True):
        mean_losses = np.array([loss.mean() for loss in r.losses])
        ref_losses = np.array([loss.mean() for loss in plain.losses])
        first_diff = float(abs(mean_losses[0] - ref_losses[0]))
        extra_jobs = r.jobs - base.jobs
        rows.append(
            {
                **info,
                "label": r.label,
                "jobs": r.jobs,
                "ops_per_step": r.ops,
                "median_seconds": r.median,
                "min_seconds": min(r.seconds),
                "seconds": _rounded(r.seconds),
                "vs_full_batch": r.median / full_median,
                "overhead_per_job_seconds": (r.median - full_median) / r.jobs,
                "overhead_per_extra_op_seconds": (r.median - full_median) / (r.ops - plain.ops),
                "extra_per_job_over_pp1_seconds": (r.median - base.median) / extra_jobs if extra_jobs > 0 else None,
                "first_step_loss_diff": first_diff,
                "max_step_loss_diff": float(np.max(np.abs(mean_losses - ref_losses))),
                "loss_pass": first_diff <= LOSS_TOLERANCE,
            }
        )
    return {
        "model": model.name,
        "microbatches": m,
        "batch_size": batch_size,
        "optimizer": "adam",
        "warmup": args.warmup,
        "rounds": args.rounds,
        "same_initial_state": same_start,
        "full_batch_median_seconds": full_median,
        "full_batch_ops_per_step": plain.ops,
        "full_batch_min_seconds": min(plain.seconds),
        "full_batch_seconds": _rounded(plain.seconds),
        "rows": rows,
        "loss_pass": same_start and all(row["loss_pass"] for row in rows),
    }


# --------------------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "[bold green]PASS[/]" if ok else "[bold red]FAIL[/]"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 0.1 else f"{seconds * 1e3:.1f} ms"


def _yes(ok: bool) -> str:
    return "same" if ok else "[bold red]differ[/]"


def _pair_rows(table, p: dict[str, Any]) -> None:
    table.add_row(
        f"1 vs apply_pass {p['mode']}",
        f"pp=1 vpp={p['vpp']} m={p['microbatches']}x{p['micro_batch_size']}, {p['jobs']} jobs, {p['rounds']} rounds",
        "",
        "",
        "",
    )
    table.add_row(
        "", "  median step, ppdsl / Paddle", f"{_ms(p['ppdsl_median_seconds'])} / {_ms(p['paddle_median_seconds'])}"
    )
    table.add_row(
        "", "  ratio ppdsl / Paddle (medians)", f"{p['ratio']:.3f}", f"<= {TARGET_RATIO:g}", _verdict(p["ratio_pass"])
    )
    table.add_row(
        "", "  ratio of best steps / median round ratio", f"{p['ratio_of_mins']:.3f} / {p['median_round_ratio']:.3f}"
    )
    table.add_row(
        "",
        "  control: 2nd Paddle plan / Paddle (noise floor)",
        f"{p['control_ratio']:.3f}"
        + ("" if p["control_max_loss_diff"] == 0 else f" (loss diff {p['control_max_loss_diff']:.1e})"),
    )
    table.add_row(
        "",
        f"  max |loss diff|, {p['steps_compared']} steps" + (", same start" if p["same_initial_state"] else ""),
        f"{p['max_loss_diff']:.1e}",
        f"<= {LOSS_TOLERANCE:g}",
        _verdict(p["loss_pass"]),
    )
    same = p["job_sequence_equal"] and p["op_counts_equal"] and p["rank_none_same_plan"]
    table.add_row(
        "",
        "  job order / ops per program / rank=None plan",
        f"{_yes(p['job_sequence_equal'])} / {_yes(p['op_counts_equal'])} / {_yes(p['rank_none_same_plan'])}",
        "same",
        _verdict(same),
    )
    ops = ", ".join(
        f"{t} {v['ppdsl_ops']}" + ("" if v["ppdsl_ops"] == v["paddle_ops"] else f"/{v['paddle_ops']}")
        for t, v in p["job_programs"].items()
        if v["ppdsl_ops"]
    )
    table.add_row("", "  ops per job program", ops)
    table.add_row("", "  ops run per step, ppdsl / Paddle", f"{p['ops_per_step_ppdsl']} / {p['ops_per_step_paddle']}")
    table.add_row(
        "",
        "  skip-GC vars over all jobs, ppdsl / Paddle",
        f"{p['skip_gc_vars_ppdsl']} / {p['skip_gc_vars_paddle']} ({_yes(p['skip_gc_equal'])})",
    )
    table.add_row(
        "",
        "  kept alive by micro-batch 0's forwards",
        f"{p['skip_gc_forward_bytes_ppdsl'] / 1024:.0f} / {p['skip_gc_forward_bytes_paddle'] / 1024:.0f} KiB",
    )
    table.add_row(
        "",
        "  ratio of those bytes, ppdsl / Paddle",
        f"{p['skip_gc_bytes_ratio']:.3f}" if p["skip_gc_bytes_ratio"] is not None else "-",
        f"<= {TARGET_BYTES_RATIO:.2f}",
        _verdict(p["skip_gc_bytes_pass"]),
    )
    table.add_row(
        "", "  plan build, ppdsl / Paddle", f"{_ms(p['ppdsl_build_seconds'])} / {_ms(p['paddle_build_seconds'])}"
    )
    table.add_section()


def _build_rows(table, i: int, b: dict[str, Any]) -> None:
    table.add_row(
        "2 plan build" if i == 0 else "",
        f"{b['file']} pp={b['pp']} vpp={b['vpp']} m={b['microbatches']}",
        f"{b['layers']} layers, {b['program_ops']} ops",
        "",
        "",
    )
    table.add_row("", "  jobs / job programs", f"{b['jobs']} / {b['job_programs']}")
    f = b["first"]
    table.add_row(
        "",
        "  first build: prepare / split / skip-GC+Plan",
        f"{_ms(f['prepare'])} / {_ms(f['split'])} / {_ms(f['plan'])}",
    )
    table.add_row(
        "",
        f"  build_plan total: first / best / slowest of {b['repeats']}",
        f"{_ms(f['total'])} / {_ms(b['best']['total'])} / {_ms(b['worst_seconds'])}",
        f"< {TARGET_BUILD_SECONDS:g} s",
        _verdict(b["pass"]),
    )
    table.add_row(
        "",
        "  not included: expand / build_training_program",
        f"{_ms(b['expand_seconds'])} / {_ms(b['program_seconds'])}",
    )


def _emulated_rows(table, e: dict[str, Any]) -> None:
    table.add_row(
        "3 emulated vs full batch",
        f"batch {e['batch_size']} = {e['microbatches']} micro-batches, {e['rounds']} rounds",
        "",
        "",
        "",
    )
    table.add_row(
        "", f"full-batch program: 1 job, {e['full_batch_ops_per_step']} ops", _ms(e["full_batch_median_seconds"])
    )
    for row in e["rows"]:
        extra = row["extra_per_job_over_pp1_seconds"]
        table.add_row(
            "",
            f"{row['label']}: {row['jobs']} jobs, {row['ops_per_step']} ops",
            f"{_ms(row['median_seconds'])} ({row['vs_full_batch']:.2f}x)",
        )
        table.add_row("", "  overhead per job vs full batch", f"{row['overhead_per_job_seconds'] * 1e3:.3f} ms")
        if extra is not None:
            table.add_row("", "  per extra job vs the pp=1 plan", f"{extra * 1e3:.3f} ms")
        table.add_row("", "  per extra op run vs full batch", f"{row['overhead_per_extra_op_seconds'] * 1e6:.1f} µs")
    worst = max(row["first_step_loss_diff"] for row in e["rows"])
    table.add_row(
        "",
        "first-step loss vs full batch, max |diff|" + (", same start" if e["same_initial_state"] else ""),
        f"{worst:.1e}",
        f"<= {LOSS_TOLERANCE:g}",
        _verdict(e["loss_pass"]),
    )


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    table = Table(title="ppdsl run benchmark", title_justify="left")
    for name, justify in (("part", "left"), ("measure", "left"), ("value", "right"), ("target", "right")):
        table.add_column(name, justify=justify)
    table.add_column("", justify="center")

    cfg = report["config"]
    for p in report["vs_paddle"]:
        _pair_rows(table, p)
    for i, r in enumerate(report["split_bytes"]):
        table.add_row(
            "1b split vs unsplit" if i == 0 else "",
            f"{r['split']} / {r['unsplit']} pp={SPLIT_PP} vpp={r['vpp']} m={r['microbatches']}: "
            "kept by micro-batch 0's forwards",
            f"{r['split_forward_bytes'] / 1024:.0f} / {r['unsplit_forward_bytes'] / 1024:.0f} KiB",
        )
        table.add_row(
            "",
            f"  {r['split']}: kept by its backward_b for backward_w",
            f"{r['split_backward_b_bytes'] / 1024:.0f} KiB",
        )
    if report["split_bytes"]:
        table.add_section()
    for i, b in enumerate(report["build"]):
        _build_rows(table, i, b)
    if report["build"]:
        table.add_section()
    if report["emulated"] is not None:
        _emulated_rows(table, report["emulated"])
        table.add_section()
    for i, r in enumerate(report["memory"]):
        measured = ", ".join(f"{b / 1024:.0f}" for b in r["measured_peak_bytes"])
        estimated = ", ".join(f"{b / 1024:.0f}" for b in r["estimated_peak_bytes"])
        table.add_row(
            "4 measured memory" if i == 0 else "",
            f"{r['schedule']} pp={r['pp']} vpp={r['vpp']} m={r['microbatches']}: measured / estimated KiB per rank",
            f"{measured} / {estimated}",
        )
        table.add_row(
            "",
            "  largest |measured / estimated - 1|",
            f"{r['max_abs_error']:.1%}",
            f"<= {TARGET_MEMORY_ERROR:.0%}",
            _verdict(r["pass"]),
        )
    if report["memory"]:
        table.add_section()
    d = report["default_run"]
    if d is not None:
        losses = f", loss {d['first_loss']} -> {d['last_loss']}" if d["first_loss"] is not None else ""
        table.add_row(
            "5 default run",
            f"`ppdsl run` (1F1B pp=4 m=8, 30 steps, built-in GPT){losses}",
            f"{d['seconds']:.1f} s",
            f"< {TARGET_DEFAULT_RUN_SECONDS:g} s",
            _verdict(d["pass"]),
        )

    console.print(table)
    console.print(
        f"model for parts 1 and 3: the built-in GPT at hidden {cfg['hidden']}, layers {cfg['layers']}, seq "
        f"{cfg['seq_len']}, vocab {cfg['vocab']}; part 2: the MLP (tiny_mlp), 24 layers; part 4: the built-in GPT "
        f"at its default size, batch 32. Adam lr {cfg['lr']}; {cfg['warmup']} warm-up steps per side, then rounds "
        "of one step per side, the order rotating each round. Load average (1 min) before / after: "
        f"{report['loadavg_before'][0]:.1f} / {report['loadavg_after'][0]:.1f} on {report['cpus']} CPUs"
    )
    verdict = (
        "all targets met"
        if report["all_pass"]
        else "some targets missed: " + ", ".join(k for k, v in report["targets"].items() if v is False)
    )
    console.print(verdict, style="bold green" if report["all_pass"] else "bold red")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and build repeats")
    parser.add_argument("--rounds", type=int, help="timed alternating rounds per comparison (default 40, quick 12)")
    parser.add_argument("--warmup", type=int, help="untimed steps per side first (default 3, quick 2)")
    parser.add_argument("--build-repeats", type=int, help="builds per schedule in part 2 (default 3, quick 2)")
    parser.add_argument("--hidden", type=int, default=64, help="model width for parts 1 and 3")
    parser.add_argument("--layers", type=int, default=8, help="model depth for parts 1 and 3")
    parser.add_argument("--seq-len", type=int, default=32, help="sequence length for parts 1 and 3")
    parser.add_argument("-m", "--microbatches", type=int, default=8, help="micro-batches for parts 1 and 3")
    parser.add_argument("--micro-batch-size", type=int, default=2, help="samples per micro-batch, parts 1 and 3")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=["1", "2", "3", "4", "5"], action="append", help="run only these parts")
    parser.add_argument(
        "--pair", help=argparse.SUPPRESS
    )  # internal: one part-1 comparison, as JSON (see _pair_in_process)
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (12 if args.quick else 40)
    args.warmup = args.warmup or (2 if args.quick else 3)
    build_repeats = args.build_repeats or (2 if args.quick else 3)
    parts = set(args.only or ["1", "2", "3", "4", "5"])

    if args.pair is not None:
        mode, stem, vpp = next(p for p in PAIRS if p[0] == args.pair)
        config = GPTConfig(hidden=args.hidden, layers=args.layers, seq_len=args.seq_len)
        print(json.dumps(bench_pair(import_paddle(), _model(config), mode, stem, vpp, args)), flush=True)
        return 0

    started = time.perf_counter()
    load_before = os.getloadavg()
    paddle = import_paddle()
    config = GPTConfig(hidden=args.hidden, layers=args.layers, seq_len=args.seq_len)
    model = _model(config)
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "paddle": paddle.__version__,
        "cpus": os.cpu_count(),
        "quick": args.quick,
        "config": {
            "vocab": config.vocab,
            "hidden": config.hidden,
            "layers": config.layers,
            "seq_len": config.seq_len,
            "microbatches": args.microbatches,
            "micro_batch_size": args.micro_batch_size,
            "lr": args.lr,
            "seed": args.seed,
            "warmup": args.warmup,
            "rounds": args.rounds,
        },
        "vs_paddle": [],
        "split_bytes": [],
        "build": [],
        "emulated": None,
        "memory": [],
        "default_run": None,
    }

    if "1" in parts:
        for mode, stem, vpp in PAIRS:
            _progress(f"[1] {mode}: ppdsl {stem}.sched vs Paddle apply_pass, pp=1 vpp={vpp} m={args.microbatches}")
            report["vs_paddle"].append(_pair_in_process(mode, argv))
        _progress("[1b] skip-GC bytes: split schedules against their unsplit counterparts")
        report["split_bytes"] = bench_split_bytes(paddle, model, args)
    if "2" in parts:
        for stem in BUILD_CASES:
            _progress(f"[2] build_plan {stem}.sched pp=4 vpp=2 m=16, 24 layers")
            report["build"].append(bench_build(paddle, stem, 4, 2, 16, 24, build_repeats, args.seed))
    if "3" in parts:
        _progress("[3] emulated pipelines vs the full-batch program")
        report["emulated"] = bench_emulated(paddle, model, args)
    if "4" in parts:
        _progress("[4] measured memory against check --model's estimate, built-in model")
        report["memory"] = bench_memory(args)
    if "5" in parts:
        _progress("[5] the default `ppdsl run`")
        report["default_run"] = bench_default_run()

    report["targets"] = {
        **{f"ratio_{p['mode']}": p["ratio_pass"] for p in report["vs_paddle"]},
        **{f"skip_gc_bytes_{p['mode']}": p["skip_gc_bytes_pass"] for p in report["vs_paddle"]},
        **{f"memory_{r['schedule']}": r["pass"] for r in report["memory"]},
        "default_run": None if report["default_run"] is None else report["default_run"]["pass"],
        **{f"losses_{p['mode']}": p["loss_pass"] for p in report["vs_paddle"]},
        **{
            f"same_jobs_{p['mode']}": p["job_sequence_equal"] and p["op_counts_equal"] and p["rank_none_same_plan"]
            for p in report["vs_paddle"]
        },
        **{f"build_{b['file']}": b["pass"] for b in report["build"]},
        "emulated_losses": None if report["emulated"] is None else report["emulated"]["loss_pass"],
    }
    report["all_pass"] = all(v is not False for v in report["targets"].values())
    report["total_seconds"] = time.perf_counter() - started
    report["loadavg_before"] = list(load_before)
    report["loadavg_after"] = list(os.getloadavg())

    print_report(report)
    print(json.dumps(report), flush=True)
    return 0 if report["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
