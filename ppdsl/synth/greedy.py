"""Memory-aware list scheduling: all ranks simulated together, each choosing its next job when it falls idle.

A rank decides at the moment it is free, among the jobs whose input has arrived (never waiting for a job that
may not come): a backward (`I`, or a whole `B`) first, since the gradient chain is the critical path; then a
forward, if its rank has room for it; a deferred weight gradient (`W`) fills what is left, or runs first when a
forward waits for the memory it frees. The knobs of a `Policy` vary this (W before F, deeper chunks first,
reserving memory for a micro-batch's later chunks, a cap on micro-batches in flight); the search tries many.
A planned policy follows a plan instead (a periodic block's times, `periodic`): the ready job planned first
runs, unless it would delay a job planned before it whose input is about to arrive.

Timing is the checker's rule (`ppdsl.analysis.timing`, the same functions `execute` calls): a job starts when
its rank is free and its input has arrived; an output for another rank leaves on the sender's send stream (one
transfer after another) and takes the link time. `ListScheduler.times` gives the times it computed, which equal
`execute`'s for the orders it returns (tests/synth/test_timing_rule.py).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, replace

from ppdsl.analysis.timing import FLOW, Stream, input_stage, output_stage, start_time
from ppdsl.language.jobtypes import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order

EPS = 1e-9
RANK_KNOBS = ("reserve", "inflight", "w_lag")


@dataclass(frozen=True)
class Policy:
    split: bool = True  # backward as I + W (else whole B)
    w_before_f: bool = False  # a pending W outranks a ready forward (else W only fills idle time)
    deep_first: bool = True  # among ready forwards of different chunks, the deeper stage first
    deep_first_b: bool = True  # among ready backwards of different chunks, the deeper stage first
    # Patience: a W that would still run when any input known to be on its way arrives (w_fit), or a forward that
    # would still run when a backward input arrives (f_fit), is not started: the rank waits for that input.
    w_fit: bool = False
    f_fit: bool = False
    # Admitting a new micro-batch on a rank (its first chunk there) must leave room for forwards of later chunks,
    # or the rank can fill up with first-chunk activations while the forwards that lead to their backwards wait:
    # None keeps room for every later-chunk forward of every admitted micro-batch (always safe, often too
    # cautious), k >= 0 keeps room for k of them (tighter, may deadlock; such a policy is then dropped).
    reserve: int | tuple[int | None, ...] | None = None
    inflight: int | tuple[int | None, ...] | None = None  # at most this many micro-batches in flight on a rank
    w_lag: int | tuple[int | None, ...] | None = None  # at most this many deferred W on a rank (0: W right after I)
    seed: int | None = None  # random tie-breaking between equally ranked ready jobs
    # Planned: the job with the best `priority` (a planned order) runs first whatever its kind, and a job does not
    # start when it would still run as the input of a job planned before it arrives.
    planned: bool = False
    # reserve, inflight and w_lag are one value for every rank, or a tuple of one per rank

    def at(self, knob: str, rank: int) -> int | None:
        value = getattr(self, knob)
        return value[rank] if isinstance(value, tuple) else value

    def per_rank(self, pp: int) -> Policy:
        """The same policy with reserve, inflight and w_lag spelled out per rank (for the search to vary)."""
        return replace(self, **{k: tuple(self.at(k, r) for r in range(pp)) for k in RANK_KNOBS})

    def label(self) -> str:
        parts = ["split" if self.split else "whole"]
        parts.append("W>F" if self.w_before_f else "F>W")
        parts.append("deep" if self.deep_first else "shallow")
        if self.deep_first_b != self.deep_first:
            parts.append("deep-B" if self.deep_first_b else "shallow-B")
        if self.w_fit:
            parts.append("W-fits")
        if self.f_fit:
            parts.append("F-fits")
        for knob, text in (("reserve", "reserve {}"), ("inflight", "inflight<={}"), ("w_lag", "w-lag<={}")):
            value = getattr(self, knob)
            if isinstance(value, tuple):
                if any(v is not None for v in value):
                    parts.append(text.format("(" + ",".join("-" if v is None else str(v) for v in value) + ")"))
            elif value is not None:
                parts.append(text.format(value))
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        if self.planned:
            parts.append("planned")
        return " ".join(parts)


def list_schedule(problem: Problem, policy: Policy, priority: dict | None = None) -> list[Order] | None:
    """Every rank's order under `policy`, or None when the policy runs into a memory deadlock.

    `priority` (optional) maps (type, stage, mb) to a number that breaks ties between ready jobs of the same
    rank (higher first) before the policy's own rules: the search's way of steering individual jobs.
    """
    return ListScheduler(problem, policy, priority).run()


class StageState:
    """One stage's progress: the next micro-batch to go forward and backward, the deferred weight gradients, and
    when each micro-batch's inputs arrive (-1: not yet known)."""

    __slots__ = ("f_end", "f_in", "g_in", "index", "last", "next_b", "next_f", "pending_w", "rank")

    def __init__(self, index: int, rank: int, microbatches: int, nstages: int):
        self.index, self.rank = index, rank
        self.last = input_stage(BACKWARD, index, nstages) is None  # no gradient comes: its backward reads its F
        self.next_f = 0  # next micro-batch to go forward
        self.next_b = 0  # next micro-batch to go backward
        self.pending_w: list[int] = []  # micro-batches whose W is deferred, oldest first
        self.f_in = [0.0 if index == 0 else -1.0] * microbatches  # its forward's input (stage 0: from the start)
        self.g_in = [-1.0] * microbatches  # its backward's input gradient
        self.f_end = [-1.0] * microbatches  # its own forwards' ends (the last stage's backward reads them)


