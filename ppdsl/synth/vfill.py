"""A constructive seed for V shapes: fill the memory in the warm-up, then one micro-batch in for one out.

On a V (two chunks per rank, rank r holding stage r and stage 2pp-1-r), what decides the makespan is how early
the last micro-batch enters: after it, its forwards through every stage and its backwards back still have to
run. The memory limit decides how far ahead a rank's forwards may run of its backwards, and the fastest
schedules use all of it from the start (the structure of ZB-V, V-Half and V-Min in "Pipeline Parallelism with
Controllable Memory", re-derived here from the costs and the limit):

- warm-up: each rank runs forwards only, until it holds `cap` micro-batches on each of its stages; a rank
  holds at most L activations, and a micro-batch's chunk-1 forward on rank r can only follow its chunk-0
  forwards on ranks r..pp-1, so rank r keeps min(r + 1, L / 2) of them for chunk 1 and the rest of L for
  chunk 0 (rank 0 runs L - 1 chunk-0 forwards back to back while the V fills);
- steady state: a backward on a stage runs only while the stage holds its full `cap`, or the rank all but
  `slack` of its caps together (or the stage has no forward left), so backwards and forwards alternate: the
  forward stream that feeds the ranks downstream never stops for a burst of backwards (the wave a
  backward-first list schedule makes); after the warm-up a chunk-0 stage may hold `extra` more (the middle
  ranks of a V need more chunk-0 and fewer chunk-1 activations in the steady state than in the warm-up); a
  deferred W runs when a forward waits for the memory it frees, or when nothing else is ready.

Timing and memory are the list scheduler's (`greedy.ListScheduler`, the checker's timing rule); only the choice
of the next job differs. A stall (every rank waiting for another) loosens `slack` by one until it cannot
stall. A few caps around the closed form, slacks and extras are tried; the search keeps the best and improves it
(local search, CP-SAT windows), which a fill-first start lets reach schedules a backward-first one does not.
"""

from __future__ import annotations

import math

from ppdsl.plan.kinds import BACKWARD_W, FORWARD
from ppdsl.synth.greedy import EPS, ListScheduler, Policy, RankState
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order

Caps = list[dict[int, int]]  # [rank] -> {stage: micro-batches it holds in the steady state}


def applies(problem: Problem) -> bool:
    return problem.placement == "vshape" and problem.vpp == 2 and problem.pp >= 2


def capacity(problem: Problem, rank: int) -> int:
    """How many chunk activations rank `rank` holds at its limit (its largest forward's, to be safe); without
    a limit, as many as a V can use (every micro-batch on both stages)."""
    stages = problem.stages_of[rank]
    unit = max(problem.mem[FORWARD][s] for s in stages)
    limit = problem.limit[rank]
    most = 2 * problem.microbatches
    if unit <= 0 or math.isinf(limit):
        return most
    return min(int(limit / unit + EPS), most)


