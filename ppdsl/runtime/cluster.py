"""One process per pipeline rank: each runs its own jobs and exchanges activations and gradients with its peers.

Every process builds the same program and reads the same plan specification (`plan.json`, the checked schedule),
so each knows every rank's jobs, which named values each job reads from another rank, their shapes, and hence the
exact sequence of messages on every link. That gives the transport its two rules:

* **sends never wait** (stream-ordered, the semantics `ppdsl check` proves schedules deadlock-free under): a
  sender thread per outgoing link sends in the order the producing rank runs its jobs;
* **receives are in the sender's order**: a receiver thread per incoming link receives exactly that sequence and
  files each tensor under (value, micro-batch); the main thread waits for what its next job reads, with a
  timeout that names the rank, the job and the peer.

On CPU the link is gloo through Paddle's dynamic process groups (static `send_v2`/`recv_v2` have no CPU
kernel): one 2-rank group per direction of each link, created before static mode, every process creating every
group in the same order; tensors cross through `paddle.base.dygraph.guard`. gloo matches messages by a per-group
counter, so one group per direction, each used by one thread on each side, keeps both counters in step.

On GPU the same plan would run on the standalone executor with `send_v2`/`recv_v2` in the job programs and the
schedule's stream rules (not exercised here: this machine has no GPU).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ppdsl.plan.jobs import ProgramKey, program_key
from ppdsl.plan.spec import PlanSpec
from ppdsl.runtime.memory_jobs import ProgramIO
from ppdsl.runtime.split import ValueFlow


class CommTimeout(RuntimeError):
    pass


@dataclass(frozen=True)
class Message:
    """Values one job of `src` hands to `dst`: sent after that job, received in this order."""

    src: int
    dst: int
    job: str  # the producing job's label, for messages
    items: tuple[tuple[str, int], ...]  # (value name, micro-batch)


@dataclass
class RankJob:
    step: int
    label: str
    key: ProgramKey
    mb: int
    reads: list[str]  # values from other jobs (this rank's or a peer's)
    data: list[str]  # inputs the job reads from the batch
    publishes: list[str]  # values it computes that a later job reads
    sends: list[Message] = field(default_factory=list)


def communication_plan(
    spec: PlanSpec, flow: ValueFlow, memory_io: Mapping[ProgramKey, ProgramIO] | None = None
) -> tuple[dict[int, list[RankJob]], dict[tuple, list]]:
    """Every rank's jobs with what they read, publish and send; every link's message sequence.

    `flow` knows the jobs that own ops of the program; a memory action's program is made after the split
    (`memory_jobs.add_memory_programs`), so what it reads and publishes comes in `memory_io` (`memory_jobs.program_io`
    of this rank's memory programs). It reads only values its rank's own jobs compute or receive (the stage input, the
    activations, the host store), so the messages between ranks stay those of `flow`."""
    memory_io = memory_io or {}
    publishes: dict[ProgramKey, set[str]] = defaultdict(set)
    for name, keys in flow.producers.items():
        for k in keys:
            publishes[k].add(name)
    for k, io in memory_io.items():
        publishes[k] |= io.publishes
    jobs: dict[int, list[RankJob]] = {}
    readers: dict[tuple[str, int], set[int]] = defaultdict(set)  # (value, mb) -> ranks that read it
    for r in range(spec.pp):
        out = []
        for step, job in enumerate(spec.orders[r]):
            t, c, mb = job
            key = program_key(spec.job_types[t].name, r, c, spec.stage_of)
            needs = memory_io[key].reads if key in memory_io else flow.needs.get(key, set())
            reads = sorted(n for n in needs if n not in flow.data)
            for n in reads:
                readers[(n, mb)].add(r)
            out.append(RankJob(step, spec.label(job), key, mb, reads, sorted(needs & flow.data), []))
        jobs[r] = out
    channels: dict[tuple[int, int], list[Message]] = defaultdict(list)
    for r, rank_jobs in jobs.items():
        sent: set[tuple[str, int, int]] = set()
        for job in rank_jobs:
            made = sorted(n for n in publishes.get(job.key, ()) if readers.get((n, job.mb)))
            job.publishes = made
            by_dst: dict[int, list[tuple[str, int]]] = defaultdict(list)
            for n in made:
                for d in sorted(readers[(n, job.mb)] - {r}):
                    if (n, job.mb, d) not in sent:
                        sent.add((n, job.mb, d))
                        by_dst[d].append((n, job.mb))
            for d, items in sorted(by_dst.items()):
                msg = Message(r, d, job.label, tuple(items))
                job.sends.append(msg)
                channels[(r, d)].append(msg)
    return jobs, dict(channels)


class Transport:
    """Threads that move tensors between this rank and its peers over gloo, in the plan's order."""

    def __init__(self, rank: int, groups: dict[tuple[int, int], object], channels, shapes, timeout: float):
        self.rank, self.groups, self.shapes, self.timeout = rank, groups, shapes, timeout
        self.received: dict[tuple[str, int], np.ndarray] = {}
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.comm_seconds = 0.0
        self.bytes_sent = 0
        self.outboxes: dict[int, queue.Queue] = {}
        self.threads = []
        self.incoming = {src: msgs for (src, dst), msgs in channels.items() if dst == rank}
        for (src, dst), _ in channels.items():
            if src == rank:
                box: queue.Queue = queue.Queue()
                self.outboxes[dst] = box
                self.threads.append(threading.Thread(target=self._send_loop, args=(dst, box), daemon=True))

    # ------------------------------------------------------------ threads

    def start_step(self) -> None:
        """Start the receivers for one step's messages (senders run for the whole training)."""
        for src, msgs in self.incoming.items():
            t = threading.Thread(target=self._recv_loop, args=(src, msgs), daemon=True)
            t.start()
        for t in self.threads:
            if not t.is_alive():
                t.start()

    def _group(self, src: int, dst: int):
        group = self.groups[(src, dst)]
        return group.process_group, group.ranks.index(dst if src == self.rank else src)

    def _send_loop(self, dst: int, box: queue.Queue) -> None:
        import paddle

        pg, peer = self._group(self.rank, dst)
        place = paddle.CPUPlace()
        try:
            while True:
                arrays = box.get()
                if arrays is None:
                    return
                t0 = time.perf_counter()
                for arr in arrays:
                    with paddle.base.dygraph.guard(place):
                        tensor = paddle.to_tensor(np.ascontiguousarray(arr))
                    pg.send(tensor, peer, True)
                    self.bytes_sent += arr.nbytes
                self.comm_seconds += time.perf_counter() - t0
        except BaseException as err:  # surfaced by the main thread
            self._fail(err)

    def _recv_loop(self, src: int, msgs: list[Message]) -> None:
        import paddle

        pg, peer = self._group(src, self.rank)
        place = paddle.CPUPlace()
        try:
            for msg in msgs:
                for name, mb in msg.items:
                    shape, dtype = self.shapes[name]
                    with paddle.base.dygraph.guard(place):
                        tensor = paddle.to_tensor(np.empty(shape, dtype))
                    pg.recv(tensor, peer, True)
                    with paddle.base.dygraph.guard(place):
                        arr = tensor.numpy()
                    with self.cond:
                        self.received[(name, mb)] = arr
                        self.cond.notify_all()
        except BaseException as err:
            self._fail(err)

    def _fail(self, err: BaseException) -> None:
        with self.cond:
            self.error = err
            self.cond.notify_all()

    # ------------------------------------------------------------ main thread

    def send(self, msg: Message, arrays: list[np.ndarray]) -> None:
        self.outboxes[msg.dst].put(arrays)

    def take(self, name: str, mb: int, job: RankJob, producer: Message | None) -> np.ndarray:
        deadline = time.monotonic() + self.timeout
        with self.cond:
            while (name, mb) not in self.received:
                if self.error is not None:
                    raise RuntimeError(f"rank {self.rank}: communication failed: {self.error}") from self.error
                left = deadline - time.monotonic()
                if left <= 0:
                    peer = f"`{producer.job}` from rank {producer.src}" if producer else "a peer"
                    raise CommTimeout(
                        f"rank {self.rank} waited {self.timeout:g} s in `{job.label}` (step {job.step}) for {peer}"
                    )
                self.cond.wait(min(left, 0.5))
            return self.received.pop((name, mb))

    def close(self) -> None:
        for box in self.outboxes.values():
            box.put(None)
        for t in self.threads:
            if t.ident is not None:  # a resumed run with no step to go never started its senders
                t.join(timeout=self.timeout)