class RankState:
    """One rank: when it is free, its send stream, its memory, its order so far and the times of its jobs."""

    __slots__ = (
        "deferred",
        "end",
        "first_stage",
        "free",
        "index",
        "inflight",
        "later",
        "level",
        "limit",
        "max_inflight",
        "need",
        "order",
        "remaining",
        "reserve",
        "reserved",
        "start",
        "stream",
        "w_lag",
    )

    def __init__(self, index: int, problem: Problem, policy: Policy, jobs: int):
        stages, mem = problem.stages_of[index], problem.mem
        self.index = index
        self.limit = problem.limit[index]
        self.reserve, self.max_inflight, self.w_lag = (policy.at(knob, index) for knob in RANK_KNOBS)
        self.free = 0.0
        self.stream = Stream()  # the rank's send stream (the timing rule's)
        self.level = 0.0
        self.reserved = 0.0  # memory promised to the later-chunk forwards of micro-batches already admitted
        self.inflight = 0
        self.deferred = 0
        self.remaining = jobs
        self.first_stage = stages[0]
        self.need = sum(mem[FORWARD][s] for s in stages)  # what a micro-batch's forwards add, all chunks together
        # with `reserve = k`: room kept for k later-chunk forwards when a new micro-batch is admitted
        self.later = max((mem[FORWARD][s] for s in stages[1:]), default=0.0)
        self.order: Order = []
        self.start: list[float] = []
        self.end: list[float] = []

    def run(self, job: tuple[int, int, int], arrival: float, now: float, cost: float) -> float:
        """Start `job` at `now` or when its input arrives (the timing rule); returns its end."""
        start = start_time(now, arrival)
        end = start + cost
        self.free = end
        self.order.append(job)
        self.start.append(start)
        self.end.append(end)
        self.remaining -= 1
        return end

    def admissible(self, s: int, mem_f: float) -> bool:
        """May the rank run the next forward on stage `s` (adding `mem_f`) now, memory- and in-flight-wise?"""
        if s == self.first_stage:  # a new micro-batch on this rank
            cap = self.max_inflight
            if cap is not None and self.inflight >= cap:
                return False
            reserve = self.reserve
            if reserve is None:
                return self.level + self.reserved + self.need <= self.limit + EPS
            return self.level + mem_f + reserve * self.later <= self.limit + EPS
        if self.reserve is None:
            return True  # its memory was reserved when the micro-batch was admitted
        return self.level + mem_f <= self.limit + EPS


class Ready:
    """What a rank could run at one moment: the best ready backward, forward and deferred W (each (key, stage,
    micro-batch), or None), the earliest inputs still on their way, and (planned policies) the jobs whose input
    is coming, as (tie value, arrival)."""

    __slots__ = ("backward", "coming", "forward", "next_b_known", "next_known", "weight")

    def __init__(self) -> None:
        self.backward = self.forward = self.weight = None
        self.next_b_known = float("inf")  # the earliest backward input on its way
        self.next_known = float("inf")  # the earliest input of any kind on its way
        self.coming: list[tuple[float, float]] = []


