"""In-flight activation memory over time: the one accounting every report draws or checks, and the memory model
measured on a real program that replaces the schedule's own.

A job changes its rank's level by the expansion's `mem_delta` for its (type, rank, chunk): a forward allocates,
a backward frees what its forward allocated, a split backward frees it in two parts (see `ppdsl.analysis.expand`).
The level after a rank's k-th job is the sum of the first k deltas; the checker's peak is the largest of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ppdsl.analysis.expansion import Expansion


@dataclass(frozen=True)
class MemoryModel:
    """The activation table in bytes, measured on a real program (`ppdsl.runtime.memory.model_memory`): what a
    job of each type allocates (positive) or frees (negative) on each stage. A (stage, type) it does not name
    changes nothing (the optimizer, auxiliary jobs)."""

    delta: Mapping[int, Mapping[str, float]]  # stage -> job type name -> bytes
    unit: str = "bytes"

    def table(self, type_names: Sequence[str], stage_of: Sequence[Sequence[int]]) -> list[list[list[float]]]:
        """[type][rank][chunk], the form of `Expansion.mem_delta`."""
        nothing: Mapping[str, float] = {}
        return [
            [[float(self.delta.get(s, nothing).get(name, 0)) for s in row] for row in stage_of] for name in type_names
        ]


# How a memory model is measured for a scenario: on the program as an expansion's orders cut it (which job
# types run, how many stages, the micro-batch size), so `Scenario.expansion` measures first and builds after.
MeasureMemory = Callable[[Expansion], MemoryModel]


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