def closed_form_caps(problem: Problem, shift: int = 0, spare: int = 0) -> Caps | None:
    """The warm-up counts above, chunk 1's moved by `shift` and `spare` activations left unused; None when a
    rank cannot hold one micro-batch on each stage."""
    caps: Caps = []
    m = problem.microbatches
    for r in range(problem.pp):
        total = capacity(problem, r) - spare
        if total < 2:
            return None
        first, second = problem.stages_of[r]  # chunk 0's stage, then chunk 1's (a micro-batch visits them so)
        deep = max(1, min(r + 1 + shift, total // 2, m))
        caps.append({first: max(1, min(total - deep, m)), second: deep})
    return caps


def fill_schedule(problem: Problem, caps: Caps, **knobs) -> list[Order] | None:
    """Every rank's order under the fill-first rule (`FillScheduler`'s knobs), or None when it deadlocks."""
    return FillScheduler(problem, caps, **knobs).run()


def fill_seeds(problem: Problem) -> list[tuple[str, list[Order]]]:
    """(name, orders) of the fill-first schedules for a few caps around the closed form."""
    if not applies(problem):
        return []
    out = []
    seen = set()
    for spare in (0, 1):
        for shift in (0, -1, 1, -2):
            caps = closed_form_caps(problem, shift, spare)
            if caps is None:
                continue
            key = tuple(tuple(sorted(c.items())) for c in caps)
            if key in seen:
                continue
            seen.add(key)
            for slack in (0, 1, 2, 3):
                for extra in (0, 1, 2, 4):
                    orders = fill_schedule(problem, caps, slack=slack, extra=extra)
                    if orders is not None:
                        out.append(
                            (f"V fill-first (shift {shift}, spare {spare}, slack {slack}, extra {extra})", orders)
                        )
    return out


class FillScheduler(ListScheduler):
    """The list scheduler with the fill-first choice (see the module's docstring)."""

    def __init__(self, problem: Problem, caps: Caps, slack: int = 0, extra: int = 0):
        super().__init__(problem, Policy(split=problem.split != "no", reserve=0))
        self.caps = caps
        self.slack = slack  # a backward may run while the rank holds all but `slack` of its caps together
        self.extra = extra  # after its first backward, a chunk-0 stage may hold `extra` more than its cap
        self.total = [sum(c.values()) for c in caps]

    def run(self) -> list[Order] | None:
        """As the list scheduler's, but a stall (every rank waiting for another) loosens the rule for backwards
        by one more micro-batch, until the backward-first rule, which never stalls where the memory fits."""
        while True:
            orders = super().run()
            if orders is not None or self.slack > max(self.total):
                return orders
            self.slack += 1
            self.heap = [(rank.free, r) for r, rank in enumerate(self.ranks) if rank.remaining]

    def choose(self, rank: RankState, now: float) -> tuple[tuple[int, int, int] | None, float]:
        p, m = self.problem, self.problem.microbatches
        caps = self.caps[rank.index]
        next_known = float("inf")
        backward = forward = None
        forward_waits_memory = False
        first = p.stages_of[rank.index][0]
        held_total = sum(self.stages[s].next_f - self.stages[s].next_b for s in p.stages_of[rank.index])
        full = held_total >= self.total[rank.index] - self.slack
        # the deeper stage first (chunk 1 on a V): its forward feeds the rank after it, its backward starts the
        # gradient's way back
        for s in sorted(p.stages_of[rank.index], reverse=True):
            stage = self.stages[s]
            held = stage.next_f - stage.next_b
            k = stage.next_b
            if k < stage.next_f and (full or held >= caps[s] or stage.next_f == m):
                arrival = stage.f_end[k] if stage.last else stage.g_in[k]
                if arrival >= 0.0:
                    if arrival <= now + EPS:
                        if backward is None:
                            backward = (self.bwd, s, k)
                    else:
                        next_known = min(next_known, arrival)
            k = stage.next_f
            grown = self.extra if s == first and stage.next_b > 0 else 0
            if k < m and held < caps[s] + grown:
                arrival = stage.f_in[k]
                if arrival >= 0.0:
                    if arrival <= now + EPS:
                        if rank.level + p.mem[FORWARD][s] <= rank.limit + EPS:
                            if forward is None:
                                forward = (FORWARD, s, k)
                        else:
                            forward_waits_memory = True
                    else:
                        next_known = min(next_known, arrival)
        weight = None
        if self.policy.split:
            oldest = [(self.stages[s].pending_w[0], -s) for s in p.stages_of[rank.index] if self.stages[s].pending_w]
            if oldest:
                mb, s = min(oldest)
                weight = (BACKWARD_W, -s, mb)
        if backward is not None:
            return backward, next_known
        if weight is not None and (forward_waits_memory or forward is None):
            return weight, next_known
        return forward, next_known


# The staircase policies' in-flight caps: rank r at its capacity less `top` less r, but not under half of it plus
# `floor` (the values tried), with room kept for `reserve` later-chunk forwards and backwards deep or shallow first
STAIR_TOPS = (0, 1, 2)
STAIR_FLOORS = (0, 1, 2, 3)


def staircase_caps(problem: Problem, top: int, floor: int) -> tuple[int, ...]:
    """Per rank, the most micro-batches in flight: one fewer on each rank down the V (rank r keeps about r + 1
    activations for chunk 1 in the warm-up, see the module's docstring), down to half the capacity plus `floor`."""
    m = problem.microbatches
    held = [capacity(problem, r) for r in range(problem.pp)]
    return tuple(max(min(held[r] - top - r, m), min(held[r] // 2 + floor, m), 1) for r in range(problem.pp))


def staircase_policies(problem: Problem) -> list[Policy]:
    """List-scheduling policies whose per-rank in-flight caps fall by one from each rank to the next (a
    staircase), for V shapes. The cap on the first ranks keeps them from filling their memory with chunk-0
    activations, so the chunk-1 forwards that come back up the V find room and flow two at a time (V-Half's
    warm-up); the per-rank refinement changes one rank's cap at a time and does not reach such a profile from
    the uncapped policies (every single step is slower)."""
    if not applies(problem):
        return []
    out, seen = [], set()
    for top in STAIR_TOPS:
        for floor in STAIR_FLOORS:
            caps = staircase_caps(problem, top, floor)
            if caps in seen:
                continue
            seen.add(caps)
            for reserve in (0, 1):
                for deep_b in (True, False):
                    out.append(Policy(split=problem.split != "no", deep_first_b=deep_b, reserve=reserve, inflight=caps))
    return out
