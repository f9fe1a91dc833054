"""The program `paddle.distributed.launch` starts once per rank: `python worker.py RUN_DIR/launch-<n>/spec.json
SHA256`, the second argument the sha256 of the spec's bytes.

The launch's spec (ppdsl.runtime.launch_spec.LaunchSpec, read once and checked against that digest before it is
parsed: E045) names the plan specification the launcher wrote beside it (`plan.json`, a
`ppdsl.plan.spec.PlanSpec` of the checked schedule) with its sha256, the fingerprint of the schedule it
checked, and the `--model` module's source files with theirs; the rank builds everything from those bytes, the
model's code run from the bytes checked (E049), the plan refused (E090) if it is of another source. It never reads
the `.sched` file nor imports `ppdsl.language` (tests/runtime/test_worker_plan.py holds it to that).

It trains the rank's share of the pipeline (ppdsl.runtime.cluster) and writes, atomically, into that launch's
directory (the spec's `launch_dir`): `rank<r>.npz` (the parameters of its stages), `rank<r>.json` (losses if it
holds the loss, step and communication times) or, when it fails, `rank<r>.error` with what went wrong. A failing
rank exits non-zero; the launcher then stops the others.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, to_json
from ppdsl.common.files import open_atomic, write_atomic
from ppdsl.plan.kinds import SYNC_SHARED_NAME
from ppdsl.runtime.held import scope_bytes
from ppdsl.runtime.launch_spec import LaunchSpec, load_bound_model, load_plan, read_launch_spec


class _TimedGroup:
    """A process group whose send / recv calls are timed (perf_counter, one clock for every process of a machine):
    `log[(src, dst)]` gets (start, end, bytes) per tensor, in the order the link carries them."""

    def __init__(self, group, direction: tuple[int, int], log: dict, ranks: list[int] | None = None):
        """`ranks`: the members as the caller names them (the plan's ranks of a replica), else the group's own."""
        self.ranks, self._pg = ranks if ranks is not None else group.ranks, group.process_group
        self._log = log.setdefault(f"{direction[0]}->{direction[1]}", [])

    @property
    def process_group(self):
        return self

    def _timed(self, call, tensor, peer, sync_op):
        t0 = time.perf_counter()
        task = call(tensor, peer, sync_op)
        self._log.append((t0, time.perf_counter(), int(np.prod(tensor.shape)) * tensor.element_size()))
        return task

    def send(self, tensor, peer, sync_op=True):
        return self._timed(self._pg.send, tensor, peer, sync_op)

    def recv(self, tensor, peer, sync_op=True):
        return self._timed(self._pg.recv, tensor, peer, sync_op)


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open_atomic(path) as f:
        np.savez(f, **arrays)


class RankProcess:
    def __init__(self, spec: LaunchSpec, on_ready=None):
        """`on_ready()` is called once the rank has met its peers (the launcher's rendezvous is over)."""
        os.environ.setdefault("GLOG_minloglevel", "2")
        import paddle
        import paddle.distributed as dist

        self.spec = spec
        self.plan = load_plan(spec)
        self.request = spec.request  # the run's options, as `ppdsl run` was given them
        self.config = self.request.train_config
        self.run_dir = Path(spec.launch_dir)
        # GPU: p2p ops in the programs on NCCL rings; CPU: the threaded gloo transport
        self.gpu = paddle.is_compiled_with_cuda()
        paddle.set_device(f"gpu:{dist.ParallelEnv().dev_id}" if self.gpu else "cpu")
        dist.init_parallel_env()
        from ppdsl.runtime.replicas import RankLayout

        # `rank` is this process (files, the failure hook, the guard's status); `stage_rank` its rank in the plan
        self.layout = RankLayout(self.plan.pp, self.request.dp)
        self.rank, world = dist.get_rank(), dist.get_world_size()
        if world != self.layout.world:
            raise RuntimeError(
                f"{world} processes for a schedule with pp = {self.plan.pp} and dp = {self.request.dp} replicas"
            )
        self.replica, self.stage_rank = self.layout.replica_of(self.rank), self.layout.rank_of(self.rank)
        # groups exist before static mode: one per direction of each link between neighbouring stages of each
        # replica, then one per pipeline rank over the replicas, created by every process in the same order; one
        # at a time, for gloo groups of disjoint pairs created concurrently fail to connect ("connect
        # [127.0.0.1]:N: Connection refused")
        from ppdsl.runtime.p2p import ring_links

        self.groups = {}
        links = ring_links([r for r, _ in self.plan.rank_of_stage()])
        for replica in range(self.layout.dp):
            for direction, link in links.items():
                group = dist.new_group([self.layout.process(replica, r) for r in link.ranks])
                dist.barrier()
                if replica == self.replica:
                    self.groups[direction] = group
        self.replica_group = None
        if self.layout.dp > 1:
            for r in range(self.layout.pp):
                group = dist.new_group(self.layout.replica_group(r))
                dist.barrier()
                if r == self.stage_rank:
                    self.replica_group = group
        if on_ready is not None:
            on_ready()
        from ppdsl.runtime.env import import_paddle

        self.paddle = import_paddle()
        if self.gpu:
            self._build_gpu()
        else:
            self._build()

    def _refuse_collectives_on_gpu(self) -> None:
        """The replicas' reduction and `sync_shared` run on the CPU transport only (between its jobs, in Python):
        on the GPU path, whose executor runs the whole plan, they would be skipped and the replicas step apart."""
        what = []
        if self.layout.dp > 1:
            what.append(f"--dp {self.layout.dp}")
        if self.program.shared:
            what.append(f"the parameter `{sorted(self.program.shared)[0]}` shared by several stages")
        if what:
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E007",
                        f"{' and '.join(what)}: the GPU path has no collective jobs yet",
                        help="train on the CPU transport (a CPU build of paddle), or with --dp 1 and untied weights",
                    )
                ]
            )

    def _build_program(self, p2p=None) -> None:
        """What both transports share: the model's program, this rank's plan, and which parameters are its own."""
        from ppdsl.runtime.plan import build_plan
        from ppdsl.runtime.program import build_training_program

        spec, plan = self.spec, self.plan
        self.model = load_bound_model(spec)  # its code from the bytes the launcher checked
        config = self.config
        self.mb_size = config.batch_size // (plan.microbatches * self.layout.dp)
        self.rows = self.layout.rows(self.replica, config.batch_size)  # this replica's share of the global batch
        self.program = build_training_program(
            self.paddle,
            self.model,
            micro_batch_size=self.mb_size,
            num_stages=plan.nstages,
            microbatches=plan.microbatches,
            lr=config.lr,
            optimizer=config.optimizer,
            seed=config.seed,
            partition=plan.partition,
        )
        self.built = build_plan(self.program.main, self.program.startup, plan, rank=self.stage_rank, p2p=p2p)
        my_stages = set(plan.stage_of[self.stage_rank])
        self.my_params = sorted(n for n, s in self.program.param_stage.items() if s in my_stages)

    def _build(self) -> None:
        from ppdsl.runtime.cluster import Transport, communication_plan

        paddle, plan = self.paddle, self.plan
        self._build_program()
        from ppdsl.runtime.memory_jobs import program_io

        memory_io = {
            key: program_io(self.built.programs[name])
            for name, key in self.built.keys.items()
            if key.type in self.built.memory_jobs
        }
        all_jobs, channels = communication_plan(plan, self.built.flow, memory_io)
        self.jobs = all_jobs[self.stage_rank]
        incoming = [m for (_, dst), msgs in channels.items() if dst == self.stage_rank for m in msgs]
        self.producer = {item: m for m in incoming for item in m.items}  # (value, mb) -> its message
        # instrumentation (rank<r>.json `timing`): each tensor's gloo call per link, when each was handed to the
        # sender thread, and per job: start, inputs ready, program run start and end
        self.wire: dict[str, list] = {}
        self.handed: dict[str, list[float]] = {}
        self.timeline: list[list[tuple[float, ...]]] = []
        self.held_peak = 0
        # the transport speaks the plan's ranks: a link's group is named by the pipeline ranks of its two ends
        timed = {d: _TimedGroup(g, d, self.wire, ranks=sorted(d)) for d, g in self.groups.items()}
        self.transport = Transport(self.stage_rank, timed, channels, self.built.flow.shapes, self.request.comm_timeout)
        name_of = {k: n for n, k in self.built.keys.items()}
        self.programs = {}
        for job in self.jobs:
            if job.key in self.programs:
                continue
            program = self.built.programs[name_of[job.key]]
            outputs = {
                op.attrs()["output_name"]: op.operand_source(0)
                for op in program.global_block().ops
                if op.name() == "builtin.shadow_output"
            }
            data_ops = [op.attrs()["name"] for op in program.global_block().ops if op.name() == "pd_op.data"]
            self.programs[job.key] = (name_of[job.key], program, outputs, data_ops)
        place = self.place = paddle.CPUPlace()
        self.root = paddle.static.Scope()
        self.exe = paddle.static.Executor(place)
        self.program.run_startup(paddle, self.root, place)
        self.executors: dict[tuple, object] = {}
        self.first_step = self._resume()
        self.mb_scopes = [self.root.new_scope() for _ in range(plan.microbatches)]
        self.reduction = self._gradient_reduction()
        self.shared_sync = self._shared_sync()

    def _shared_sync(self):
        """This rank's part of `sync_shared` (ppdsl/runtime/shared.py), refused (E095) when a rank holding a shared
        parameter has no `sync_shared` job; None when the model shares nothing across stages. The gloo groups of
        the holder ranks are made here, by every rank in the same order (it built the same program), in dynamic
        mode as every group is, for each replica."""
        program, paddle = self.program, self.paddle
        if not program.shared:
            return None
        from ppdsl.runtime.program import MERGE_SUFFIX
        from ppdsl.runtime.shared import SharedSync, check_sync_places, holders

        check_sync_places(self.plan, program.shared, program.param_stage)
        rank_of_stage = [r for r, _ in self.plan.rank_of_stage()]
        by_holders: dict[tuple[int, ...], list[list[str]]] = {}
        for _, copies in sorted(program.shared.items()):
            by_holders.setdefault(tuple(holders(copies, program.param_stage, rank_of_stage)), []).append(copies)
        mine = set(self.plan.stage_of[self.stage_rank])
        sets = []
        for ranks, params in by_holders.items():
            group = None
            if len(ranks) > 1:
                paddle.disable_static()
                try:
                    for replica in range(self.layout.dp):
                        made = paddle.distributed.new_group([self.layout.process(replica, r) for r in ranks])
                        paddle.distributed.barrier()
                        if replica == self.replica:
                            group = made
                finally:
                    paddle.enable_static()
            if self.stage_rank in ranks:
                local = [[c + MERGE_SUFFIX for c in copies if program.param_stage[c] in mine] for copies in params]
                sets.append((local, group))
        return SharedSync(paddle, self.root, self.place, sets) if sets else None

    def _gradient_reduction(self):
        """The all-reduce over this rank's replicas, and where it runs (`reduction_points`: at each `reduce_grads`
        job its chunk's accumulators, the rest before the optimizer); None: one replica, nothing to reduce."""
        if self.replica_group is None:
            return None
        from ppdsl.runtime.program import MERGE_SUFFIX
        from ppdsl.runtime.replicas import GradientReduction, reduction_points

        points = reduction_points(
            [job.key for job in self.jobs], self.program.param_stage, self.plan.stage_of[self.stage_rank]
        )
        self.reduced = {key: [n + MERGE_SUFFIX for n in names] for key, names in points.items()}
        return GradientReduction(self.paddle, self.replica_group, self.root, self.place)

    def _state_names(self) -> dict[str, str]:
        """Canonical name -> variable of what a checkpoint holds (checkpoint.state_variables: never the learning
        rate)."""
        from ppdsl.runtime.checkpoint import state_variables

        return state_variables(self.program.startup, self.program.param_stage)

    def _resume(self) -> int:
        """Load this rank's checkpoint, which the command line chose and checked (`resume_files`: the newest step
        every rank saved); the step to start at. It is read and checked again here (whole, finite, of this run, at
        the step chosen), for the file may have changed since."""
        from ppdsl.runtime.checkpoint import read_checkpoint, restore_state

        self.last_saved, self.saved = None, set()
        files = self.spec.resume_files
        if not files:
            return 0
        if self.rank not in files:
            raise DiagnosticError([Diagnostic("E062", f"the launch names no checkpoint for rank {self.rank}")])
        path, step = files[self.rank], self.spec.resume_step
        checkpoint = read_checkpoint(path, self._identity())
        if checkpoint.step != step:
            raise DiagnosticError(
                [Diagnostic("E062", f"checkpoint `{path}` is at step {checkpoint.step}, the other ranks' at {step}")]
            )
        restore_state(self.root, self.place, self._state_names(), checkpoint.arrays, path)
        self.last_saved = step  # kept until this rank's next save is written (see save)
        return step

    def _identity(self) -> dict:
        from ppdsl.runtime.checkpoint import run_identity

        return run_identity(self.plan, self.model.name, self.config, self.layout.dp)

    def save(self, step: int) -> None:
        """This rank's whole state after `step` steps, written atomically as its own file of that step; then its
        files of older steps but the one before are deleted. No rank finishes step N + 1 before every other rank has
        saved step N, so the newest step all ranks saved survives this rank being killed at any moment."""
        from ppdsl.runtime.checkpoint import prune_rank_checkpoints, rank_checkpoint_name, write_checkpoint

        directory = self.request.save_dir
        directory.mkdir(parents=True, exist_ok=True)
        state = {key: np.array(self.root.find_var(n).get_tensor()) for key, n in self._state_names().items()}
        write_checkpoint(
            directory / rank_checkpoint_name(step, self.rank), step, self._identity(), state, rank=self.rank
        )
        prune_rank_checkpoints(directory, self.rank, {step} | ({self.last_saved} - {None}))
        self.last_saved = step
        self.saved.add(step)

    def _build_gpu(self) -> None:
        """Each rank's own plan, with send_v2 / recv_v2 on the links' NCCL rings, on the standalone executor.

        Written and checked structurally (tests/runtime/test_p2p.py builds the same plans on CPU); not run here, for
        this machine has no GPU.
        """
        from ppdsl.runtime.p2p import Link

        paddle = self.paddle
        self._build_program(p2p={(s, d): Link(s, d, g.id, (min(s, d), max(s, d))) for (s, d), g in self.groups.items()})
        self._refuse_collectives_on_gpu()
        place = self.place = paddle.CUDAPlace(paddle.distributed.ParallelEnv().dev_id)
        self.root = paddle.static.Scope()
        self.program.run_startup(paddle, self.root, place)
        self.first_step = self._resume()
        self.exe = paddle.static.Executor(place)
        self.exe._set_plan(self.built.plan)
        self.feeds = {
            op.attrs()["name"]
            for program in self.built.programs.values()
            for op in program.global_block().ops
            if op.name() == "pd_op.data"
        }
        self.transport = None
        # the per-job instrumentation belongs to the CPU transport; the executor runs the whole plan here
        self.jobs, self.timeline, self.wire, self.handed = [], [], {}, {}
        self.held_peak = 0

    def _step_gpu(self, step: int) -> list[float]:
        batch = {k: v for k, v in self.batch(step).items() if k in self.feeds}
        fetch = [self.built.loss_value] if self.built.loss_value is not None else []
        with self.paddle.static.scope_guard(self.root):
            out = self.exe.run(self.program.main, feed=batch, fetch_list=fetch)
        return [float(x) for x in np.asarray(out[0]).reshape(-1)] if fetch else []

    def _executor(self, job) -> object:
        """One executor per (job program, micro-batch scope): an executor caches the interpreters of its last 8
        (program, scope) pairs only, and a rank cycles through more, so one shared executor rebuilt an
        interpreter for nearly every job (measured: forward jobs 8x, the optimizer 30-50x slower)."""
        key = (job.key, job.mb)
        exe = self.executors.get(key)
        if exe is None:
            exe = self.executors[key] = self.paddle.static.Executor(self.place)
        return exe

    def batch(self, step: int) -> dict[str, np.ndarray]:
        from ppdsl.runtime.model import synthetic_batch

        config = self.config
        if self.model.make_batch is not None:
            return self.model.make_batch(step, config.batch_size, config.seed)
        return synthetic_batch(self.program.inputs, config.batch_size, step, config.seed)

    def step(self, step: int) -> list[float]:
        if self.gpu:
            return self._step_gpu(step)
        batch = self.batch(step)
        size = self.mb_size
        stash: dict[tuple[str, int], np.ndarray] = {}
        losses: dict[int, float] = {}
        fail = self.spec.fail
        self.transport.start_step()
        marks = []
        self.timeline.append(marks)
        for job in self.jobs:
            t_start = time.perf_counter()
            if fail is not None and (fail.rank, fail.step, fail.job) == (self.rank, step, job.step):
                _inject_failure(fail.mode, job.label)
            name, program, outputs, data_ops = self.programs[job.key]
            scope = self.root if job.key.per_rank else self.mb_scopes[job.mb]
            start = self.rows.start + job.mb * size
            rows = slice(start, start + size)
            for value in job.reads:
                arr = stash.get((value, job.mb))
                if arr is None:
                    arr = self.transport.take(value, job.mb, job, self.producer.get((value, job.mb)))
                    stash[(value, job.mb)] = arr
                scope.var(value).get_tensor().set(arr, self.place)
            t_ready = time.perf_counter()
            for value in job.data:
                scope.var(value).get_tensor().set(np.ascontiguousarray(batch[value][rows]), self.place)
            feed = {d: batch[d][rows] for d in data_ops if d in batch}  # others (the learning rate) live in the scope
            fetch_names = [n for n in job.publishes if n in outputs]
            fetch = [outputs[n] for n in fetch_names]
            loss_here = name == self.built.loss_program
            if loss_here:
                fetch.append(self.built.loss_value)
            if self.shared_sync is not None and job.key.type == SYNC_SHARED_NAME:
                self.shared_sync.sync()  # the shared parameters' gradient, whole on every copy
            if self.reduction is not None and job.key in self.reduced:
                self.reduction.reduce(self.reduced[job.key])  # the mean gradient over the replicas
            t_run = time.perf_counter()
            outs = self._executor(job).run(program, feed=feed, fetch_list=fetch, scope=scope)
            t_ran = time.perf_counter()
            for n, arr in zip(fetch_names, outs, strict=False):
                stash[(n, job.mb)] = np.asarray(arr)
            if loss_here:
                losses[job.mb] = float(np.asarray(outs[-1]))
            for msg in job.sends:
                self.handed.setdefault(f"{msg.src}->{msg.dst}", []).extend([time.perf_counter()] * len(msg.items))
                self.transport.send(msg, [stash[item] for item in msg.items])
            marks.append((t_start, t_ready, t_run, t_ran, time.perf_counter()))
            if step == self.request.steps - 1:  # the last step's job boundaries: what the scopes hold
                self.held_peak = max(self.held_peak, scope_bytes(self.mb_scopes))
        return [losses[mb] for mb in sorted(losses)]

    def _learning_rate(self) -> float:
        """What this rank's optimizer trained with (its scope's variable), for the run's summary."""
        from ppdsl.runtime.checkpoint import learning_rate_in, startup_state_names

        names = startup_state_names(self.program.startup)
        return learning_rate_in(self.root, names, self.program.param_stage, self.config.lr)

    def _own_parameters(self) -> dict[str, np.ndarray]:
        """The parameters this rank trains (of its stages): what it checks after every step, and reports."""
        return {n: np.array(self.root.find_var(n).get_tensor()) for n in self.my_params}

    def train(self, on_step=None) -> None:
        """Train until `steps` steps in all: a resumed run does what the checkpoint has not. `on_step(step)` is
        called as each step starts (the guard records it: the step a rank died at). A loss or parameter of this
        rank's that goes NaN or infinite stops it (E060) before that state is saved."""
        from ppdsl.runtime.checkpoint import check_finite

        steps, losses, times = self.request.steps, [], []
        every, save_dir = self.request.save_every, self.request.save_dir
        for step in range(self.first_step, steps):
            if on_step is not None:
                on_step(step)
            t0 = time.perf_counter()
            step_losses = self.step(step)
            times.append(time.perf_counter() - t0)
            check_finite(step + 1, step_losses, self._own_parameters(), steps, where=f" on rank {self.rank}")
            if step_losses:
                losses.append(step_losses)
            if save_dir and every and (step + 1) % every == 0:
                self.save(step + 1)
        if save_dir and max(steps, self.first_step) not in self.saved:  # a step saved twice would drop the one before
            self.save(max(steps, self.first_step))
        if self.transport is not None:
            self.transport.close()
        _save_npz(self.run_dir / f"rank{self.rank}.npz", self._own_parameters())
        report = {
            "rank": self.rank,
            "replica": self.replica,
            "pipeline_rank": self.stage_rank,
            "stages": list(self.plan.stage_of[self.stage_rank]),
            # the replicas' gradient all-reduce: seconds this rank spent blocked in it (0 with one replica)
            "reduce_seconds": self.reduction.seconds if self.reduction else 0.0,
            "sync_shared_seconds": self.shared_sync.seconds if self.shared_sync else 0.0,
            # each call of those collectives: (start, end, bytes), perf_counter seconds as `timing`
            "collectives": {
                "reduce_grads": self.reduction.log if self.reduction else [],
                "sync_shared": self.shared_sync.log if self.shared_sync else [],
            },
            "learning_rate": self._learning_rate(),
            "losses": losses or None,
            "step_seconds": times,
            "comm_seconds": self.transport.comm_seconds if self.transport else 0.0,
            "bytes_sent": self.transport.bytes_sent if self.transport else 0,
            "jobs": len(self.jobs),
            # the most the micro-batch scopes held at a job boundary of the last step (held.scope_bytes)
            "held_peak_bytes": self.held_peak,
            # instrumentation, perf_counter seconds (one clock for all processes of a machine): per step, per job
            # (start, inputs ready, run start, run end, end); per link "src->dst", per tensor: gloo send / recv
            # (start, end, bytes) as this rank saw it, and when this rank handed each tensor to its sender thread
            "timing": {
                "labels": [j.label for j in self.jobs],
                "jobs": self.timeline,
                "wire": self.wire,
                "handed": self.handed,
            },
        }
        write_atomic(self.run_dir / f"rank{self.rank}.json", json.dumps(report))


