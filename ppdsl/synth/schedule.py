"""A candidate schedule (every rank's compute jobs in order) and its exact evaluation.

Evaluation runs the checker's own execution model (`ppdsl.analysis.execution.execute`) on the orders packed
into an `Expansion`, so a synthesized schedule's makespan is by construction the one `ppdsl check` reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ppdsl.analysis.execution import execute
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MemoryActions
from ppdsl.plan.jobs import Job
from ppdsl.plan.kinds import ALWAYS, BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OPTIMIZER, kind
from ppdsl.synth.problem import REDUCE_NAME, Problem

COMPUTE = (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W)
# the jobs that add to a chunk's gradients: those a `reduce_grads` follows (its row's `reduces`)
GRADIENTS = tuple(t for t, k in enumerate(ALWAYS) if k.name in kind(REDUCE_NAME).reduces)
# one rank's jobs in order; a plain (type, stage, micro-batch) tuple equals its `Job`, so hot loops build tuples
Order = list[Job]


def last_gradients(jobs: Sequence[tuple[int, ...]]) -> dict[int, int]:
    """stage -> the position of its last gradient job (`GRADIENTS`) among `jobs`, each (type, stage, ...): where a
    stage's `reduce_grads` may start."""
    return {job[1]: i for i, job in enumerate(jobs) if job[0] in GRADIENTS}


@dataclass
class Evaluation:
    makespan: float
    peaks: list[float]  # [rank] peak memory level, in the problem's unit
    feasible: bool  # complete without deadlock and within every rank's memory limit
    deadlock: bool
    start: list[list[float]]  # [rank][step], the compute jobs only (the optimizer is last)
    end: list[list[float]]
    peak_times: list[float] = field(default_factory=list)  # [rank] when its peak is first reached
    host_peak: float = 0.0  # all ranks' offloaded memory at its highest (memory actions only)
    host_peak_time: float = 0.0  # when the host's peak is first reached
    # [rank] the collective time its compute does not overlap (`RankStats.exposed_collective`; dp above 1 only)
    exposed: list[float] = field(default_factory=list)


def with_reductions(problem: Problem, orders: list[Order]) -> list[Order]:
    """The orders with each stage's `reduce_grads` (type `problem.reduce_type`, micro-batch 0) right after the
    stage's last gradient job, the earliest point `check` allows (E094), when the problem reduces (dp above 1);
    else the orders themselves. The search's orders hold compute jobs only: where a reduction goes is decided by
    where they put each chunk's last backward / backward_w. Earliest is also the best point for a given compute
    order: the reduction runs on the collective stream beside the compute (a rank's replicas reach it with the
    rank, so joining never waits), and an earlier start on that stream never ends a later collective later."""
    reduce = problem.reduce_type
    if reduce is None:
        return orders
    out = []
    for order in orders:
        after = {i: s for s, i in last_gradients(order).items()}
        placed: Order = []
        for i, job in enumerate(order):
            placed.append(job)
            if i in after:
                placed.append(Job(reduce, after[i], 0))
        out.append(placed)
    return out


def compute_only(problem: Problem, orders: list[Order]) -> list[Order]:
    """The orders without their reductions (`with_reductions`'s inverse)."""
    reduce = problem.reduce_type
    return orders if reduce is None else [[job for job in order if job[0] != reduce] for order in orders]


