"""What `ppdsl synth` is asked for (`SynthRequest`), and the request checked and read into a `Problem` (`build`):
every refusal that needs no search (a bad name or action, costs that cannot be counted, a limit below what any
schedule holds) is made here, before anything runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.analysis.memory import MeasureMemory, MemoryModel
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.units import format_bytes
from ppdsl.plan.kinds import COPY_NAMES, DEFAULT_RECOMPUTE_FRACTION, MEMORY_NAMES, OFFLOAD_NAME
from ppdsl.synth.cpsat import MAX_TICKS, time_ticks
from ppdsl.synth.problem import ACTION_NAMES, Problem, build_problem
from ppdsl.synth.writer import name_problem, number


@dataclass
class SynthRequest:
    """What to synthesize: the sizes, the costs and memory, and how hard to search."""

    pp: int
    microbatches: int
    vpp: int = 1
    placement: str = "looped"
    costs: CostSpec | None = None
    memory_limit: float | None = None
    memory: MemoryModel | MeasureMemory | None = None  # bytes on a model (the CLI's --model); None: activations
    memory_options: str = ""  # how to measure it again on the command line (`--model M --batch-size B`)
    split: str = "auto"
    backward_b_frees: float = 0.5
    exact: bool = False
    periodic: bool = False  # a repeated block, written so that it holds for any number of micro-batches
    time_limit: float = 10.0
    seed: int = 0
    workers: int = 1
    library: bool = True  # seed the search with the library's schedules
    cost_scale: float = 1.0
    max_jobs: int = DEFAULT_MAX_JOBS  # sizes needing more jobs are refused before anything runs
    name: str = ""
    command: str = ""  # the command line that makes this request (for the file's docstring)
    output: str = "OUT.sched"  # where the file goes (named in the docstring's commands)
    cost_options: str = ""  # `--cost ...` / `--costs FILE` as given (for the docstring)
    memory_actions: tuple[str, ...] = ()  # of "recompute", "offload": the search may choose them (actions.py)
    # what a recompute rebuilds of what its forward does not keep as the stage input (1: a full recompute, as `check`
    # reads a recompute without a fraction); it costs that fraction of the forward (`kinds.recompute_share`)
    recompute_fraction: float = DEFAULT_RECOMPUTE_FRACTION
    host_limit: float | None = None  # all ranks' offloaded memory together (with offload)


def build(request: SynthRequest) -> Problem:
    bad_name = name_problem(request.name)
    if bad_name is not None:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"the name `{request.name}` {bad_name}",
                    help='the name is written between double quotes in the file: leave out `"` and control characters',
                )
            ]
        )
    unknown = [a for a in request.memory_actions if a not in ACTION_NAMES]
    if unknown:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E084",
                    f"unknown memory action `{unknown[0]}` in --memory-actions",
                    help="use `recompute`, `offload` or both: `--memory-actions recompute,offload`",
                )
            ]
        )
    costs = action_costs(request)
    if not (request.time_limit > 0 and math.isfinite(request.time_limit)):
        raise DiagnosticError(
            [Diagnostic("E007", f"the time limit must be a positive number of seconds, got {request.time_limit}")]
        )
    problem = build_problem(
        request.pp,
        request.microbatches,
        request.vpp,
        request.placement,
        costs,
        request.memory_limit,
        request.memory,
        request.split,
        request.backward_b_frees,
        request.cost_scale,
        request.max_jobs,
        memory_actions=bool(request.memory_actions),
        recompute_fraction=request.recompute_fraction,
        host_limit=request.host_limit,
    )
    k, ticks = time_ticks(problem)
    if ticks == 0:  # (a zero cost is meaningful for some jobs: the optimizer's default; not for all of them)
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    "every job costs 0: there is no time to minimize",
                    help="give forward and backward costs (`--cost forward=1,backward=2`)",
                )
            ]
        )
    if ticks > MAX_TICKS:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"the costs need {ticks:.3g} time steps of 1/{k} for one training step, more than the search "
                    f"counts ({MAX_TICKS:.3g})",
                    help="give costs with fewer decimals, or in a larger unit (the largest and smallest nonzero "
                    "costs should be within about 10^9 of each other)",
                )
            ]
        )
    need = problem.minimum_memory()
    # (with memory actions a rank may hold less than an order alone needs: the actions engine says if nothing fits)
    short = [] if request.memory_actions else [r for r in range(problem.pp) if need[r] > problem.limit[r] + 1e-9]
    if short:
        r = max(short, key=lambda q: need[q] - problem.limit[q])
        unit = problem.memory_unit
        shown = format_bytes if unit == "bytes" else (lambda x: f"{number(x)} activations")
        raise DiagnosticError(
            [
                Diagnostic(
                    "S114",
                    f"no schedule fits a memory limit of {shown(problem.limit[r])}: rank {r} holds at least "
                    f"{shown(need[r])} in any schedule",
                    help=f"raise --memory-limit to {shown(max(need))} or more: a micro-batch's forwards on all "
                    "of a rank's stages are held at once before its first backward there",
                )
            ]
        )
    return problem


def action_costs(request: SynthRequest) -> CostSpec | None:
    """The request's costs for its problem. The costs of recompute, offload and reload (`--cost offload=0.5`, a
    cost file's) time the jobs `--memory-actions` places; without actions synth places none, and they are left out
    (a cost file may be calibrated on a run with them; `ppdsl synth` refuses such pairs itself, E110, and
    `compare --synth` / `frontier` give one set of costs to rows with and without actions). Copies timed in a cost
    file's real unit need their own costs: the built-in 0.5 is in abstract units (E111)."""
    costs = request.costs
    if costs is None:
        return None
    if not request.memory_actions:
        return costs.without(MEMORY_NAMES)
    if OFFLOAD_NAME in request.memory_actions and costs.measured:
        missing = [n for n in COPY_NAMES if n not in costs.names()]
        if missing:
            unit = str(costs.file.get("unit", "s")) if costs.file else "s"
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E111",
                        f"the cost file's times are in {unit}, but it gives no cost for `{missing[0]}`: the "
                        "built-in copy time (0.5) is in abstract units",
                        help=f"give the copies' times in {unit}: `--cost offload=...,reload=...`, or calibrate a "
                        "run that offloads (`ppdsl run ... --profile`, then `ppdsl calibrate`)",
                    )
                ]
            )
    return costs
