"""Data parallelism over processes: `dp` replicas of one `pp`-rank pipeline, and the gradient all-reduce between
them.

Ranks are laid out as Paddle's hybrid topology lays them (fleet's `HybridCommunicateGroup`, axes in the order
dp, pp): the pipeline is the inner axis, so process `g` is pipeline rank `g % pp` of replica `g // pp`, and each
replica's pipeline is `pp` consecutive processes (one node can hold a whole pipeline). Megatron's default order
puts data parallelism inside the pipeline axis instead; nothing here depends on which, but the files, the
failure hook and `--dry-run` all name processes by this one rule (`RankLayout`).

The step of `--dp D -m M` is the step of `--dp 1 -m D*M`: the global batch is cut into D*M equal micro-batches,
replica `r` trains micro-batches `r*M .. r*M + M - 1` (rows `r*B/D .. (r+1)*B/D`), and every accumulator
`<param>@GRAD@MERGE` is summed over the rank's replicas and divided by D, at the schedule's `reduce_grads` job of
its chunk, or (no such job) right before the rank's optimizer (`reduction_points`). The optimizer divides by M, so
it steps on the mean over all D*M micro-batches, as one replica would.

No paddle import at module level: `RankLayout` is read by the launcher (`--dry-run`) too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class RankLayout:
    """Where each process of a `pp` x `dp` job sits: (replica, pipeline rank), replica the outer axis."""

    pp: int
    dp: int = 1

    @property
    def world(self) -> int:
        return self.pp * self.dp

    def process(self, replica: int, rank: int) -> int:
        return replica * self.pp + rank

    def replica_of(self, process: int) -> int:
        return process // self.pp

    def rank_of(self, process: int) -> int:
        """The pipeline rank (the plan's rank) of a process."""
        return process % self.pp

    def replica_group(self, rank: int) -> list[int]:
        """The processes holding pipeline rank `rank` in every replica: the group its gradients are reduced over."""
        return [self.process(r, rank) for r in range(self.dp)]

    def rows(self, replica: int, batch_size: int) -> slice:
        """The rows of the global batch that replica `replica` trains (its micro-batches, consecutive)."""
        share = batch_size // self.dp
        return slice(replica * share, (replica + 1) * share)

    def describe(self, process: int) -> str:
        if self.dp == 1:
            return f"rank {process}"
        return f"rank {process} (replica {self.replica_of(process)}, pipeline rank {self.rank_of(process)})"


@dataclass
class GradientReduction:
    """The all-reduce of one pipeline rank's gradient accumulators over its replicas (`group`, a gloo group of
    `RankLayout.replica_group`), through the dynamic process group while the programs stay static.

    `reduce(names)` sums the named accumulators over the group in one flat buffer (one collective, not one per
    parameter) and writes back the mean over the replicas. Timed: `seconds` is the wall time spent in the
    collective, every call of the run, which is the reduction time the step could not hide (it blocks the rank)."""

    paddle: object
    group: object  # paddle.distributed's Group
    scope: object
    place: object
    seconds: float = 0.0
    calls: int = 0
    log: list[tuple[float, float, int]] = field(default_factory=list)  # (start, end, bytes) per call

    @property
    def size(self) -> int:
        return len(self.group.ranks)

    def reduce(self, names: Iterable[str]) -> None:
        names = list(names)
        if not names or self.size == 1:
            return
        tensors = [self.scope.find_var(n).get_tensor() for n in names]
        arrays = [np.array(t) for t in tensors]
        flat = np.concatenate([a.reshape(-1) for a in arrays]).astype(np.float32, copy=False)
        paddle = self.paddle
        t0 = time.perf_counter()
        # an eager tensor made in static mode segfaults (core.eager.Tensor); a dygraph guard makes it safely
        with paddle.base.dygraph.guard(self.place):
            buffer = paddle.to_tensor(flat)
            self.group.process_group.all_reduce(buffer, paddle.base.core.ReduceOp.SUM, True)
            total = buffer.numpy()
        t1 = time.perf_counter()
        self.seconds += t1 - t0
        self.calls += 1
        self.log.append((t0, t1, flat.nbytes))
        mean = total / self.size
        at = 0
        for tensor, array in zip(tensors, arrays, strict=True):
            part = mean[at : at + array.size].reshape(array.shape).astype(array.dtype, copy=False)
            tensor.set(np.ascontiguousarray(part), self.place)
            at += array.size


def reduction_points(job_keys: Iterable, param_stage: Mapping[str, int], stages: Iterable[int]) -> dict:
    """Where a rank reduces which parameters' gradients over its replicas: {program key: parameter names}.

    At each `reduce_grads` job, the parameters of that job's stage (its chunk); whatever no such job covers (a
    schedule without them, or a chunk it leaves out), all at once right before the rank's optimizer job: the
    gradients must be whole before the step, and the optimizer is the last point where they still can be."""
    from ppdsl.plan.kinds import REDUCE_GRADS_NAME

    mine = sorted(n for n, s in param_stage.items() if s in set(stages))
    points: dict = {}
    covered: set[str] = set()
    optimizer = None
    for key in job_keys:
        if key.type == REDUCE_GRADS_NAME and key not in points:
            points[key] = [n for n in mine if param_stage[n] == key.stage]
            covered.update(points[key])
        elif key.type == "optimizer":
            optimizer = key
    rest = [n for n in mine if n not in covered]
    if rest and optimizer is not None:
        points[optimizer] = rest
    return points
