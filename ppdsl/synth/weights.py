"""Re-placing a schedule's weight gradients: every rank keeps its forwards and input gradients (I) in their
order, and its W's in theirs, but when each W runs is decided again, where it fits.

A W sends nothing: it only takes its rank's time and frees the memory its forward held. So where it goes is a
decision of its rank alone, given when the rank's next forward or I can start: a W that ends before that job's
input arrives costs nothing there, and one that runs while the rank waits for memory lets the job run sooner. A
fixed order (a library schedule, written for uniform costs) places its W's by slots; with other costs or a
link latency they fall where the rank could have started its next job, and the local search, which moves a job
a few places at a time, does not re-place them all. ZB-V's authors' greedy (zbv.py) also puts a W where it fills
the wait for the next input; that is what made it 0.7 faster than the library's ZB-V order at F:B:W 1:1.5:0.7
with latency 0.1 (pp=8, m=16 and 32, at its own peak of 2pp), and the library's order with its W's re-placed
so is as fast as theirs.

The rule (`WeightPlacer.choose`), on a rank that falls idle, with its next forward or I (next in its order):
- it would take the rank over its limit: the next W first (it frees memory);
- its input is there: it runs;
- else the next W runs if it ends by the time the input arrives, or (`fill_unknown`) the input is not on its
  way yet (its producer has not run: the wait is at least as long as that job); else the rank waits.
The next W is the rank's next in its order, once its own I has run. Timing is the list scheduler's (the
checker's rule); the search keeps the result only when the checker times it faster.
"""

from __future__ import annotations

from ppdsl.plan.kinds import BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.greedy import EPS, INF, ListScheduler, Policy, RankState
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order

Job = tuple[int, int, int]


def applies(problem: Problem, orders: list[Order]) -> bool:
    """Only for split backwards and compute jobs (F, I, W): whole backwards have no W to move, and memory actions
    are placed by their own engine."""
    return problem.split != "no" and all(t in (FORWARD, BACKWARD_B, BACKWARD_W) for o in orders for t, _, _ in o)


def place_weights(problem: Problem, orders: list[Order], fill_unknown: bool = True) -> list[Order] | None:
    """The orders with every W re-placed by the rule above, or None when the rule deadlocks (a rank waits for
    memory that only a W it cannot run yet would free)."""
    if not applies(problem, orders):
        return None
    return WeightPlacer(problem, orders, fill_unknown).run()


def placements(problem: Problem, orders: list[Order]) -> list[tuple[str, list[Order]]]:
    """(name, orders) of the re-placements that differ from `orders`: W in every wait, and W only in waits whose
    end is known."""
    out = []
    for fill_unknown, name in ((True, "W re-placed"), (False, "W re-placed in known waits")):
        placed = place_weights(problem, orders, fill_unknown)
        if placed is not None and placed != orders:
            out.append((name, placed))
    return out


class WeightPlacer(ListScheduler):
    """The list scheduler following given orders for forwards and I's, choosing only when the W's run."""

    def __init__(self, problem: Problem, orders: list[Order], fill_unknown: bool):
        super().__init__(problem, Policy(split=True))
        self.skeleton = [[job for job in order if job[0] != BACKWARD_W] for order in orders]
        self.weights = [[job for job in order if job[0] == BACKWARD_W] for order in orders]
        self.next_job = [0] * problem.pp
        self.next_w = [0] * problem.pp
        self.fill_unknown = fill_unknown

    def choose(self, rank: RankState, now: float) -> tuple[Job | None, float]:
        r, p = rank.index, self.problem
        weight = self.ready_weight(r)
        if self.next_job[r] == len(self.skeleton[r]):
            return self.take_weight(r, weight), INF
        t, s, mb = job = self.skeleton[r][self.next_job[r]]
        if rank.level + p.mem[t][s] > rank.limit + EPS:
            return self.take_weight(r, weight), INF  # (None: waits for memory; a deadlock if none comes)
        stage = self.stages[s]
        if t == FORWARD:
            arrival = stage.f_in[mb]
        else:
            arrival = stage.f_end[mb] if stage.last else stage.g_in[mb]
        if 0.0 <= arrival <= now + EPS:
            self.next_job[r] += 1
            return job, INF
        if weight is not None:
            known = arrival >= 0.0
            if (known and now + p.cost[BACKWARD_W][weight[1]] <= arrival + EPS) or (not known and self.fill_unknown):
                return self.take_weight(r, weight), INF
        return None, arrival if arrival >= 0.0 else INF  # (unknown: the producer's send wakes the rank)

    def ready_weight(self, r: int) -> Job | None:
        """The rank's next W in its order, if its I has run."""
        if self.next_w[r] == len(self.weights[r]):
            return None
        job = self.weights[r][self.next_w[r]]
        pending = self.stages[job[1]].pending_w
        return job if pending and pending[0] == job[2] else None

    def execute(self, rank: RankState, now: float, t: int, s: int, mb: int) -> float:
        # a W chosen once the rank has waited (the wait's end became known) still starts where the checker starts
        # it: when the rank is free (it waits for no input); it ends before the job it was chosen to wait for
        return super().execute(rank, rank.free if t == BACKWARD_W else now, t, s, mb)

    def take_weight(self, r: int, weight: Job | None) -> Job | None:
        if weight is not None:
            self.next_w[r] += 1
        return weight
