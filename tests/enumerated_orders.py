"""Ground truth by enumeration for tiny synth problems: every order of each rank's jobs, timed by the checker's
execution (`synth.schedule.Evaluator`). The tests of `--exact` with actions and of the memory bound compare with it."""

from __future__ import annotations

import itertools


def interleavings(chains: list[list]) -> list[list]:
    """Every order of the chains' jobs that keeps each chain's own order."""
    chains = [c for c in chains if c]
    if not chains:
        return [[]]
    out = []
    for i, chain in enumerate(chains):
        rest = [*chains[:i], chain[1:], *chains[i + 1 :]]
        out.extend([chain[0], *tail] for tail in interleavings(rest))
    return out


def fastest(problem, per_rank: list[list[list]]) -> float:
    """The least makespan of a feasible schedule made of one of `per_rank[r]`'s orders on every rank r (inf: none
    fits). Micro-batches are alike, so relabelling them maps a schedule to one as fast: rank 0 may start with 0."""
    from ppdsl.synth.schedule import Evaluator

    timer = Evaluator(problem)
    first = [order for order in per_rank[0] if order[0][2] == 0]
    best = float("inf")
    for orders in itertools.product(first, *per_rank[1:]):
        ev = timer.evaluate(list(orders))
        if ev.feasible:
            best = min(best, ev.makespan)
    return best
