"""Local improvement of a schedule along its critical path.

The makespan is the end of a chain of jobs: each waited either for the job before it on its rank or for the
input another rank sent it. Only moving jobs on that chain can shorten it: a job just before a chain job on
its rank can go after it (the chain job starts earlier), or a chain job can go before its predecessor. Each
such move is evaluated exactly (the checker's execution model, memory limits included) and kept when it
shortens the schedule, or keeps the makespan and lets the ranks finish earlier on the whole (which opens new
moves). When no move helps, a few random swaps shake the schedule and the search goes on from there; the best
schedule seen is kept.
"""

from __future__ import annotations

import random

from ppdsl.analysis.timing import PRODUCERS, input_stage, reads
from ppdsl.synth.clock import cpu
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Evaluation, Evaluator, Order
from ppdsl.synth.schedule import total_score as score

EPS = 1e-9


def critical_path(problem: Problem, orders: list[Order], ev: Evaluation) -> list[tuple[int, int]]:
    """(rank, step) of the jobs whose chain ends at the makespan, last first."""
    where = {job: (r, i) for r, order in enumerate(orders) for i, job in enumerate(order)}
    r = max(range(problem.pp), key=lambda q: ev.end[q][len(orders[q]) - 1] if orders[q] else 0.0)
    i = len(orders[r]) - 1
    path = []
    while i >= 0:
        path.append((r, i))
        t, s, mb = orders[r][i]
        start = ev.start[r][i]
        before = ev.end[r][i - 1] if i else 0.0
        if start <= before + EPS:
            i -= 1
            continue
        frm = input_stage(t, s, problem.nstages)  # it waited for its input (the timing rule's)
        if frm is None:
            break  # started at time 0
        producer = next(job for job in ((kind, frm, mb) for kind in PRODUCERS[t]) if job in where)
        r, i = where[producer]
    return path


def _depends(first: tuple[int, int, int], second: tuple[int, int, int]) -> bool:
    """Must `first` stay before `second` on their rank (same stage and micro-batch, or the same micro-batch's
    consecutive stages on one rank, or the same job type and stage: micro-batches keep their order)?"""
    t1, s1, m1 = first
    t2, s2, m2 = second
    if t1 == t2 and s1 == s2:
        return True
    if m1 != m2:
        return False
    if s1 == s2:
        return True  # F before I/B, I before W
    return reads(t2, s2, t1, s1)  # the next stage's job on the same rank reads its output


def _moves(path: list[tuple[int, int]], orders: list[Order], reach: int) -> list[tuple[int, int, int]]:
    """(rank, from, to) moves of one job, that may pull a path job earlier."""
    moves = []
    for r, i in path:
        order = orders[r]
        if i == 0:
            continue
        # the job before a chain job goes after it (or further), if it may
        for to in range(i, min(i + reach, len(order) - 1) + 1):
            if not any(_depends(order[i - 1], order[k]) for k in range(i, to + 1)):
                moves.append((r, i - 1, to))
        # the chain job goes before a run of jobs it does not depend on
        for frm in range(i - 1, max(i - reach, 0) - 1, -1):
            if _depends(order[frm], order[i]):
                break
            moves.append((r, i, frm))
    return moves


def _apply(orders: list[Order], move: tuple[int, int, int]) -> list[Order]:
    r, frm, to = move
    order = list(orders[r])
    job = order.pop(frm)
    order.insert(to, job)
    return [order if q == r else o for q, o in enumerate(orders)]


def _kick(orders: list[Order], rng: random.Random, swaps: int) -> list[Order]:
    """A few random swaps of neighbours that do not depend on each other."""
    orders = [list(o) for o in orders]
    for _ in range(swaps):
        r = rng.randrange(len(orders))
        order = orders[r]
        if len(order) < 2:
            continue
        i = rng.randrange(len(order) - 1)
        if not _depends(order[i], order[i + 1]):
            order[i], order[i + 1] = order[i + 1], order[i]
    return orders


def improve(
    evaluator: Evaluator,
    orders: list[Order],
    deadline: float,
    rng: random.Random,
    target: float = 0.0,
    max_evaluations: int = 10**9,
    reach: int = 3,
    kicks: int = 20,
) -> tuple[list[Order], Evaluation]:
    """The best schedule found from `orders` within `max_evaluations`, before `deadline` (`clock.cpu()`, a
    safety net), or on reaching `target`."""
    problem = evaluator.problem
    current, cur_ev = orders, evaluator.evaluate(orders)
    best, best_ev = current, cur_ev
    stale = 0
    stop = evaluator.calls + max_evaluations

    def out() -> bool:
        return evaluator.calls >= stop or cpu() >= deadline

    while not out() and best_ev.makespan > target + EPS and stale <= kicks:
        improved = False
        if cur_ev.feasible:
            path = critical_path(problem, current, cur_ev)
            cur_score = score(cur_ev)
            for move in _moves(path, current, reach):
                if out():
                    break
                candidate = _apply(current, move)
                ev = evaluator.evaluate(candidate)
                if score(ev) < cur_score:
                    current, cur_ev, improved = candidate, ev, True
                    break
        if improved:
            if score(cur_ev) < score(best_ev):
                best, best_ev = current, cur_ev
                stale = 0
            continue
        stale += 1
        current = _kick(best, rng, swaps=1 + rng.randrange(max(2, problem.pp)))
        cur_ev = evaluator.evaluate(current)
    return best, best_ev