def _inject_failure(mode: str, label: str) -> None:
    """The testing hook PPDSL_INJECT_FAILURE (parsed by `ppdsl run`): fail the way a real rank can."""
    if mode == "hang":
        time.sleep(3600)
    if mode == "exit":  # leaves without a word, as a crash in native code or a sys.exit in a model would
        os._exit(3)
    if mode == "kill":  # as the OOM killer or `kill -9` would
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"failure injected before `{label}`")


def _drop_script_folder() -> None:
    """Run as a script, this folder (ppdsl/runtime) is first on sys.path, where its `profile.py` shadows the
    standard library's: take it off before paddle is imported. ppdsl is on PYTHONPATH (`rank_environment`)."""
    here = Path(__file__).resolve().parent
    if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == here:
        del sys.path[0]


def main(argv: list[str]) -> int:
    _drop_script_folder()
    from ppdsl.runtime.lifeline import worker_setup

    progress = worker_setup()  # first: a rank whose guard is gone must not start training
    run_dir = Path(argv[0]).parent  # the launch's directory, until its spec says it (they are one)
    rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    try:
        # the launch's own small spec, checked against the digest its launcher passed; the plan is read by load_plan
        spec = read_launch_spec(argv[0], argv[1] if len(argv) > 1 else None)
        run_dir = Path(spec.launch_dir)
        process = RankProcess(spec, on_ready=progress.ready)
        rank = process.rank
        process.train(on_step=progress.step)
    except BaseException as err:  # report which rank failed and why, then let the launcher stop the rest
        message = f"rank {rank} failed: {type(err).__name__}: {err}"
        if isinstance(err, DiagnosticError):  # an input or training error ppdsl diagnosed: its words alone
            message = f"rank {rank} failed: " + "; ".join(f"[{d.code}] {d.message}" for d in err.diagnostics)
            # and the diagnostics themselves, which the launcher reports as they are (written before the error
            # file, whose presence is what the launcher looks for)
            write_atomic(run_dir / f"rank{rank}.diagnostics.json", to_json(err.diagnostics))
        write_atomic(run_dir / f"rank{rank}.error", message + "\n\n" + traceback.format_exc())
        print(f"ppdsl: {message}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
