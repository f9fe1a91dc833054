"""Reductions hidden behind the compute (`synth --dp` above 1): a found schedule's weight-gradient jobs moved
earlier so that a chunk's last one, and with it the chunk's `reduce_grads`, comes before the other chunks' last
jobs, and the reduction runs on the collective stream while the rank computes.

A `backward_w` sends nothing, so moving one earlier on its rank (never before its own `backward_b`) changes no
other rank's inputs: only when the jobs it passes start. The pass moves a chunk's trailing W's (of a chunk that is
not the rank's last job's) together to an earlier position, keeping a move when the schedule is preferred
(`preference`: never slower, its reductions less exposed), within a number of evaluations.
"""

from __future__ import annotations

from ppdsl.plan.kinds import BACKWARD_B, BACKWARD_W
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Evaluation, Evaluator, Order, last_gradients, preference

MAX_EVALUATIONS = 1500  # the pass's budget: each is one execution of the whole schedule
MAX_SPAN = 16  # how far before a stage's last W its trailing W's may be moved (positions)


def hide_reductions(
    problem: Problem, evaluator: Evaluator, orders: list[Order], ev: Evaluation
) -> tuple[list[Order], Evaluation]:
    """The orders with W jobs moved earlier where that hides reductions at no cost to the makespan (`orders`
    themselves when nothing helps or nothing is reduced)."""
    if problem.reduce_type is None or not ev.feasible:
        return orders, ev
    best, best_ev, key = orders, ev, preference(problem, orders, ev)
    evaluations = 0
    improved = True
    while improved and evaluations < MAX_EVALUATIONS:
        improved = False
        for r in sorted(range(problem.pp), key=lambda q: -best_ev.exposed[q]):
            for moved in _moves(best[r]):
                trial = [*best[:r], moved, *best[r + 1 :]]
                found = evaluator.evaluate(trial)
                evaluations += 1
                got = preference(problem, trial, found)
                if got < key:
                    best, best_ev, key, improved = trial, found, got, True
                    break
                if evaluations >= MAX_EVALUATIONS:
                    return best, best_ev
    return best, best_ev


def _moves(order: Order) -> list[Order]:
    """The rank's order with the W jobs of one stage (not the one of the rank's last job) that come after a
    position moved, in their order, to that position: each of the last MAX_SPAN positions before the stage's last
    W, furthest first, and never one before its own backward_b."""
    if not order:
        return []
    last_stage = order[-1][1]
    out = []
    for s, i in last_gradients(order).items():
        if s == last_stage or order[i][0] != BACKWARD_W:
            continue
        for j in range(max(0, i - MAX_SPAN), i):
            moved = [k for k in range(j, i + 1) if order[k][0] == BACKWARD_W and order[k][1] == s]
            own = {(BACKWARD_B, s, order[k][2]) for k in moved}
            if any(tuple(job) in own for job in order[j : i + 1]):
                continue  # (a W would go before its own backward_b)
            taken = set(moved)
            rest = [job for k, job in enumerate(order[j:], j) if k not in taken]
            out.append([*order[:j], *(order[k] for k in moved), *rest])
    return out
