"""Lower bounds on the makespan of any schedule of a problem.

`lower_bound` (memory limits aside):
1. A rank's own work, plus the time before its first job can start (the first micro-batch's forwards through
   the stages before it, with their links), plus the time its last job leaves for the ranks after it when that
   job must be a backward (no split backward: the gradient still has to go down to stage 0).
2. The last micro-batch's round trip: the first stage cannot start its forward before it has run the others',
   then the forward chain through every stage and the backward chain back, and its W.
At dp above 1 the optimizer also waits for the rank's reductions, and the one of the chunk whose gradient job
ends the rank's work starts after it: rule 1 adds the least of the rank's reductions, rule 2 stage 0's.
The bound is the larger; a schedule that reaches it is optimal.

`memory_lower_bound` adds, per rank, what its memory limit costs it (with or without memory actions):
3. The tail. Let e be the end of the rank's last gradient job (B or I) on its lowest stage, of micro-batch mu.
   Every other job of the rank that ends after e is a W, and after e mu's gradient still goes down to stage 0.
   So the rank ends at e plus the W work X it left for after e, and stage 0 at e plus that chain (`after`);
   e >= start + work - X. Just before e, mu's activation is all held, and so is what each left W frees (actions
   run between a forward and its backward, the checker's S115 / S116), so X is at most the W work whose memory
   fits beside mu's activation (`_tail_room`). Then makespan >= start + work + max(optimizer, after - X).
   (With whole backwards only, X = 0 and this is rule 1's `end`.)
4. The head (ranks of one stage). Before `g0`, the earliest a gradient job can start on the rank (micro-batch
   0's round trip from it), the rank runs only forwards and recomputes, and nothing frees memory but the
   offloads that have ended. Let a forwards have ended at the first instant from g0 on at which no job runs
   over it: then a forward's activation, less what the pending recomputes (each a recompute's memory) and the
   ended offloads (at most as many as the copy stream runs in that time, and as the host limit holds) relieve,
   is within the limit; the rank
   idles for what the a forwards do not fill of the window and runs each of those recomputes later: makespan
   >= start + work + min over a of (recompute cost * recomputes needed + idle), on top of rule 3.
Both hold for every schedule the checker accepts with the problem's tables (the level after every change
within the limit) and `allowed` actions; tests/synth/test_memory_bound.py checks them against the proven optima.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ppdsl.analysis.memory import MemoryActions
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OFFLOAD_NAME, RECOMPUTE_NAME
from ppdsl.synth.problem import Problem, stage_table

LIMIT_SLACK = 1e-9  # the checker's: a level within this of the limit fits (`Evaluator`)
MEMORY_EPS = 1e-9  # memory tables that agree within this are equal


@dataclass
class _Paths:
    """The precedence chains every bound reads: when a stage can first start, and the gradient's way down."""

    problem: Problem

    def __post_init__(self) -> None:
        p, S = self.problem, self.problem.nstages
        self.split_ok = p.split in ("yes", "auto")
        self.whole_ok = p.split in ("no", "auto")
        # when stage s can first start: micro-batch 0's forwards through the stages before it
        self.head = [0.0] * S
        for s in range(1, S):
            self.head[s] = self.head[s - 1] + p.cost[FORWARD][s - 1] + self.link(FORWARD, s - 1)
        # after a gradient job on stage s ends: the gradient's way down to stage 0 (on other stages)
        self.tail = [0.0] * S
        for s in range(1, S):
            self.tail[s] = self.tail[s - 1] + self.link(BACKWARD, s) + self.gradient_job(s - 1)

    def link(self, t: int, s: int) -> float:
        return max(self.problem.link[t][s], 0.0)

    def backward_work(self, s: int) -> float:
        p, options = self.problem, []
        if self.whole_ok:
            options.append(p.cost[BACKWARD][s])
        if self.split_ok:
            options.append(p.cost[BACKWARD_B][s] + p.cost[BACKWARD_W][s])
        return min(options)

    def gradient_job(self, s: int) -> float:
        """The shortest job that passes a gradient on from stage s (a whole B, or I)."""
        p = self.problem
        whole = [p.cost[BACKWARD][s]] if self.whole_ok else []
        return min(whole + ([p.cost[BACKWARD_B][s]] if self.split_ok else []))

    def work(self, r: int) -> float:
        p = self.problem
        return sum(p.microbatches * (p.cost[FORWARD][s] + self.backward_work(s)) for s in p.stages_of[r])

    def start(self, r: int) -> float:
        return min(self.head[s] for s in self.problem.stages_of[r])

    def after(self, s: int) -> float:
        """After a micro-batch's gradient job on stage s ends: its gradient jobs below, with their links, and
        stage 0's whole backward (or I and W). Nothing on stage 0 itself."""
        if s == 0:
            return 0.0
        return self.tail[s] - self.gradient_job(0) + self.backward_work(0)

    def first_gradient(self, s: int) -> float:
        """The earliest a gradient job can start on stage s: micro-batch 0's forwards up to the last stage and
        its gradient jobs back down to s + 1, with their links."""
        p, S = self.problem, self.problem.nstages
        at = self.head[S - 1] + p.cost[FORWARD][S - 1]
        for s2 in range(S - 1, s, -1):
            at += self.gradient_job(s2) + self.link(BACKWARD, s2)
        return at