class ListScheduler:
    """The list scheduler's state (a `RankState` per rank, a `StageState` per stage, and a heap of ranks by the
    time they reconsider) and its steps: what is ready on a rank, which ready job it runs, running it, and
    sending its output on."""

    def __init__(self, problem: Problem, policy: Policy, priority: dict | None = None):
        p = self.problem = problem
        self.policy, self.priority = policy, priority
        self.bwd = BACKWARD_B if policy.split else BACKWARD
        self.rng = random.Random(policy.seed) if policy.seed is not None else None
        m = p.microbatches
        self.stages = [StageState(s, p.rank_of[s], m, p.nstages) for s in range(p.nstages)]
        per_stage = 3 if policy.split else 2
        self.ranks = [RankState(r, p, policy, len(p.stages_of[r]) * m * per_stage) for r in range(p.pp)]
        # [type][stage]: the stage that reads its output (None: none), by the timing rule
        self.reader = [[output_stage(t, s, p.nstages) for s in range(p.nstages)] for t in range(len(p.cost))]

        def by_preference(deep: bool) -> list[list[int]]:
            return [sorted(p.stages_of[r], key=(lambda s: -s) if deep else (lambda s: s)) for r in range(p.pp)]

        self.forward_pref, self.backward_pref = by_preference(policy.deep_first), by_preference(policy.deep_first_b)
        self.heap = [(0.0, r) for r in range(p.pp)]

    # ------------------------------------------------------------------ the loop

    def run(self) -> list[Order] | None:
        """Every rank's order, or None on a memory deadlock."""
        heap, ranks = self.heap, self.ranks
        while heap:
            now, r = heapq.heappop(heap)
            rank = ranks[r]
            if rank.remaining == 0 or now < rank.free - EPS:
                continue  # finished, or an entry from before the rank's last job
            choice, next_known = self.choose(rank, now)
            if choice is None:
                if next_known < float("inf"):
                    heapq.heappush(heap, (next_known, r))
                continue  # else another rank's output will wake it
            end = self.execute(rank, now, *choice)
            if rank.remaining:
                heapq.heappush(heap, (end, r))
        if any(rank.remaining for rank in ranks):
            return None  # a memory deadlock: the policy admitted more than the limit lets finish
        return [rank.order for rank in ranks]

    def times(self) -> tuple[list[list[float]], list[list[float]]]:
        """(start, end) of every rank's jobs as this scheduler timed them, in order."""
        return [rank.start for rank in self.ranks], [rank.end for rank in self.ranks]

    # ------------------------------------------------------------------ choosing

    def tie(self, t: int, s: int, mb: int) -> float:
        value = 0.0
        if self.priority is not None:
            value = -self.priority.get((t, s, mb), 0.0)
        if self.rng is not None:
            value += self.rng.random() * 1e-6
        return value

    def choose(self, rank: RankState, now: float) -> tuple[tuple[int, int, int] | None, float]:
        """The job rank runs at `now` (None: it waits), and the earliest known input still on its way."""
        ready = Ready()
        self.scan_backwards(rank, now, ready)
        self.scan_forwards(rank, now, ready)
        if self.policy.split:
            self.scan_weights(rank, ready)
        return self.pick(rank, now, ready), ready.next_known

    def scan_backwards(self, rank: RankState, now: float, ready: Ready) -> None:
        """The rank's next backward per stage: the best one whose input has arrived, the earliest still coming."""
        bwd, planned = self.bwd, self.policy.planned
        pref = self.backward_pref[rank.index]
        for s in pref:
            stage = self.stages[s]
            k = stage.next_b
            if k < stage.next_f:
                arrival = stage.f_end[k] if stage.last else stage.g_in[k]
                if arrival >= 0.0:
                    if arrival <= now + EPS:
                        key = (self.tie(bwd, s, k), pref.index(s))
                        if ready.backward is None or key < ready.backward[0]:
                            ready.backward = (key, s, k)
                    else:
                        if arrival < ready.next_b_known:
                            ready.next_b_known = arrival
                        if planned:
                            ready.coming.append((self.tie(bwd, s, k), arrival))
        ready.next_known = ready.next_b_known

    def scan_forwards(self, rank: RankState, now: float, ready: Ready) -> None:
        """The rank's next forward per stage: the best one whose input has arrived and that fits, the earliest
        input still coming."""
        p, planned = self.problem, self.policy.planned
        pref = self.forward_pref[rank.index]
        for s in pref:
            stage = self.stages[s]
            k = stage.next_f
            if k < p.microbatches:
                arrival = stage.f_in[k]
                if arrival >= 0.0:
                    if arrival <= now + EPS:
                        if rank.admissible(s, p.mem[FORWARD][s]):
                            key = (self.tie(FORWARD, s, k), pref.index(s))
                            if ready.forward is None or key < ready.forward[0]:
                                ready.forward = (key, s, k)
                    else:
                        if arrival < ready.next_known:
                            ready.next_known = arrival
                        if planned:
                            ready.coming.append((self.tie(FORWARD, s, k), arrival))

    def scan_weights(self, rank: RankState, ready: Ready) -> None:
        """The rank's oldest deferred weight gradient (ties by the policy's stage preference)."""
        pref = self.forward_pref[rank.index]
        for s in pref:
            pending = self.stages[s].pending_w
            if pending:
                key = (self.tie(BACKWARD_W, s, pending[0]), pending[0], pref.index(s))
                if ready.weight is None or key < ready.weight[0]:
                    ready.weight = (key, s, pending[0])

    def pick(self, rank: RankState, now: float, ready: Ready) -> tuple[int, int, int] | None:
        """The policy's choice among what is ready (None: the rank waits)."""
        policy, bwd, cost = self.policy, self.bwd, self.problem.cost
        ready_b, ready_f, oldest_w = ready.backward, ready.forward, ready.weight
        must_w = rank.w_lag is not None and rank.deferred > rank.w_lag
        choice = None
        if policy.planned and not must_w:
            options = [(x[0][0], kind, x[1], x[2]) for kind, x in ((bwd, ready_b), (FORWARD, ready_f)) if x]
            if oldest_w is not None:
                options.append((oldest_w[0][0], BACKWARD_W, oldest_w[1], oldest_w[2]))
            if options:
                planned, *choice = min(options)
                # not when it would delay a job planned before it whose input is about to arrive
                if any(p_ < planned and now + cost[choice[0]][choice[1]] > a + EPS for p_, a in ready.coming):
                    choice = None
        elif oldest_w is not None and (must_w or (policy.w_before_f and ready_b is None)):
            choice = (BACKWARD_W, oldest_w[1], oldest_w[2])
        elif ready_b is not None:
            choice = (bwd, ready_b[1], ready_b[2])
        elif ready_f is not None:
            choice = (FORWARD, ready_f[1], ready_f[2])
        elif oldest_w is not None:
            choice = (BACKWARD_W, oldest_w[1], oldest_w[2])
        if choice is not None and choice[0] != bwd and not must_w and not policy.planned:
            arrives = ready.next_known if choice[0] == BACKWARD_W else ready.next_b_known
            patient = policy.w_fit if choice[0] == BACKWARD_W else policy.f_fit
            if patient and now + cost[choice[0]][choice[1]] > arrives + EPS:
                choice = None
        return None if choice is None else tuple(choice)

    # ------------------------------------------------------------------ running

    def execute(self, rank: RankState, now: float, t: int, s: int, mb: int) -> float:
        """Run job (t, s, mb) on `rank`, update its memory and its stage, send its output on; returns its end."""
        p, stage, mem_ts = self.problem, self.stages[s], self.problem.mem[t][s]
        arrival = 0.0
        if t == FORWARD:
            arrival = stage.f_in[mb]
        elif t == self.bwd and not stage.last:
            arrival = stage.g_in[mb]
        end = rank.run((t, s, mb), arrival, now, p.cost[t][s])
        if t == FORWARD:
            if s == rank.first_stage:
                rank.inflight += 1
                rank.reserved += rank.need - mem_ts
            else:
                rank.reserved -= mem_ts
            rank.level += mem_ts
            stage.next_f += 1
            stage.f_end[mb] = end
        elif t == self.bwd:
            rank.level += mem_ts
            stage.next_b += 1
            if s == rank.first_stage:
                rank.inflight -= 1
            if self.policy.split:
                stage.pending_w.append(mb)
                rank.deferred += 1
        else:  # BACKWARD_W
            rank.level += mem_ts
            stage.pending_w.pop(0)
            rank.deferred -= 1
        self.send(rank, t, s, mb, end)
        return end

    def send(self, rank: RankState, t: int, s: int, mb: int, end: float) -> None:
        """The output of job (t, s, mb), ended at `end`, on its way to the stage that reads it (the timing rule:
        on the rank's send stream, taking the link time), which wakes that stage's rank."""
        to = self.reader[t][s]
        if to is None:
            return
        arrive = rank.stream.send(end, self.problem.link[t][s])
        target = self.stages[to]
        (target.f_in if FLOW[t] > 0 else target.g_in)[mb] = arrive
        # have that rank reconsider (the input may come earlier than what it waits for)
        free = self.ranks[target.rank].free
        heapq.heappush(self.heap, (free if free > arrive else arrive, target.rank))