class Evaluator:
    """Evaluates orders of one problem: packs them into a reusable `Expansion` and executes it."""

    def __init__(self, problem: Problem):
        if problem.expansion is None:
            raise ValueError("a problem built without its expansion cannot be evaluated")
        self.problem = problem
        self.base: Expansion = problem.expansion
        self.used = {FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W, OPTIMIZER}
        self.calls = 0
        # a problem with memory actions (synth/actions.py) times its recompute / offload / reload jobs too
        self.actions = MemoryActions.of(self.base)
        if self.actions is not None:
            self.used |= set(self.actions.types)
        self.reduce = problem.reduce_type  # at dp above 1: each chunk's reduction, placed by `with_reductions`
        if self.reduce is not None:
            self.used.add(self.reduce)
        codec = self.base.codec
        # a job's code is its micro-batch's stride plus the slot of its (type, chunk) (`JobCodec.stride`)
        self.stride = codec.stride
        self.slot = [[codec.slot(t, c) for c in problem.chunk_of] for t in range(codec.ntypes)]  # [type][stage]
        self.optimizer = codec.pack(OPTIMIZER, 0, 0)

    def pack(self, orders: list[Order]) -> list[list[int]]:
        stride, slot = self.stride, self.slot
        packed = []
        for order in orders:
            codes = [mb * stride + slot[t][s] for t, s, mb in order]
            codes.append(self.optimizer)
            packed.append(codes)
        return packed

    def expansion(self, orders: list[Order]) -> Expansion:
        """The orders as an expansion of the probe schedule (its costs, links and memory)."""
        exp = self.base
        jobs = self.pack(orders)
        return exp.with_orders(jobs, [[0] * len(j) for j in jobs])

    def evaluate(self, orders: list[Order]) -> Evaluation:
        """The orders timed as `check` times them, with the problem's reductions placed (`with_reductions`):
        the makespan then includes them (the optimizer waits for the rank's collectives); `start` / `end` stay
        [rank][step] of the orders' own jobs."""
        self.calls += 1
        placed = with_reductions(self.problem, orders)
        ex = execute(self.expansion(placed), used=self.used)
        start, end = ex.start, ex.end
        if placed is not orders:
            keep = [[i for i, job in enumerate(order) if job[0] != self.reduce] + [len(order)] for order in placed]
            start = [[row[i] for i in k] for row, k in zip(start, keep, strict=True)]
            end = [[row[i] for i in k] for row, k in zip(end, keep, strict=True)]
        peaks = [s.peak_activations for s in ex.ranks]
        within = all(peak <= limit + 1e-9 for peak, limit in zip(peaks, self.problem.limit, strict=True))
        host_peak = ex.host_peak
        host_limit = self.base.host_limit
        within = within and (host_limit is None or host_peak <= host_limit + 1e-9)
        makespan = ex.makespan if ex.completed else float("inf")
        times = [s.peak_time for s in ex.ranks]
        return Evaluation(
            makespan,
            peaks,
            ex.completed and within,
            not ex.completed,
            start,
            end,
            times,
            host_peak,
            ex.host_peak_time,
            [s.exposed_collective or 0.0 for s in ex.ranks] if self.reduce is not None else [],
        )


def preference(problem: Problem, orders: list[Order], ev: Evaluation) -> tuple:
    """Which of two schedules synth writes, smaller first: the one place this is decided. The faster; among
    equally fast ones, the one with the lower peak memory (the highest rank's, then all ranks' together); then the
    simpler: fewer memory-action jobs (recompute, offload, reload), fewer distinct job kinds (types, as the file
    names them), fewer jobs (a whole backward rather than I then W: a shorter order text); then the order itself,
    so that no tie is left to the order candidates were found in. At dp above 1, among equally fast ones first
    the one whose reductions are the less exposed (the highest rank's, then all ranks'): a rank off the critical
    path may leave its reductions in the open at no cost to the makespan, but they keep its replicas' links busy
    and it is what `check` reports. An infeasible schedule comes last."""
    if not ev.feasible:
        return (float("inf"),)
    actions = MemoryActions.of(problem.expansion) if problem.expansion is not None else None
    moves = () if actions is None else actions.types
    kinds = {job[0] for order in orders for job in order}
    return (
        round(ev.makespan, 9),
        round(max(ev.exposed, default=0.0), 9),
        round(sum(ev.exposed), 9),
        round(max(ev.peaks, default=0.0), 9),
        round(sum(ev.peaks), 9),
        sum(job[0] in moves for order in orders for job in order),
        len(kinds),
        sum(len(order) for order in orders),
        [tuple(job) for order in orders for job in order],
    )


def complete(problem: Problem, orders: list[Order]) -> bool:
    """Every rank runs each of its (stage, micro-batch) once forward and once backward (whole, or I then W)."""
    m = problem.microbatches
    for r, order in enumerate(orders):
        seen = set()
        for t, s, mb in order:
            if problem.rank_of[s] != r or not 0 <= mb < m or (t, s, mb) in seen:
                return False
            seen.add((t, s, mb))
        for s in problem.stages_of[r]:
            for mb in range(m):
                whole = (BACKWARD, s, mb) in seen
                split = (BACKWARD_B, s, mb) in seen and (BACKWARD_W, s, mb) in seen
                if (FORWARD, s, mb) not in seen or whole == split:
                    return False
    return True


def total_score(ev: Evaluation) -> tuple[float, float]:
    """The makespan, then the sum of every job's end: what both local searches minimise (the reductions' exposure
    is `preference`'s and `reductions.hide_reductions`' to lower: as a key here it steers the searches off
    faster schedules)."""
    if not ev.feasible:
        return (float("inf"), float("inf"))
    return (round(ev.makespan, 9), round(sum(sum(row) for row in ev.end), 6))
