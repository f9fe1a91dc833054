"""The scaffolding every CP-SAT engine shares (exact.py, exact_actions.py, window.py, window_actions.py,
periodic.py, modulo.py), so that no engine imports another for it: loading OR-Tools, the integer time and memory
scales, a solution, the statics of a schedule's jobs (`Statics`: each job's inputs and readers in ticks), the one
set of solver parameters the window models solve with (`solve_window`), and the memory a (stage, micro-batch)
holds under each action (`hold_pieces`).

Searches use CP-SAT's deterministic time and one worker unless asked otherwise, so the same inputs give the
same schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import lcm
from typing import Any, Protocol

from ppdsl.analysis.timing import SAME_STAGE_INPUT, input_stage, link_delay
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.plan.jobs import Job
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.problem import KEEP, OFFLOAD, RECOMPUTE, Problem
from ppdsl.synth.schedule import Order

INSTALL_HINT = "install it with `pip install 'ppdsl[synth]'` (OR-Tools' CP-SAT solver)"
MAX_SCALE = 10**6
KINDS = (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W)


@dataclass
class Solution:
    orders: list[Order] | None  # the best schedule found, None if none
    bound: float  # a proven lower bound on the makespan (of this model)
    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | UNKNOWN | MODEL_INVALID
    seconds: float


def available() -> bool:
    try:
        import ortools.sat.python.cp_model  # noqa: F401
    except ImportError:
        return False
    return True


# CP-SAT's wall-clock safety net around a deterministic budget: this many times it, and at least these seconds
SAFETY_NET_FACTOR, SAFETY_NET_SECONDS = 40.0, 30.0


def load_cp_model(feature: str = "--exact"):
    try:
        from ortools.sat.python import cp_model
    except ImportError as err:
        message = f"`{feature}` needs OR-Tools, which is not available ({err.name or err})"
        raise DiagnosticError([Diagnostic("E041", message, help=INSTALL_HINT)]) from None
    return cp_model


# The most ticks a step may last in the integer models (CP-SAT's variables are 64-bit; sums of them and the
# modulo terms of the periodic model must not overflow, and a float still counts every tick at 2^53).
MAX_TICKS = 2**53


def time_ticks(problem: Problem) -> tuple[int, int]:
    """(ticks per time unit, ticks of all the step's work and transfers): the integer time the CP-SAT models
    (exact, windows, periodic) count in, and the horizon it must hold."""
    S = problem.nstages
    values = [problem.cost[t][s] for t in range(4) for s in range(S)]
    links = [max(x, 0.0) for t in range(4) for x in problem.link[t]]
    k = integer_scale(values + links + list(problem.optimizer_cost))
    work = problem.microbatches * (sum(values) + 2 * sum(links)) + sum(problem.optimizer_cost)
    return k, round(k * work)


def integer_scale(values: list[float]) -> int:
    """The smallest integer factor that makes every value an integer (values rounded to 1e-6 first)."""
    factor = 1
    for v in values:
        factor = lcm(factor, Fraction(v).limit_denominator(MAX_SCALE).denominator)
        if factor > MAX_SCALE:
            return MAX_SCALE
    return factor


def transfers_never_queue(problem: Problem) -> bool:
    """Every job that sends lasts at least as long as the longest transfer of its rank (see exact.py's module doc)."""
    p = problem
    for r in range(p.pp):
        sends = [(t, s) for s in p.stages_of[r] for t in (FORWARD, BACKWARD, BACKWARD_B) if p.link[t][s] >= 0]
        if sends and min(p.cost[t][s] for t, s in sends) < max(p.link[t][s] for t, s in sends) - 1e-12:
            return False
    return True


GRADIENT = (BACKWARD, BACKWARD_B)
# no presolve: on these small models it costs more than the search (and can lose the hint); no LP relaxation
PARAMS: dict = {"cp_model_presolve": False, "linearization_level": 0}


class SolvableWindow(Protocol):
    """What `solve_window` reads of a window model (`WindowModel`, `window_actions.ActionWindowModel`)."""

    cp: Any  # ortools.sat.python.cp_model
    model: Any
    hints: list[tuple[Any, int]]
    valid: bool


def solve_window(window: SolvableWindow, seconds: float, seed: int, debug: bool) -> tuple[Any, str, float]:
    """`window`'s model solved from its hints within `seconds` of deterministic time, on one worker: the solver
    (None where it found no solution, or the window has no free job), its status's name, and the deterministic
    time spent. Both window models solve through it, so they share one set of solver parameters. `debug` fixes
    every hinted variable (a check that the hint is a solution)."""
    if not window.valid:
        return None, "INVALID", 0.0
    cp, model = window.cp, window.model
    for var, value in window.hints:
        model.AddHint(var, value)
    solver = cp.CpSolver()
    solver.parameters.max_deterministic_time = max(seconds, 0.001)
    solver.parameters.max_time_in_seconds = max(20 * seconds, 1.0)  # a safety net, not the budget
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    for key, value in PARAMS.items():
        setattr(solver.parameters, key, value)
    if debug:
        solver.parameters.fix_variables_to_their_hinted_value = True
    status = solver.Solve(model)
    found = status in (cp.OPTIMAL, cp.FEASIBLE)
    return solver if found else None, solver.StatusName(status), solver.ResponseProto().deterministic_time


class Statics:
    """What does not change while a schedule's jobs are re-ordered: integer time and memory scales, and each
    job's inputs and readers as (job, link time in ticks)."""

    def __init__(
        self, problem: Problem, orders: list[Order], more_times: Sequence[float] = (), more_memory: Sequence[float] = ()
    ):
        """`more_times` / `more_memory`: further values the integer scales must hold exactly (the memory actions'
        costs and amounts, for a periodic block that chooses them)."""
        p, S = problem, problem.nstages
        self.problem = p
        values = [p.cost[t][s] for t in range(4) for s in range(S)]
        values += [link_delay(x) for t in range(4) for x in p.link[t]] + list(p.optimizer_cost)
        self.k = integer_scale(values + list(more_times))
        limits = [x for x in p.limit if x != float("inf")]
        self.km = integer_scale([x for t in range(4) for x in p.mem[t]] + limits + list(more_memory))
        self.cost = [[round(c * self.k) for c in row] for row in p.cost]
        self.mem = [[round(x * self.km) for x in row] for row in p.mem]
        self.cap = [None if x == float("inf") else int(x * self.km + 1e-6) for x in p.limit]
        self.opt = [round(x * self.k) for x in p.optimizer_cost]
        jobs = [job for order in orders for job in order]
        grad = {(s, mb): job for job in jobs if job[0] in GRADIENT for s, mb in [job[1:]]}
        self.inputs: dict[Job, list[tuple[Job, int]]] = {}
        self.readers: dict[Job, list[tuple[Job, int]]] = {job: [] for job in jobs}
        self.release: dict[Job, Job] = {}  # a forward's backward (or I), an I's W
        tick = self.tick
        for job in jobs:
            t, s, mb = job
            ins = []  # the timing rule's inputs: the same stage's first (same rank: order only), then another stage's
            if t in SAME_STAGE_INPUT:
                ins.append(((SAME_STAGE_INPUT[t], s, mb), 0))
            frm = input_stage(t, s, S)
            if frm is not None:
                producer = (FORWARD, frm, mb) if t == FORWARD else grad[(frm, mb)]
                ins.append((producer, tick(link_delay(p.link[producer[0]][frm]))))
            if t == FORWARD:
                self.release[job] = grad[(s, mb)]
            elif t == BACKWARD_B:
                self.release[job] = (BACKWARD_W, s, mb)
            self.inputs[job] = ins
            for producer, x in ins:
                self.readers[producer].append((job, x))
        # a stage's memory as holds (a forward's activation until its backward, what I leaves until W) when its
        # deltas add up to nothing, which they do in every memory model ppdsl has; else as steps
        self.holds = []
        for s in range(S):
            f, b, i, w = (self.mem[t][s] for t in (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W))
            self.holds.append(f >= 0 and f + i >= 0 and f + i + w == 0 and f + b == 0)

    def tick(self, x: float) -> int:
        return round(x * self.k)


class NotModelled(ValueError):
    """The problem's memory deltas are not the form the holds express (a backward frees what its forward
    allocated, an offload moves what its reload brings back)."""


def hold_pieces(
    problem: Problem, s: int, how: str, rmem: float, moved: float, back: float
) -> dict[str, list[tuple[str, str, float]]]:
    """Per option (keep / recompute / offload), what a (stage s, micro-batch) holds as (since, until, amount):
    instants named F (its forward's end), R (its recompute's end), O (its offload's end), L (its reload's start),
    A (the end of its backward, or of I: what I frees) and B (the end of its backward, or of W: the rest).
    `how`: whole | split | either (the backward's form); `rmem`, `moved`, `back`: what the stage's recompute
    allocates, its offload moves and its reload brings back. Raises NotModelled for other memory models."""
    p = problem
    mf = p.mem[FORWARD][s]
    if how == "whole":
        freed_a, freed_b = mf, 0.0
        consistent = abs(p.mem[BACKWARD][s] + mf) < 1e-9
    else:
        freed_a, freed_b = -p.mem[BACKWARD_B][s], -p.mem[BACKWARD_W][s]
        consistent = abs(freed_a + freed_b - mf) < 1e-9
        if how == "either":
            consistent = consistent and abs(p.mem[BACKWARD][s] + mf) < 1e-9
    late = {KEEP: ("F", 0.0), RECOMPUTE: ("R", rmem), OFFLOAD: ("L", moved)}
    if not consistent or abs(moved - back) > 1e-9 or min(freed_a, freed_b) < 0:
        raise NotModelled(f"stage {s}: the backward does not free what the forward allocated")
    out = {}
    for option in late:
        at, x = late[option]
        if not 0 <= x <= mf + 1e-12:
            raise NotModelled(f"stage {s}: {option} moves more than the forward allocates")
        late_b = min(x, freed_b)
        late_a = x - late_b
        pieces = [("F", "A", freed_a - late_a), ("F", "B", freed_b - late_b), (at, "A", late_a), (at, "B", late_b)]
        if option == OFFLOAD:
            pieces.append(("F", "O", x))
        out[option] = pieces
    return out
