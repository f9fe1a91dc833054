"""In-flight activation memory over time: the one accounting every report draws or checks.

A job changes its rank's level by the expansion's `mem_delta` for its (type, rank, chunk): a forward allocates,
a backward frees what its forward allocated, a split backward frees it in two parts (see `ppdsl.analysis.expand`).
The level after a rank's k-th job is the sum of the first k deltas; the checker's peak is the largest of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ppdsl.analysis.expansion import Expansion


def memory_curve(exp: Expansion, rank: int, jobs: Iterable[tuple[int, int, float]]) -> list[tuple[float, float]]:
    """(time, level) after each job that changes the level, from (type index, chunk, end time) of `rank`'s jobs
    in order: a step function starting at (0, 0)."""
    delta = exp.mem_delta
    level, points = 0.0, [(0.0, 0.0)]
    for t, chunk, end in jobs:
        change = delta[t][rank][chunk]
        if change:
            level += change
            points.append((end, level))
    return points
