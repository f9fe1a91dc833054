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

Memory actions (a policy with `actions`, on a problem built with them): where a rank's next forward (or a
recompute, or a reload) would go over its limit, the rank does not wait: a held (stage, micro-batch) whose backward
is furthest is offloaded when the copy ends in time and the gap to its backward covers the reload (PipeOffload's
rule), else marked for recompute (its forward keeps only its input from then on). Its `offload` goes into the
order right after its forward (or after the stream's last copy), its `reload` just before the rank's next compute
job when issuing it after that job would end too late for the earliest its gradient can arrive, and a
`recompute` runs just before its backward, when its gradient is on its way or the rank would idle (it fills the
wait, as Mario does). Action jobs are timed by the same rule (`timing.CopyStreams`, rule 6) and every job starts
at `execute`'s time (when its rank is free and its input is there), so the times stay `execute`'s.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, replace

from ppdsl.analysis.memory import MemoryActions
from ppdsl.analysis.timing import FLOW, CopyStreams, Stream, input_stage, output_stage, start_time
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OFFLOAD_NAME, RECOMPUTE_NAME
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order

EPS = 1e-9
INF = float("inf")
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
    # Memory actions it may take (of "recompute", "offload"; the problem must be built with them), and which of
    # the two it takes when both are allowed and an offload would do
    actions: tuple[str, ...] = ()
    prefer: str = OFFLOAD_NAME
    offload_early: bool = False  # offload each forward's activation right after it when the copy stream is free
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
        if self.actions:
            parts.append("+".join(self.actions) + (f" prefer {self.prefer}" if len(self.actions) > 1 else ""))
            if self.offload_early:
                parts.append("offload early")
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

    __slots__ = (
        "action",
        "f_end",
        "f_in",
        "g_in",
        "index",
        "l_end",
        "last",
        "next_b",
        "next_f",
        "o_end",
        "pending_w",
        "rank",
        "recomputed",
    )

    def __init__(self, index: int, rank: int, microbatches: int, nstages: int):
        self.index, self.rank = index, rank
        self.last = input_stage(BACKWARD, index, nstages) is None  # no gradient comes: its backward reads its F
        self.next_f = 0  # next micro-batch to go forward
        self.next_b = 0  # next micro-batch to go backward
        self.pending_w: list[int] = []  # micro-batches whose W is deferred, oldest first
        self.f_in = [0.0 if index == 0 else -1.0] * microbatches  # its forward's input (stage 0: from the start)
        self.g_in = [-1.0] * microbatches  # its backward's input gradient
        self.f_end = [-1.0] * microbatches  # its own forwards' ends (the last stage's backward reads them)
        # memory actions: micro-batch -> the action taken on it, the recomputes run, the copies' ends
        self.action: dict[int, str] = {}
        self.recomputed: set[int] = set()
        self.o_end: dict[int, float] = {}
        self.l_end: dict[int, float] = {}


class RankState:
    """One rank: when it is free, its send stream, its memory, its order so far and the times of its jobs."""

    __slots__ = (
        "copies",
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
        "pending",
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
        # memory actions: the copy stream(s), and the offloads whose copy has not ended, as (end, what it frees);
        # `level` counts what they free already (the level once every copy issued is done)
        self.copies: CopyStreams | None = None
        self.pending: list[tuple[float, float]] = []

    def level_at(self, t: float) -> float:
        """The level at instant `t` (not before the rank is free), offloads still copying counted as held."""
        if not self.pending:
            return self.level
        self.pending = [x for x in self.pending if x[0] > self.free + EPS]
        return self.level + sum(moved for end, moved in self.pending if end > t + EPS)

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

    def admissible(self, s: int, mem_f: float, level: float | None = None) -> bool:
        """May the rank run the next forward on stage `s` (adding `mem_f`) now, memory- and in-flight-wise?"""
        return self.shortfall(s, mem_f, self.level if level is None else level) <= EPS

    def shortfall(self, s: int, mem_f: float, level: float) -> float:
        """How far the next forward on stage `s` would take the rank over its limit from `level` (<= 0: it fits;
        inf: the in-flight cap, which no memory action lifts)."""
        if s == self.first_stage:  # a new micro-batch on this rank
            cap = self.max_inflight
            if cap is not None and self.inflight >= cap:
                return INF
            reserve = self.reserve
            if reserve is None:
                return level + self.reserved + self.need - self.limit
            return level + mem_f + reserve * self.later - self.limit
        if self.reserve is None:
            return -INF  # its memory was reserved when the micro-batch was admitted
        return level + mem_f - self.limit

    def room_kept(self) -> float:
        """What a recompute or a reload must leave free: the memory promised to admitted micro-batches' later
        forwards (reserve None: they run without a check)."""
        return self.reserved if self.reserve is None else 0.0


class Ready:
    """What a rank could run at one moment: the best ready backward, forward and deferred W (each (key, stage,
    micro-batch), or None), the earliest inputs still on their way, and (planned policies) the jobs whose input
    is coming, as (tie value, arrival)."""

    __slots__ = ("backward", "blocked", "coming", "forward", "next_b_known", "next_known", "recompute", "weight")

    def __init__(self) -> None:
        self.backward = self.forward = self.weight = None
        # memory actions: the best recompute to run, (key, stage, mb) with key[0] 0 when its backward's input is
        # on its way (it goes first) and 1 when it only fills idle time; and the best forward that is ready but
        # over the limit, (key, stage, mb, shortfall, the instant it would allocate)
        self.recompute: tuple | None = None
        self.blocked: tuple | None = None
        self.next_b_known = float("inf")  # the earliest backward input on its way
        self.next_known = float("inf")  # the earliest input of any kind on its way
        self.coming: list[tuple[float, float]] = []


class ActionTables:
    """Per stage, what the memory actions cost and move (from the problem's expansion, which has their types)."""

    def __init__(self, problem: Problem, allowed: tuple[str, ...], prefer: str):
        exp = problem.expansion
        types = MemoryActions.of(exp) if exp is not None else None
        if types is None:
            raise ValueError("a policy with memory actions needs a problem built with them (memory_actions=True)")
        self.types = types
        self.recompute, self.offload = RECOMPUTE_NAME in allowed, OFFLOAD_NAME in allowed
        self.prefer_offload = self.offload and (prefer == OFFLOAD_NAME or not self.recompute)

        def row(table: list, t: int) -> list[float]:
            return [table[t][problem.rank_of[s]][problem.chunk_of[s]] for s in range(problem.nstages)]

        self.cost_r, self.cost_o, self.cost_l = (
            row(exp.cost, t) for t in (types.recompute, types.offload, types.reload)
        )
        self.mem_r = row(exp.mem_delta, types.recompute)  # what a recompute rebuilds (its forward keeps the rest)
        self.moved = [-x for x in row(exp.mem_delta, types.offload)]  # what an offload frees
        self.mem_l = row(exp.mem_delta, types.reload)
        self.duplex, self.host_limit = exp.copy_duplex, exp.host_limit


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
        self.acts = ActionTables(p, policy.actions, policy.prefer) if policy.actions else None
        self.taken = 0  # actions taken so far
        self.host: dict[tuple[int, int], list[float]] = {}  # offloaded (stage, mb) -> [copy start, reload end, bytes]
        if self.acts is not None:
            for rank in self.ranks:
                rank.copies = CopyStreams(self.acts.duplex)

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
            if self.acts is not None:
                # a reload goes before the job chosen when after it, it would end too late for its backward
                then = INF if choice is None else now + self.cost_of(*choice)
                taken = self.taken
                if self.issue_reloads(rank, now, then) or self.taken != taken:
                    # what the reloads hold counts now, and a micro-batch acted on to make room for one is no
                    # longer what it was when the choice was made
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
        if self.acts is not None:
            return self.pick_with_actions(rank, now, ready), ready.next_known
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
                if stage.action and k in stage.action:
                    arrival = self.acted_arrival(rank, stage, k, arrival, ready)
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
                        if self.acts is None:
                            fits = rank.admissible(s, p.mem[FORWARD][s])
                        else:  # held from its end, when offloads still copying may have freed their part
                            at = start_time(rank.free, arrival) + p.cost[FORWARD][s]
                            over = rank.shortfall(s, p.mem[FORWARD][s], rank.level_at(at))
                            fits = over <= EPS
                            if not fits and over < INF:
                                key = (self.tie(FORWARD, s, k), pref.index(s))
                                if ready.blocked is None or key < ready.blocked[0]:
                                    ready.blocked = (key, s, k, over, at)
                        if fits:
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
        p, stage = self.problem, self.stages[s]
        acts = self.acts
        if acts is not None:
            now = rank.free  # execute's rule: a job starts when its rank is free and its input is there
            if t == acts.types.recompute:
                end = rank.run((t, s, mb), 0.0, now, acts.cost_r[s])
                rank.level += acts.mem_r[s]
                stage.recomputed.add(mb)
                return end
        mem_ts = p.mem[t][s]
        arrival = 0.0
        if t == FORWARD:
            arrival = stage.f_in[mb]
        elif t == self.bwd:
            if not stage.last:
                arrival = stage.g_in[mb]
            if acts is not None and mb in stage.l_end and stage.l_end[mb] > arrival:
                arrival = stage.l_end[mb]  # an offloaded micro-batch's backward waits for its reload
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
            if self.policy.offload_early and acts is not None and acts.offload and not stage.last:
                # PipeOffload's way: every activation out as soon as it is made, while the copy stream keeps up
                if rank.copies.out.free <= end + EPS:
                    self.offload(rank, s, mb, INF, self.held_before(rank, s, mb))
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

    # ------------------------------------------------------------------ memory actions

    def cost_of(self, t: int, s: int, mb: int) -> float:
        acts = self.acts
        if acts is not None and t == acts.types.recompute:
            return acts.cost_r[s]
        return self.problem.cost[t][s]

    def acted_arrival(self, rank: RankState, stage: StageState, k: int, arrival: float, ready: Ready) -> float:
        """When the backward of (stage, k), which has an action, can start by its input (-1: not yet known): an
        offloaded one waits for its reload (not issued yet: unknown), a recomputed one for its recompute, which is
        then the rank's candidate (due when the backward's input is on its way, else to fill idle time once the
        micro-batch's backwards have begun)."""
        s = stage.index
        if stage.action[k] == OFFLOAD_NAME:
            reloaded = stage.l_end.get(k)
            if reloaded is None or arrival < 0.0:
                return -1.0
            return reloaded if reloaded > arrival else arrival
        if k in stage.recomputed:
            return arrival
        # (not before the micro-batch has reached the last stage: until then its gradient may need a forward of
        # this rank that the recompute's memory would keep out)
        if arrival < 0.0 and self.gradient_bound(s, k) == INF:
            return -1.0
        key = (
            0 if arrival >= 0.0 else 1,
            self.tie(self.acts.types.recompute, s, k),
            self.backward_pref[rank.index].index(s),
        )
        if ready.recompute is None or key < ready.recompute[0]:
            ready.recompute = (key, s, k)
        return -1.0

    def pick_with_actions(self, rank: RankState, now: float, ready: Ready) -> tuple[int, int, int] | None:
        """`pick` for a policy with memory actions: a backward, a recompute whose backward's input is on its way,
        a forward that fits, a deferred W; then, rather than wait, a forward made room for by actions, or a
        recompute that fills the idle time. (The patience knobs do not apply.)"""
        ready_b, ready_f, oldest_w, recompute = ready.backward, ready.forward, ready.weight, ready.recompute
        must_w = rank.w_lag is not None and rank.deferred > rank.w_lag
        if oldest_w is not None and (must_w or (self.policy.w_before_f and ready_b is None)):
            return (BACKWARD_W, oldest_w[1], oldest_w[2])
        if ready_b is not None:
            return (self.bwd, ready_b[1], ready_b[2])
        r_type = self.acts.types.recompute
        if recompute is not None and recompute[0][0] == 0 and self.room_for_recompute(rank, *recompute[1:], True):
            return (r_type, recompute[1], recompute[2])
        if ready_f is not None:
            return (FORWARD, ready_f[1], ready_f[2])
        if oldest_w is not None:
            return (BACKWARD_W, oldest_w[1], oldest_w[2])
        if ready.blocked is not None:
            _, s, k, over, at = ready.blocked
            if self.make_room(rank, over, at):
                return (FORWARD, s, k)
        if recompute is not None and self.room_for_recompute(rank, *recompute[1:], False):
            return (r_type, recompute[1], recompute[2])
        return None

    def room_for_recompute(self, rank: RankState, s: int, mb: int, make: bool) -> bool:
        """Does the recompute of (s, mb) fit (it starts when the rank is free, holds its part from its end), or,
        with `make`, can actions make room for it?"""
        acts = self.acts
        at = rank.free + acts.cost_r[s]
        over = rank.level_at(at) + rank.room_kept() + acts.mem_r[s] - rank.limit
        return over <= EPS or (make and self.make_room(rank, over, at, exclude=(s, mb)))

    def make_room(self, rank: RankState, over: float, at: float, exclude: tuple[int, int] | None = None) -> bool:
        """Free `over` of the rank's memory by instant `at`: of its held (stage, micro-batch)s without an action,
        those whose backward comes last first, each offloaded (policy prefers it, its copy ends by `at`, the gap
        to its backward covers the reload) or else recomputed. False (nothing done) when they cannot free it."""
        acts, p = self.acts, self.problem
        held: list[tuple[int, int]] = []  # (mb, -stage): in about the order their backwards come
        for s in p.stages_of[rank.index]:
            stage = self.stages[s]
            held.extend((mb, -s) for mb in range(stage.next_b, stage.next_f))
        held.sort()
        candidates = [
            key for key in reversed(held) if key[0] not in self.stages[-key[1]].action and (-key[1], key[0]) != exclude
        ]

        def most(s: int) -> float:
            return max(acts.mem_r[s] if acts.recompute else 0.0, acts.moved[s] if acts.offload else 0.0)

        if sum(most(-key[1]) for key in candidates) < over - EPS:
            return False
        saved = 0.0
        for key in candidates:
            if saved >= over - EPS:
                break
            mb, s = key[0], -key[1]
            if acts.prefer_offload and self.offload(rank, s, mb, at, held.index(key)):
                saved += acts.moved[s]
            elif acts.recompute and acts.mem_r[s] > EPS:
                self.stages[s].action[mb] = RECOMPUTE_NAME
                rank.level -= acts.mem_r[s]  # its forward keeps only the rest from its end on
                rank.remaining += 1  # its recompute
                saved += acts.mem_r[s]
                self.taken += 1
        return saved >= over - EPS

    def held_before(self, rank: RankState, s: int, mb: int) -> int:
        """How many of the rank's held (stage, micro-batch)s go backward before (s, mb), about."""
        key = (mb, -s)
        return sum(
            1
            for u in self.problem.stages_of[rank.index]
            for k in range(self.stages[u].next_b, self.stages[u].next_f)
            if (k, -u) < key
        )

    def offload(self, rank: RankState, s: int, mb: int, at: float, ahead: int) -> bool:
        """Offload (s, mb) if its copy, issued right after its forward (or after the stream's last copy, which
        runs first), ends by `at` and leaves the reload time before its backward; returns whether it did."""
        acts, stage = self.acts, self.stages[s]
        offload, reload = acts.types.offload, acts.types.reload
        order, forward = rank.order, (FORWARD, s, mb)
        j = len(order) - 1
        while j >= 0:
            t = order[j][0]
            if order[j] == forward or t == offload or (t == reload and not acts.duplex):
                break
            j -= 1
        at_pos = j + 1
        i = j
        while i >= 0 and acts.types.copies(order[i][0]):
            i -= 1
        reached = rank.end[i] if i >= 0 else 0.0  # the end of the compute job before it: "the rank reaches it"
        ready = max(reached, stage.f_end[mb])
        stream = rank.copies.out
        end = max(ready, stream.free) + acts.cost_o[s]
        if end > at + EPS:
            return False
        # PipeOffload's rule: the gap to its backward covers the copies (each earlier backward about a forward and
        # a backward of the rank away, and never before its input can come)
        comes = max(
            self.gradient_bound(s, mb),
            rank.free + ahead * (self.problem.cost[FORWARD][s] + self.problem.cost[self.bwd][s]),
        )
        if comes - end < acts.cost_l[s] - EPS:
            return False
        moved = acts.moved[s]
        if acts.host_limit is not None:
            start = end - acts.cost_o[s]
            held = sum(x[2] for x in self.host.values() if x[1] > start + EPS)
            if held + moved > acts.host_limit + EPS:
                return False
        leave, arrive = rank.copies.carry(False, ready, acts.cost_o[s])
        order.insert(at_pos, (offload, s, mb))
        rank.start.insert(at_pos, leave)
        rank.end.insert(at_pos, arrive)
        stage.action[mb] = OFFLOAD_NAME
        stage.o_end[mb] = arrive
        rank.level -= moved
        rank.pending.append((arrive, moved))
        self.host[(s, mb)] = [leave, INF, moved]
        self.taken += 1
        return True

    def issue_reloads(self, rank: RankState, now: float, then: float) -> bool:
        """Issue, at the end of the rank's order, the reload of each offloaded micro-batch whose backward is next on
        its stage, when issued after the job ending at `then` it would end after the earliest its backward's input
        can arrive (and it fits, or actions make room for it); returns whether any was issued."""
        acts, issued = self.acts, False
        for s in self.problem.stages_of[rank.index]:
            stage = self.stages[s]
            k = stage.next_b
            if k >= stage.next_f or stage.action.get(k) != OFFLOAD_NAME or k in stage.l_end:
                continue
            comes = self.gradient_bound(s, k)
            if comes == INF:
                continue
            cost, stream, copied = acts.cost_l[s], rank.copies.back, stage.o_end[k]
            if max(then, copied, stream.free) + cost <= comes + EPS:
                continue  # still in time after the next job

            excess = self.reload_excess(rank, s, copied)
            if excess > EPS:
                # on one stream an offload made room with runs before the reload, whose start it frees for;
                # with one per direction it must end by the reload's start
                by = INF if not acts.duplex else max(rank.free, copied, stream.free)
                if not self.make_room(rank, excess, by, (s, k)) or self.reload_excess(rank, s, copied) > EPS:
                    continue  # (an offload that made room may have taken the stream: the reload starts later)
            leave, arrive = rank.copies.carry(True, max(rank.free, copied), cost)
            rank.order.append((acts.types.reload, s, k))
            rank.start.append(leave)
            rank.end.append(arrive)
            rank.level += acts.mem_l[s]  # held from the copy's start
            stage.l_end[k] = arrive
            self.host[(s, k)][1] = arrive
            issued = True
        return issued

    def reload_excess(self, rank: RankState, s: int, copied: float) -> float:
        """How far a reload on stage s issued now (its offload's copy ending at `copied`) takes the rank over its
        limit when its copy starts (<= 0: it fits)."""
        start = max(rank.free, copied, rank.copies.back.free)
        return rank.level_at(start) + rank.room_kept() + self.acts.mem_l[s] - rank.limit

    def gradient_bound(self, s: int, mb: int) -> float:
        """The earliest the input of (s, mb)'s backward can arrive, from what is known now: its arrival when sent,
        else the backwards of the stages after s, each no earlier than its own input and its rank free (inf: the
        micro-batch has not reached the last stage)."""
        p, stages = self.problem, self.stages
        u = s
        while True:
            stage = stages[u]
            known = stage.f_end[mb] if stage.last else stage.g_in[mb]
            if known >= 0.0 or stage.last:
                break
            u += 1
        if known < 0.0:
            return INF
        bwd = self.bwd
        while u > s:  # the backward on u sends to u - 1
            free = self.ranks[p.rank_of[u]].free
            link = p.link[bwd][u]
            known = max(known, free) + p.cost[bwd][u] + (link if link > 0.0 else 0.0)
            u -= 1
        return known