def lower_bound(p: Problem) -> float:
    m, S = p.microbatches, p.nstages
    paths = _Paths(p)
    best = 0.0
    for r in range(p.pp):
        stages = p.stages_of[r]
        # a rank may end with a W, which sends nothing; without a split its last job is a backward of its lowest
        # stage (a backward of a higher one would still have its micro-batch's lower-stage backward to run here)
        end = 0.0 if paths.split_ok else paths.tail[stages[0]]
        # the rank's optimizer runs while that gradient goes down (a calibrated cost file times it); at dp above 1
        # it waits for the reduction of the chunk whose gradient job ends the rank's work, which starts after it
        last = min((p.reduce[s] for s in stages), default=0.0) if p.reduce else 0.0
        best = max(best, paths.start(r) + paths.work(r) + max(end, last + p.optimizer_cost[r]))

    # the last micro-batch: stage 0 runs m forwards first, then the chain down, the chain back, and a W
    chain = sum(p.cost[FORWARD][s] for s in range(S)) + sum(paths.link(FORWARD, s) for s in range(S - 1))
    chain += sum(paths.gradient_job(s) for s in range(1, S)) + sum(paths.link(BACKWARD, s) for s in range(1, S))
    chain += paths.backward_work(0)  # stage 0's whole backward, or I and W
    reduce = p.reduce[0] if p.reduce else 0.0  # (stage 0's reduction follows its last gradient job)
    round_trip = (m - 1) * p.cost[FORWARD][0] + chain + reduce + p.optimizer_cost[p.rank_of[0]]
    return max(best, round_trip)


@dataclass(frozen=True)
class _Actions:
    """What the allowed actions cost and relieve, per stage (zeros for an action not allowed)."""

    recompute: bool
    offload: bool
    rcost: list[float]
    rmem: list[float]  # what a recompute allocates (its forward allocates the rest)
    ocost: list[float]
    moved: list[float]  # what an offload frees
    back: list[float]  # what a reload allocates

    @classmethod
    def of(cls, p: Problem, allowed: Iterable[str]) -> _Actions:
        types = MemoryActions.of(p.expansion) if p.expansion is not None else None
        allowed = set(allowed) if types is not None else set()
        zeros = [0.0] * p.nstages

        def table(t: int | None, of: str = "cost") -> list[float]:
            return stage_table(p, t, of) if t is not None else zeros

        rec = types.recompute if RECOMPUTE_NAME in allowed else None
        off = types.offload if OFFLOAD_NAME in allowed else None
        rel = types.reload if OFFLOAD_NAME in allowed else None
        return cls(
            rec is not None,
            off is not None,
            table(rec),
            table(rec, "mem_delta"),
            table(off),
            [-x for x in table(off, "mem_delta")],
            table(rel, "mem_delta"),
        )


def memory_lower_bound(p: Problem, allowed: Iterable[str] = ()) -> float:
    """`lower_bound`, raised by what each rank's memory limit forces (rules 3 and 4 of the module doc) for
    schedules that may take the `allowed` memory actions (of "recompute", "offload"; a problem built with them)."""
    paths, acts = _Paths(p), _Actions.of(p, allowed)
    best = lower_bound(p)
    for r in range(p.pp):
        stages = p.stages_of[r]
        room = _tail_room(p, paths, acts, r)
        tail = max(p.optimizer_cost[r], paths.after(min(stages)) - room)
        best = max(best, paths.start(r) + paths.work(r) + _head_cost(p, paths, acts, r) + tail)
    return best


