"""Lower bounds on the makespan of any schedule of a problem (memory limits aside).

1. A rank's own work, plus the time before its first job can start (the first micro-batch's forwards through
   the stages before it, with their links), plus the time its last job leaves for the ranks after it when that
   job must be a backward (no split backward: the gradient still has to go down to stage 0).
2. The last micro-batch's round trip: the first stage cannot start its forward before it has run the others',
   then the forward chain through every stage and the backward chain back, and its W.
The bound is the larger; a schedule that reaches it is optimal.
"""

from __future__ import annotations

from ppdsl.language.jobtypes import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.problem import Problem


def lower_bound(p: Problem) -> float:
    m, S = p.microbatches, p.nstages
    split_ok = p.split in ("yes", "auto")
    whole_ok = p.split in ("no", "auto")

    def backward_work(s: int) -> float:
        options = []
        if whole_ok:
            options.append(p.cost[BACKWARD][s])
        if split_ok:
            options.append(p.cost[BACKWARD_B][s] + p.cost[BACKWARD_W][s])
        return min(options)

    def gradient_job(s: int) -> float:
        """The shortest job that passes a gradient on from stage s (a whole B, or I)."""
        return min(([p.cost[BACKWARD][s]] if whole_ok else []) + ([p.cost[BACKWARD_B][s]] if split_ok else []))

    def link(t: int, s: int) -> float:
        return max(p.link[t][s], 0.0)

    # when stage s can first start: micro-batch 0's forwards through the stages before it
    head = [0.0] * S
    for s in range(1, S):
        head[s] = head[s - 1] + p.cost[FORWARD][s - 1] + link(FORWARD, s - 1)
    # after a gradient job on stage s ends: the gradient's way down to stage 0 (on other stages)
    tail = [0.0] * S
    for s in range(1, S):
        tail[s] = tail[s - 1] + link(BACKWARD, s) + gradient_job(s - 1)

    best = 0.0
    for r in range(p.pp):
        stages = p.stages_of[r]
        work = sum(m * (p.cost[FORWARD][s] + backward_work(s)) for s in stages)
        start = min(head[s] for s in stages)
        # a rank may end with a W, which sends nothing; without a split its last job is a backward of its lowest
        # stage (a backward of a higher one would still have its micro-batch's lower-stage backward to run here)
        end = 0.0 if split_ok else tail[stages[0]]
        # the rank's optimizer runs while that gradient goes down (a calibrated cost file times it)
        best = max(best, start + work + max(end, p.optimizer_cost[r]))

    # the last micro-batch: stage 0 runs m forwards first, then the chain down, the chain back, and a W
    chain = sum(p.cost[FORWARD][s] for s in range(S)) + sum(link(FORWARD, s) for s in range(S - 1))
    chain += sum(gradient_job(s) for s in range(1, S)) + sum(link(BACKWARD, s) for s in range(1, S))
    chain += backward_work(0)  # stage 0's whole backward, or I and W
    round_trip = (m - 1) * p.cost[FORWARD][0] + chain + p.optimizer_cost[p.rank_of[0]]
    return max(best, round_trip)
