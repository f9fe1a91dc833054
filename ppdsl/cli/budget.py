"""Budgets of the commands whose output or search grows with the sizes: each is refused up front, in well under a
second, when its estimate does not fit, rather than dying of MemoryError minutes later (`trace fthenb --pp 64
-m 16384` reached 7.5 GB in 95 s) or running far past its time limit (`synth --pp 512 -m 512 --time-limit 1`: 65 s).

The estimates are jobs x a cost per job, measured: the slope of peak memory (or time) between two sizes of the
same schedule (fthenb at pp=8, 32,776 and 131,080 jobs), rounded up. Jobs are counted twice: before the schedule
runs, the fewest any schedule needs at the sizes (`least_jobs`, instant), and once expanded, the jobs it has.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from ppdsl.analysis.expand import DEFAULT_MAX_JOBS, least_jobs
from ppdsl.cli.common import diagnosed, fail
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.units import format_bytes, parse_size

DEFAULT_MAX_MEMORY = 2 * 1024**3  # what one of these commands may hold at its peak, unless --max-memory says more
# Peak memory per job of each command's output, measured (see above) and rounded up.
BYTES_PER_JOB = {
    "trace": 4608,  # a Chrome trace: a compute event per job, a send, a receive and an arrow per transfer
    "expand": 1536,  # every job as JSON / CSV text
    "plot": 1536,  # a rectangle per job, and the memory curve
    "show": 1024,  # the rank x step grid
}
# `sweep` checks one schedule at every point: its work is the jobs of all the points together.
SWEEP_MAX_TOTAL_JOBS = 4 * DEFAULT_MAX_JOBS  # about 8 minutes at the checker's ~15 us a job
# `synth` builds its problem, its seeds and their evaluations before the search's clock matters: about 0.3 ms a
# job on a loaded 2-core machine, whatever --time-limit says. A problem fits if that setup fits in the time limit,
# or is at most SYNTH_MAX_JOBS jobs (pp=64, microbatches=512: ~20 s) for short limits.
SYNTH_SECONDS_PER_JOB = 3e-4
SYNTH_MAX_JOBS = 65_536

MaxMemory = Annotated[
    str | None,
    typer.Option(
        "--max-memory",
        help=f"Memory the output may take (e.g. `8GiB`; default {format_bytes(DEFAULT_MAX_MEMORY)}): larger sizes "
        "are refused before anything runs.",
    ),
]
MaxProblem = Annotated[
    int | None,
    typer.Option(
        "--max-problem",
        help=f"Jobs the search may take on (default {SYNTH_MAX_JOBS:,}, or what --time-limit allows at "
        f"{SYNTH_SECONDS_PER_JOB * 1e3:g} ms a job of setup): larger problems are refused before the search.",
        min=1,
    ),
]


def memory_budget(max_memory: str | None) -> int:
    """The bytes `--max-memory` allows (the default without it)."""
    if max_memory is None:
        return DEFAULT_MAX_MEMORY
    size = diagnosed(parse_size, max_memory)
    if not math.isfinite(size) or size <= 0:
        fail([Diagnostic("E007", f"--max-memory must be a positive size, got {max_memory}")])
    return int(size)


def refuse_sizes(command: str, pp: int, vpp: int, microbatches: int, max_memory: str | None) -> None:
    """Before the schedule runs: refuse sizes whose fewest jobs already take more than the memory budget."""
    _refuse_jobs(command, least_jobs(pp, vpp, microbatches), memory_budget(max_memory), "at least ")


def refuse_jobs(command: str, jobs: int, max_memory: str | None) -> None:
    """Once expanded: refuse a schedule whose jobs take more than the memory budget."""
    _refuse_jobs(command, jobs, memory_budget(max_memory), "")


def _refuse_jobs(command: str, jobs: int, budget: int, least: str) -> None:
    per_job = BYTES_PER_JOB[command]
    need = jobs * per_job
    if need <= budget:
        return
    fail(
        [
            Diagnostic(
                "E068",
                f"`{command}` of {least}{jobs:,} jobs needs about {format_bytes(need)} of memory, over its budget of "
                f"{format_bytes(budget)}",
                help=f"choose smaller sizes (at most {budget // per_job:,} jobs at {format_bytes(per_job)} a job), "
                f"or raise the budget with `--max-memory {_size_option(need)}`",
            )
        ]
    )


def refuse_sweep(points: list[tuple[int, int]], vpp: int, max_jobs: int) -> None:
    """Refuse a sweep whose points need more jobs in all than SWEEP_MAX_TOTAL_JOBS (scaled as --max-jobs is)."""
    total = sum(least_jobs(pp, vpp, m) for pp, m in points)
    budget = SWEEP_MAX_TOTAL_JOBS * max(1, max_jobs // DEFAULT_MAX_JOBS)
    if total > budget:
        fail(
            [
                Diagnostic(
                    "E068",
                    f"the sweep's {len(points):,} points need at least {total:,} jobs in all, over its budget of "
                    f"{budget:,}",
                    help="sweep fewer or smaller sizes, or raise the budget with `--max-jobs` (the sweep may take "
                    f"{SWEEP_MAX_TOTAL_JOBS // DEFAULT_MAX_JOBS} times it in all)",
                )
            ]
        )


def refuse_synth(pp: int, vpp: int, microbatches: int, time_limit: float, max_problem: int | None) -> None:
    """Refuse a search whose problem would not be set up within its time limit (or --max-problem)."""
    jobs = least_jobs(pp, vpp, microbatches)
    in_time = int(time_limit / SYNTH_SECONDS_PER_JOB) if math.isfinite(time_limit) else SYNTH_MAX_JOBS
    budget = max_problem if max_problem is not None else max(SYNTH_MAX_JOBS, in_time)
    if jobs <= budget:
        return
    setup = jobs * SYNTH_SECONDS_PER_JOB
    fail(
        [
            Diagnostic(
                "E068",
                f"a search at pp={pp}, vpp={vpp}, microbatches={microbatches} has {jobs:,} jobs, over its budget of "
                f"{budget:,}: setting it up alone takes about {setup:,.0f} s, with --time-limit {time_limit:g} s",
                help=f"search smaller sizes, or raise the budget with `--max-problem {jobs}` (and a --time-limit of "
                f"{math.ceil(setup):,} s or more)",
            )
        ]
    )


def _size_option(n: float) -> str:
    """`n` bytes rounded up to whole GiB (or MiB below one), as --max-memory takes it: `8GiB`."""
    if n >= 1024**3:
        return f"{math.ceil(n / 1024**3)}GiB"
    return f"{math.ceil(n / 1024**2)}MiB"