def _consistent(p: Problem, paths: _Paths, acts: _Actions, r: int) -> bool:
    """The memory forms rules 3 and 4 read: every cost positive, a backward frees what its forward allocated
    (a split one in two parts, neither negative), a reload brings back what its offload moved, a recompute
    rebuilds at most the forward's part. Otherwise neither rule is applied."""
    for s in p.stages_of[r]:
        mf = p.mem[FORWARD][s]
        costs = [p.cost[FORWARD][s], paths.gradient_job(s)] + ([p.cost[BACKWARD_W][s]] if paths.split_ok else [])
        costs += [acts.rcost[s]] if acts.recompute else []
        if min(costs) <= 0 or mf < 0:
            return False
        if paths.whole_ok and abs(p.mem[BACKWARD][s] + mf) > MEMORY_EPS:
            return False
        freed_a, freed_b = -p.mem[BACKWARD_B][s], -p.mem[BACKWARD_W][s]
        if paths.split_ok and (abs(freed_a + freed_b - mf) > MEMORY_EPS or min(freed_a, freed_b) < 0):
            return False
        if acts.offload and (abs(acts.moved[s] - acts.back[s]) > MEMORY_EPS or not 0 <= acts.moved[s] <= mf):
            return False
        if acts.recompute and not 0 <= acts.rmem[s] <= mf + MEMORY_EPS:
            return False
    return True


def _tail_room(p: Problem, paths: _Paths, acts: _Actions, r: int) -> float:
    """Rule 3's X: the most W work rank r can leave for after the end of its last gradient job on its lowest
    stage (inf: as much as it has). mu's own W (if split) and, beside mu's activation within the limit, what
    else fits: each other (stage, micro-batch) that left its W holds what W frees. Its holdings are a knapsack:
    exact for a rank of one stage, its fractional relaxation (an upper bound, so the bound stays sound) for
    more."""
    m, stages = p.microbatches, p.stages_of[r]
    if not paths.split_ok:
        return 0.0
    total = sum(m * p.cost[BACKWARD_W][s] for s in stages)
    if p.limit[r] == math.inf or not _consistent(p, paths, acts, r):
        return total
    low = min(stages)
    room = p.limit[r] + LIMIT_SLACK - p.mem[FORWARD][low]  # mu's whole activation is held during its job
    if room < 0:
        return 0.0  # not even one activation fits: no schedule does, and any bound holds
    items = sorted(
        ((p.cost[BACKWARD_W][s], -p.mem[BACKWARD_W][s], m - (s == low)) for s in stages),
        key=lambda item: -math.inf if item[1] <= 0 else -item[0] / item[1],
    )
    left = p.cost[BACKWARD_W][low]  # mu's W
    for cost, held, count in items:
        if held <= 0:
            left += cost * count
            continue
        fits = room / held
        take = min(count, math.floor(fits) if len(stages) == 1 else fits)
        left += cost * take
        room -= held * take
        if room <= 0:
            break
    return min(left, total)


def _head_cost(p: Problem, paths: _Paths, acts: _Actions, r: int) -> float:
    """Rule 4: the idle time and recompute work the limit forces on rank r before its first gradient job can
    start (0 for a rank of more than one stage, or an unlimited one)."""
    stages = p.stages_of[r]
    if len(stages) != 1 or p.limit[r] == math.inf or not _consistent(p, paths, acts, r):
        return 0.0
    (s,) = stages
    mf, fwd, limit = p.mem[FORWARD][s], p.cost[FORWARD][s], p.limit[r] + LIMIT_SLACK
    start, g0 = paths.start(r), paths.first_gradient(s)
    window = g0 - start
    if window <= 0:
        return 0.0
    offloads = 0.0
    if acts.offload:
        # the instant counted is at most a forward (or recompute) past g0; the copy stream runs one offload at a
        # time (or is shared with reloads), and none starts before the rank's first forward has ended
        if acts.ocost[s] <= 0:
            return 0.0
        longest = max(fwd, acts.rcost[s])
        offloads = max(math.floor((window + longest - fwd) / acts.ocost[s] + 1e-9), 0)
        # an activation relieves the rank while its copy is on the host, which holds at most its limit
        host = p.expansion.host_limit
        if host is not None and acts.moved[s] > 0:
            offloads = min(offloads, math.floor((host + LIMIT_SLACK) / acts.moved[s]))
    best = window  # no forward before g0: the rank idles through the window
    for a in range(1, p.microbatches + 1):
        need = a * mf - limit - min(offloads, a) * acts.moved[s]
        recomputes = 0
        if need > 0:
            if not acts.recompute or acts.rmem[s] <= 0:
                continue  # these forwards do not fit
            recomputes = math.ceil(need / acts.rmem[s] - 1e-9)
            if recomputes > a:
                continue
        best = min(best, acts.rcost[s] * recomputes + max(0.0, window - a * fwd))
    return best
