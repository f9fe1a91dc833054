"""The search's clocks: what decides a result is counted work, never the wall clock.

Budgets are counted in work: job evaluations, list schedules, CP-SAT's deterministic time, each turned into
"seconds of work" at a fixed rate, so the same inputs give the same schedule, byte for byte, however loaded the
machine is. Each search also has a safety cap, for when the counted work runs far slower than its rate says
(a model CP-SAT builds slowly, a pathological size): that cap is this process's CPU time, not the wall clock, so
other processes' load never reaches it, and a result it cut short says so (`WorkClock.capped`).
"""

from __future__ import annotations

import time
from typing import Protocol

# job evaluations per second of work in the order search (`search.Budget`) and, slower per job because every
# candidate is also materialized with its actions and re-timed, in the actions search (measured at pp 4-8 with
# 100-800 jobs: 90k-140k jobs a second of CPU)
WORK_PER_SECOND = 1.0e6
ACTION_JOBS_PER_SECOND = 1.5e5
# the safety cap: this many times the budget, plus this many seconds, of this process's CPU time
SAFETY_FACTOR, SAFETY_SECONDS = 3.0, 5.0


def cpu() -> float:
    """This process's CPU time (all its threads): what the safety caps are measured in."""
    return time.process_time()


def safety_cap(seconds: float) -> float:
    """The CPU time (`cpu()`) after which a search of `seconds` of work stops whatever its count says."""
    return cpu() + SAFETY_FACTOR * seconds + SAFETY_SECONDS


class Counted(Protocol):
    calls: int


class WorkClock:
    """Seconds of counted work since it was made: the evaluations of the attached evaluators (each worth its
    jobs at `rate` jobs a second) plus what is spent explicitly (CP-SAT's deterministic time, the budgets given
    to order searches). Deadlines are points on it (`now() + share`); `capped()` is the CPU-time safety net."""

    def __init__(self, seconds: float, rate: float = ACTION_JOBS_PER_SECOND):
        self.rate = rate
        self.spent = 0.0
        self.counted: list[tuple[Counted, int, int]] = []  # (evaluator, jobs per call, calls when attached)
        self.cap = safety_cap(seconds)
        self.cap_reached = False

    def attach(self, evaluator: Counted, jobs: int) -> None:
        """Count `evaluator`'s calls from now on, each worth `jobs` job evaluations."""
        self.counted.append((evaluator, jobs, evaluator.calls))

    def spend(self, seconds: float) -> None:
        self.spent += max(seconds, 0.0)

    def now(self) -> float:
        evaluated = sum((e.calls - before) * jobs for e, jobs, before in self.counted)
        return self.spent + evaluated / self.rate

    def past(self, deadline: float) -> bool:
        """Is the counted work past `deadline` (or the safety cap reached)?"""
        return self.now() > deadline or self.capped()

    def capped(self) -> bool:
        if not self.cap_reached and cpu() > self.cap:
            self.cap_reached = True
        return self.cap_reached
