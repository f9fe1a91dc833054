"""The search, the one orchestrator of `ppdsl synth`: it owns the time budget and the portfolio of every engine,
and says which search a request runs (`search_request`: the order search, `--memory-actions`' search, or
`--periodic`'s block). Every step is proven by the checker's timing.

The order search (`synthesize`, a `Search`):
1. A portfolio of list-scheduling policies (`greedy.Policy`), the best refined rank by rank (per-rank admission,
   memory reserve and W lag), plus any seed schedules (the library's, at these sizes and within the limit).
2. Local search along the critical path (`improve`).
3. With OR-Tools: large-neighbourhood search, CP-SAT re-solving small windows of the schedule with the rest
   fixed (`lns`, `window`); then, when the problem is small, the whole problem in CP-SAT from the best schedule,
   which can prove it optimal (`exact`).
4. `--split-backward auto`: an I directly followed by its own W becomes one whole backward where that is no
   slower (fewer jobs to run).

The actions search (`search_with_actions`, with `--memory-actions`): the list scheduler's own schedules with
actions, a periodic block that chooses them, and orders found by the order search at a ladder of relaxed limits
with actions inserted (`action_search`, an `ActionSearch`); then the whole schedule with actions in CP-SAT
(small sizes, or `--exact`) or windows of it (`windows_with_actions`). Each step's share is a constant below.

Every search stops at the lower bound (the schedule is then optimal) or when its budget is spent. The budget is
counted in work, not wall time (job evaluations, CP-SAT's deterministic time; clock.py), so the same inputs give
the same schedule; `time_limit` sets it in roughly seconds.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ppdsl.analysis.memory import MemoryActions
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OFFLOAD_NAME, RECOMPUTE_NAME, action_names
from ppdsl.synth import cpsat, exact
from ppdsl.synth.actions import ActionEngine, ActionResult, Placement, describe_counts
from ppdsl.synth.bounds import lower_bound, memory_lower_bound
from ppdsl.synth.clock import WORK_PER_SECOND, WorkClock, cpu, safety_cap
from ppdsl.synth.cpsat import NotModelled
from ppdsl.synth.exact_actions import drop_needless_actions, model_is_exact, solve_with_actions
from ppdsl.synth.greedy import RANK_KNOBS, Policy, list_schedule
from ppdsl.synth.improve import improve
from ppdsl.synth.lns import cool_down, lns
from ppdsl.synth.periodic import Block, periodic_schedules
from ppdsl.synth.problem import ACTION_NAMES, Problem, build_problem
from ppdsl.synth.reductions import hide_reductions
from ppdsl.synth.schedule import COMPUTE, Evaluation, Evaluator, Order, complete, preference, total_score
from ppdsl.synth.seeds import library_seeds
from ppdsl.synth.vfill import fill_seeds, staircase_policies
from ppdsl.synth.weights import placements
from ppdsl.synth.writer import number

if TYPE_CHECKING:
    from ppdsl.synth.request import SynthRequest

EPS = 1e-9
CP_SAT_WHOLE_MAX_JOBS = 300  # up to this, CP-SAT also runs on the whole problem (to prove the schedule optimal)
PERIODIC_SECONDS_PER_DET = 4.0  # seconds of CPU per deterministic second of CP-SAT on block models
# of the budget left when each step starts
FRACTIONS = {"periodic": 0.15, "refine": 0.2, "race": 0.4, "local": 0.15, "windows": 0.6}
RACE_WITHIN = 0.1  # starts this much slower than the best still race
# the actions search's tolerance on makespans and memory (the order search's is EPS)
ACTION_EPS = 1e-6
# of the time limit: how long the bases' first insertion of actions may run past the deadline when a finished
# candidate is held already (the list scheduler's or the block's); without one it runs to its end
INSERT_GRACE = 0.25
SCHEDULED_SHARE = 0.15  # of --time-limit, for list scheduling with actions (and the local search of its best)
ACTIONS_CP_SAT_SHARE = 0.25  # of the time limit, for the whole schedule with actions in CP-SAT (small sizes)
# Up to this, the actions search also runs that model (pp 4, 8 micro-batches, split free: 96 jobs). Smaller than
# the order search's CP_SAT_WHOLE_MAX_JOBS: with its anchoring the model grows with the square of a rank's jobs
# (about 1 s to build at 96 jobs, 10 s at 288).
ACTIONS_CP_SAT_MAX_JOBS = 120
# of the time limit, above it: windows of the actions search's best re-solved in CP-SAT with its actions
# (window_actions.py), each about ACTIONS_WINDOW compute jobs, ACTIONS_WINDOW_DEPTH per rank (so that at pp 8 a
# window spans every rank: what shortens these schedules is the cool-down across all of them), of
# ACTIONS_WINDOW_SECONDS of CP-SAT's deterministic time at that size (measured at pp 8, 16 and 32 micro-batches)
ACTIONS_WINDOWS_SHARE, ACTIONS_WINDOWS_LEAST = 0.25, 0.1
ACTIONS_WINDOW, ACTIONS_WINDOW_DEPTH, ACTIONS_WINDOW_SECONDS = 40, 5, 0.05
# of --time-limit, with --memory-actions: a periodic block that chooses the actions itself (periodic.py), a
# steady state the inserted actions rarely reach at tight memory; more of it below the least memory an order alone
# needs, where the orders found at relaxed limits are all far over it
PERIODIC_SHARE = 0.15
PERIODIC_SHARE_BELOW = 0.4


@dataclass
class Step:
    """One step of the search, for the report: what ran and the makespan it reached."""

    name: str
    makespan: float
    detail: str = ""


@dataclass
class SynthResult:
    problem: Problem
    orders: list[Order]
    evaluation: Evaluation
    lower_bound: float
    optimal: bool
    steps: list[Step] = field(default_factory=list)
    seconds: float = 0.0
    origin: str = ""  # the policy or seed the final schedule grew from
    cp_sat: str = ""  # what CP-SAT did, if it ran
    work: float = 0.0  # seconds of counted work the search spent (clock.py)
    capped: bool = False  # the CPU-time safety net stopped it (clock.py): the result is what it had then

    @property
    def makespan(self) -> float:
        return self.evaluation.makespan

    @property
    def gap(self) -> float:
        """How far above the lower bound, as a fraction of it."""
        return (self.makespan - self.lower_bound) / self.lower_bound if self.lower_bound > 0 else 0.0


class Budget:
    """Work the search may do, counted in job evaluations (deterministic), with a CPU-time safety net
    (`clock.safety_cap`: other processes' load never reaches it; `capped` says when it decided)."""

    def __init__(self, seconds: float):
        self.total = seconds * WORK_PER_SECOND
        self.used = 0.0
        self.deadline = safety_cap(seconds)
        self.cap_reached = False

    def spend(self, work: float) -> None:
        self.used += work

    def left(self) -> float:
        return max(self.total - self.used, 0.0)

    def capped(self) -> bool:
        """Has the safety net been reached (the result is then the one found when it was)?"""
        if not self.cap_reached and cpu() > self.deadline:
            self.cap_reached = True
        return self.cap_reached

    def out(self) -> bool:
        return self.used >= self.total or self.capped()


def policies(problem: Problem) -> list[Policy]:
    """The portfolio: every combination of the policies' global knobs that the problem allows."""
    splits = {"yes": (True,), "no": (False,), "auto": (True, False)}[problem.split]
    out = []
    for split, w_before_f, deep, deep_b, reserve, w_lag, w_fit, f_fit in itertools.product(
        splits, (False, True), (True, False), (True, False), (None, 0, 1, 2), (None, 0, 2), (False, True), (False, True)
    ):
        if not split and (w_before_f or w_lag is not None or w_fit):
            continue  # (W knobs mean nothing without W)
        if problem.vpp == 1 and (deep != deep_b or reserve not in (None,)):
            continue  # one chunk: no chunk preference, nothing later to reserve for
        out.append(
            Policy(
                split=split,
                w_before_f=w_before_f,
                deep_first=deep,
                deep_first_b=deep_b,
                w_fit=w_fit,
                f_fit=f_fit,
                reserve=reserve,
                w_lag=w_lag,
            )
        )
    return out


def action_policies(problem: Problem, allowed: tuple[str, ...]) -> list[Policy]:
    """The portfolio of list scheduling with memory actions (`greedy`: a rank at its limit recomputes or
    offloads instead of waiting): the global knobs that matter with actions, those that often do best first
    (room kept for a later chunk or none, offloading every activation while the copy stream keeps up, each
    action preferred)."""
    splits = {"yes": (True,), "no": (False,), "auto": (True, False)}[problem.split]
    prefers = [a for a in (OFFLOAD_NAME, RECOMPUTE_NAME) if a in allowed] if len(allowed) > 1 else [allowed[0]]
    early = (True, False) if OFFLOAD_NAME in allowed else (False,)
    out = []
    for reserve, early_out, prefer, split, w_before_f, deep, inflight in itertools.product(
        (1, 0, 2, None), early, prefers, splits, (False, True), (True, False), (None, problem.pp)
    ):
        if not split and w_before_f:
            continue  # (W knobs mean nothing without W)
        if problem.vpp == 1 and (not deep or reserve is not None or inflight is not None):
            continue  # one chunk: no chunk preference, nothing later to reserve for, 1F1B's in flight at most
        out.append(
            Policy(
                split=split,
                w_before_f=w_before_f,
                deep_first=deep,
                deep_first_b=deep,
                reserve=reserve,
                inflight=inflight,
                actions=tuple(allowed),
                prefer=prefer,
                offload_early=early_out,
            )
        )
    return out


def _inflight(problem: Problem, orders: list[Order]) -> list[int]:
    """The most micro-batches each rank held between forward and backward of its first stage."""
    peaks = []
    for r, order in enumerate(orders):
        first, level, peak = problem.stages_of[r][0], 0, 0
        for t, s, _ in order:
            if s == first:
                level += t == FORWARD
                level -= t in (BACKWARD, BACKWARD_B)
                peak = max(peak, level)
        peaks.append(peak)
    return peaks


def _neighbours(policy: Policy, rank: int, knob: str, realized: int) -> Iterable[Policy]:
    current = policy.at(knob, rank)
    if knob == "reserve":
        values = (None, 0, 1, 2, 3)
    elif knob == "w_lag":
        values = (None, 0, 1, 2, 3, 4, 6)
    else:
        base = realized if current is None else current
        values = (None, *range(max(base - 2, 1), base + 2))
    for value in values:
        if value != current:
            per_rank = list(getattr(policy, knob))
            per_rank[rank] = value
            yield replace(policy, **{knob: tuple(per_rank)})


def lns_window(pp: int, race: bool = False) -> int:
    """Jobs per LNS window at the start. Windows take about 10 jobs per rank, so 30 cover 3 neighbouring ranks;
    from 8 ranks on, what shortens a schedule is a re-order across all of them (the warm-up of one rank against
    the cool-down of another), and windows of 80 reach it within the default budget where 30 do not (measured
    on the V-shape grid of bench_synth at pp = 8). A `race` start has a share of the budget only, in which
    windows of 60 (each solve cheaper) move it further than 80 do; the final search from the race's best then
    gains most from 80 (on the pp = 8 V grid at 10 s: 60 in the race and 80 after it lose none of 45 cells to
    the zero-bubble authors' search, 80 in both lose 2, 60 in both 1)."""
    if pp < 8:
        return 30
    return 60 if race else 80


class Search:
    def __init__(self, problem: Problem, time_limit: float, seed: int, progress: Callable[[str], None] | None):
        self.problem = problem
        self.evaluator = Evaluator(problem)
        self.budget = Budget(time_limit)
        self.rng = random.Random(seed)
        self.seed = seed
        self.progress = progress or (lambda message: None)
        self.jobs = problem.jobs_per_step
        self.bound = lower_bound(problem)
        self.steps: list[Step] = []
        self.best: tuple[list[Order], Evaluation, str] | None = None  # what the search goes on from
        # what it writes: of every schedule offered, the first by `preference` (the fastest, then the least memory)
        self.chosen: tuple[tuple, tuple[list[Order], Evaluation, str]] | None = None
        self.starts: dict[str, tuple[list[Order], Evaluation, str]] = {}

    def reached_bound(self) -> bool:
        return self.best is not None and self.best[1].makespan <= self.bound + EPS

    def offer(self, orders: list[Order], ev: Evaluation, origin: str, family: str | None = None) -> bool:
        """Keep the schedule if it is the best so far; `family` (what kind of start it is) also keeps the best of
        each kind, for `race`."""
        if ev.feasible:
            key = preference(self.problem, orders, ev)
            if self.chosen is None or key < self.chosen[0]:
                self.chosen = (key, (orders, ev, origin))
        if family is not None and ev.feasible:
            if family not in self.starts or total_score(ev) < total_score(self.starts[family][1]):
                self.starts[family] = (orders, ev, origin)
        if ev.feasible and (self.best is None or total_score(ev) < total_score(self.best[1])):
            self.best = (orders, ev, origin)
            return True
        return False

    def run_policy(self, policy: Policy, priority: dict | None = None) -> tuple[list[Order], Evaluation] | None:
        self.budget.spend(3 * self.jobs)
        orders = list_schedule(self.problem, policy, priority)
        if orders is None:
            return None
        ev = self.evaluator.evaluate(orders)
        self.budget.spend(self.jobs)
        return orders, ev

    def step(self, name: str, detail: str = "") -> None:
        makespan = self.best[1].makespan if self.best else float("inf")
        self.steps.append(Step(name, makespan, detail))
        self.progress(f"{name}: makespan {makespan:g}" + (f" ({detail})" if detail else ""))

    # ------------------------------------------------------------------ the steps

    def portfolio(self) -> list[tuple[tuple, Policy, list[Order], Evaluation]]:
        ranked = []
        candidates = policies(self.problem)
        # at scale, fewer policies: each costs a full list schedule
        room = int(0.25 * self.budget.left() / (4 * self.jobs)) if self.jobs else len(candidates)
        if room < len(candidates):
            keep = max(room, 8)
            candidates = candidates[:: max(len(candidates) // keep, 1)][:keep]
        for policy in candidates:
            got = self.run_policy(policy)
            if got is not None and got[1].feasible:
                ranked.append((total_score(got[1]), policy, *got))
                self.offer(got[0], got[1], policy.label(), "policies")
        ranked.sort(key=lambda x: x[0])
        self.step("list scheduling", f"{len(candidates)} policies, best {ranked[0][1].label()}" if ranked else "")
        return ranked

    def staircase(self) -> None:
        """V shapes: the policies with in-flight caps falling by one rank after rank (`vfill.staircase_policies`),
        starts of the policies' kind (the race runs the best of them and the portfolio's)."""
        best = None
        for policy in staircase_policies(self.problem):
            got = self.run_policy(policy)
            if got is not None and got[1].feasible:
                self.offer(got[0], got[1], policy.label(), "policies")
                if best is None or total_score(got[1]) < total_score(best):
                    best = got[1]
        if best is not None:
            self.step("staircase in-flight caps", f"best {best.makespan:g}")

    def refine(self, ranked: list, top: int = 2, sweeps: int = 3, fraction: float = 0.35) -> None:
        """Coordinate descent over per-rank knobs of the best policies."""
        share = self.budget.used + fraction * self.budget.left()
        for _, policy, orders, ev in ranked[:top]:
            policy = policy.per_rank(self.problem.pp)
            current = (total_score(ev), policy, orders, ev)
            inflight = _inflight(self.problem, orders)  # of the current schedule (a pass over all its jobs)
            for _ in range(sweeps):
                improved = False
                for rank, knob in itertools.product(range(self.problem.pp), RANK_KNOBS):
                    if knob == "w_lag" and not policy.split:
                        continue
                    for trial in _neighbours(current[1], rank, knob, inflight[rank]):
                        if self.budget.used > share or self.budget.out() or self.reached_bound():
                            break
                        got = self.run_policy(trial)
                        if got is not None and total_score(got[1]) < current[0]:
                            current = (total_score(got[1]), trial, *got)
                            inflight = _inflight(self.problem, current[2])
                            improved = True
                if not improved:
                    break
            self.offer(current[2], current[3], current[1].label(), "policies")
        self.step("per-rank policy refinement")

    def seeds(self, seeds: Iterable[tuple[str, list[Order]]]) -> None:
        offered = []
        for name, orders in seeds:
            if not complete(self.problem, orders):
                continue
            ev = self.evaluator.evaluate(orders)
            self.budget.spend(self.jobs)
            if ev.feasible:
                offered.append(f"{name} {ev.makespan:g}")
                self.offer(orders, ev, name, "seeds")
        if offered:
            self.step("seed schedules", ", ".join(offered))

    def fill_first(self) -> None:
        """V shapes: the schedules that fill the memory in the warm-up, then run one micro-batch in for one out
        (`vfill`): a start the backward-first policies do not reach."""
        found = fill_seeds(self.problem)
        best = None
        for name, orders in found:
            ev = self.evaluator.evaluate(orders)
            self.budget.spend(4 * self.jobs)
            if ev.feasible:
                self.offer(orders, ev, name, "fill-first")
                if best is None or total_score(ev) < total_score(best[1]):
                    best = (name, ev)
        if found:
            self.step("V fill-first schedules", f"{len(found)}, best {best[1].makespan:g}" if best else "none fits")

    def place_weights(self, starts: bool = True) -> None:
        """Every start found so far (or, `starts` False, the best schedule) with its W's re-placed where they fit
        (`weights`): the forwards and I's keep their order. Starts more than RACE_WITHIN slower than the best are
        left out, as the race leaves them, and once the budget is spent only the best is re-placed (each placement
        is a list schedule of every job)."""
        if self.best is None:
            return
        chosen = list(self.starts.items()) if starts else [(None, self.best)]
        limit = self.best[1].makespan * (1 + RACE_WITHIN)
        offered = []
        for family, (orders, ev, origin) in chosen:
            if ev.makespan > limit or (starts and self.budget.out()):
                continue
            for name, placed in placements(self.problem, orders):
                found = self.evaluator.evaluate(placed)
                self.budget.spend(4 * self.jobs)
                if found.feasible and total_score(found) < total_score(ev):
                    self.offer(placed, found, f"{origin} + {name}", family)
                    offered.append(f"{found.makespan:g}")
        if offered:
            self.step("W re-placed where they fit", ", ".join(offered))

    def periodic(self, fraction: float) -> None:
        """Periodic schedules (one micro-batch's block repeated, `periodic`) as further starting points: as they
        are, and as the plan of list schedules that fill the warm-up and cool-down the repetition leaves idle."""
        if self.reached_bound() or not cpsat.available():
            return
        seconds = fraction * self.budget.left() / WORK_PER_SECOND
        found = periodic_schedules(self.problem, seconds / PERIODIC_SECONDS_PER_DET, seed=self.seed)
        offered = []
        for block in found:
            ev = self.evaluator.evaluate(block.orders)
            self.budget.spend((block.spent * PERIODIC_SECONDS_PER_DET) * WORK_PER_SECOND + 2 * self.jobs)
            if ev.feasible:
                offered.append(f"{ev.makespan:g}")
                self.offer(block.orders, ev, block.name, "periodic")
            priority = {job: -t for job, t in block.planned_times(self.problem.microbatches).items()}
            best = None
            for reserve in (None, 1, 2):
                policy = Policy(split=self.problem.split != "no", planned=True, reserve=reserve)
                got = self.run_policy(policy, priority)
                if got is not None and got[1].feasible and (best is None or total_score(got[1]) < total_score(best[1])):
                    best = got
            if best is not None:
                offered.append(f"planned {best[1].makespan:g}")
                self.offer(best[0], best[1], block.name + ", planned", "periodic")
        self.step("periodic blocks", ", ".join(offered) or "none fits")

    def race(self, fraction: float) -> None:
        """Which start leads furthest is not which is fastest as it is (a schedule in another basin can be a few
        percent slower and improve past it): the best start of each kind (policies, fill-first, periodic
        blocks), if within RACE_WITHIN of the best, gets an equal share of `fraction` of the budget left, half
        local search, half CP-SAT windows; the search goes on from the best of what they reach."""
        if self.best is None or self.reached_bound() or not cpsat.available():
            return
        limit = self.best[1].makespan * (1 + RACE_WITHIN)
        starts = []
        for start in sorted(self.starts.values(), key=lambda x: total_score(x[1])):
            # a start as fast as a better-scored one adds no new basin worth its share
            if start[1].makespan <= limit and all(abs(start[1].makespan - x[1].makespan) > EPS for x in starts):
                starts.append(start)
        if len(starts) < 2:
            return
        share = fraction * self.budget.left() / len(starts)
        reached = []
        for orders, _, origin in starts:
            before = self.evaluator.calls
            evaluations = max(int(share / 2 / max(self.jobs, 1)), 10)
            deadline = min(cpu() + 3 * share / WORK_PER_SECOND + 1, self.budget.deadline)
            found, ev = improve(
                self.evaluator, orders, deadline, self.rng, target=self.bound, max_evaluations=evaluations
            )
            self.budget.spend((self.evaluator.calls - before) * self.jobs)
            found, ev, spent = lns(
                self.evaluator,
                found,
                share / 2 / WORK_PER_SECOND,
                window=lns_window(self.problem.pp, race=True),
                target=self.bound,
                seed=self.seed,
                out_of_time=self.budget.capped,
            )
            self.budget.spend(spent * WORK_PER_SECOND)
            self.offer(found, ev, origin + " + local search + CP-SAT windows")
            reached.append(f"{ev.makespan:g}")
        self.step("race of the starts", f"{len(starts)} starts, reached " + ", ".join(reached))

    def local_search(self, fraction: float = 0.4) -> None:
        if self.best is None or self.reached_bound():
            return
        orders, _, origin = self.best
        work = fraction * self.budget.left()
        evaluations = max(int(work / max(self.jobs, 1)), 10)
        before = self.evaluator.calls
        deadline = min(cpu() + 3 * work / WORK_PER_SECOND + 1, self.budget.deadline)
        found, ev = improve(self.evaluator, orders, deadline, self.rng, target=self.bound, max_evaluations=evaluations)
        self.budget.spend((self.evaluator.calls - before) * self.jobs)
        self.offer(found, ev, origin + " + local search")
        self.step("critical-path local search", f"{self.evaluator.calls - before} evaluations")

    def cp_sat(self, seconds: float, whole: bool, workers: int = 1, deterministic: bool = True) -> str:
        if self.best is None or self.reached_bound() or not cpsat.available():
            return ""
        orders, ev, origin = self.best
        if whole:
            times = {job: ev.start[r][i] for r, order in enumerate(orders) for i, job in enumerate(order)}
            sol = exact.solve(
                self.problem,
                seconds,
                hint=times,
                upper_bound=ev.makespan,
                workers=workers,
                seed=self.seed,
                deterministic=deterministic,
            )
            if sol.orders is not None:
                found = self.evaluator.evaluate(sol.orders)
                self.offer(sol.orders, found, origin + " + CP-SAT")
            self.bound = max(self.bound, sol.bound if sol.status != "INFEASIBLE" else self.bound)
            self.step("CP-SAT (whole problem)", f"{sol.status.lower()}, bound {sol.bound:g}")
            return sol.status
        self.windows(seconds)
        return "windows"

    def windows(self, seconds: float) -> None:
        """Large-neighbourhood search over windows of the best schedule for about `seconds`: its cool-down first
        (`cool_down`), then sliding windows (`lns`)."""
        if self.best is None or self.reached_bound() or not cpsat.available():
            return
        orders, _, origin = self.best
        window = lns_window(self.problem.pp)
        cooled = 0.0
        if self.jobs > CP_SAT_WHOLE_MAX_JOBS:  # (smaller: CP-SAT on the whole problem follows, its end included)
            orders, _, cooled = cool_down(self.evaluator, orders, seconds, window, self.seed, self.budget.capped)
        found_orders, found, spent = lns(
            self.evaluator,
            orders,
            seconds - cooled,
            window=window,
            target=self.bound,
            seed=self.seed,
            out_of_time=self.budget.capped,
        )
        spent += cooled
        self.budget.spend(spent * WORK_PER_SECOND)
        self.offer(found_orders, found, origin + " + CP-SAT windows")
        self.step("CP-SAT over windows", f"{spent:.1f} s of work")

    def merge_backwards(self, evaluations: int = 4) -> None:
        """Auto split: an I directly followed by its W becomes a whole backward where that is no slower. All of
        them are tried at once, then halves of what did not work, and so on (a handful of evaluations when most
        merges are harmless, as they usually are), within `evaluations`, or what is left of the budget and a
        twentieth of it if that is more."""
        if self.problem.split != "auto" or self.best is None:
            return
        orders, ev, origin = self.best
        p = self.problem
        candidates = []
        for order in orders:
            for (t, s, mb), after in itertools.pairwise(order):
                if t == BACKWARD_B and after == (BACKWARD_W, s, mb):
                    if p.cost[BACKWARD][s] <= p.cost[BACKWARD_B][s] + p.cost[BACKWARD_W][s] + EPS:
                        candidates.append((s, mb))

        def merge(pairs: set) -> list[Order]:
            out = []
            for order in orders:
                row = []
                for t, s, mb in order:
                    if (s, mb) in pairs and t in (BACKWARD_B, BACKWARD_W):
                        if t == BACKWARD_B:
                            row.append((BACKWARD, s, mb))
                        continue
                    row.append((t, s, mb))
                out.append(row)
            return out

        done: set = set()
        current = orders
        allowed = max(evaluations, int((self.budget.left() + 0.05 * self.budget.total) / max(self.jobs, 1)))
        groups = [candidates] if candidates else []
        tried = 0
        while groups and tried < allowed:
            group = groups.pop()
            trial = merge(done | set(group))
            found = self.evaluator.evaluate(trial)
            tried += 1
            if found.feasible and found.makespan <= ev.makespan + EPS and max(found.peaks) <= max(ev.peaks) + EPS:
                done |= set(group)
                current, ev = trial, found
            elif len(group) > 1:
                half = len(group) // 2
                groups += [group[half:], group[:half]]
        self.budget.spend(tried * self.jobs)
        if done:
            self.best = (current, ev, origin)
            self.offer(current, ev, origin)
        self.step("whole backwards where no slower", f"{len(done)} I + W pairs merged")


def synthesize(
    problem: Problem,
    time_limit: float = 10.0,
    exact_search: bool = False,
    seed: int = 0,
    seeds: Iterable[tuple[str, list[Order]]] = (),
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> SynthResult:
    """The fastest schedule the search finds within the problem's memory limits.

    Raises `Infeasible` when no schedule fits the limits.
    """
    t0 = time.perf_counter()
    search = Search(problem, time_limit if not exact_search else min(time_limit, 10.0), seed, progress)
    ranked = search.portfolio()
    search.periodic(FRACTIONS["periodic"])
    search.staircase()  # (after the periodic blocks, whose share of the budget is of what is left)
    if not search.reached_bound():
        search.refine(ranked, fraction=FRACTIONS["refine"])
    search.seeds([*seeds, ("one micro-batch at a time", problem.sequential())])
    search.fill_first()
    search.place_weights()
    if not exact_search and search.jobs > CP_SAT_WHOLE_MAX_JOBS:  # (small: CP-SAT on the whole problem does more)
        search.race(FRACTIONS["race"])
    if search.best is None:
        raise Infeasible(problem)
    search.local_search(FRACTIONS["local"])
    status = ""
    if exact_search:
        cpsat.load_cp_model()  # a clear error when OR-Tools is missing
        remaining = max(time_limit - search.budget.used / WORK_PER_SECOND, 1.0)  # (counted, not timed)
        status = search.cp_sat(remaining, whole=True, workers=workers, deterministic=workers == 1)
    elif cpsat.available() and not search.reached_bound():
        whole = search.jobs <= CP_SAT_WHOLE_MAX_JOBS
        search.windows((FRACTIONS["windows"] if whole else 1.0) * search.budget.left() / WORK_PER_SECOND)
        if whole:
            share = max(search.budget.left() / WORK_PER_SECOND, 0.5)
            status = search.cp_sat(share, whole=True)
    search.place_weights(starts=False)
    if search.chosen is not None:  # among the fastest, the least memory, then the simplest (`preference`)
        search.best = search.chosen[1]
    search.merge_backwards()
    orders, ev, origin = search.chosen[1] if search.chosen is not None else search.best
    orders, ev = hide_reductions(problem, search.evaluator, orders, ev)  # (dp above 1: W's ahead of reductions)
    exact_model = cpsat.transfers_never_queue(problem)
    optimal = ev.makespan <= lower_bound(problem) + EPS or (
        status == "OPTIMAL" and exact_model and ev.makespan <= search.bound + EPS
    )
    bound = search.bound if exact_model else lower_bound(problem)
    work, capped = search.budget.used / WORK_PER_SECOND, search.budget.cap_reached
    seconds = time.perf_counter() - t0
    return SynthResult(problem, orders, ev, bound, optimal, search.steps, seconds, origin, status, work, capped)


def periodic_search(
    problem: Problem, time_limit: float = 10.0, seed: int = 0, actions: Iterable[str] = ()
) -> tuple[SynthResult, Block]:
    """The best periodic schedule (`periodic`): one micro-batch's block repeated every period, so its order holds
    for any number of micro-batches. Periods from the shortest the costs and the limit allow; the block whose
    orders are fastest at the problem's sizes wins. `actions`: the memory actions a block may choose per stage
    (a problem built with them).

    Raises `Infeasible` when no block was found within the limit and the time.
    """
    t0 = time.perf_counter()
    cpsat.load_cp_model("--periodic")  # a clear error when OR-Tools is missing
    evaluator = Evaluator(problem)
    best: tuple[Evaluation, Block] | None = None
    steps = []
    for block in periodic_schedules(
        problem, time_limit / PERIODIC_SECONDS_PER_DET, seed=seed, periods=3, search_longer=True, actions=actions
    ):
        ev = evaluator.evaluate(block.orders)
        if ev.feasible:
            steps.append(Step(block.name, ev.makespan))
            if best is None or ev.makespan < best[0].makespan - EPS:
                best = (ev, block)
    if best is None:
        raise Infeasible(problem)
    ev, block = best
    bound = lower_bound(problem)
    optimal = ev.makespan <= bound + EPS
    result = SynthResult(problem, block.orders, ev, bound, optimal, steps, time.perf_counter() - t0, block.name)
    return result, block


def search_request(
    request: SynthRequest, problem: Problem, progress: Callable[[str], None] | None
) -> tuple[SynthResult, Block | None]:
    """The search the request asks for; raises DiagnosticError (S114) when nothing fits."""
    try:
        if request.periodic:
            return periodic_search(problem, request.time_limit, request.seed, request.memory_actions)
        if request.memory_actions:
            return search_with_actions(request, problem, progress), None
        seeds = list(library_seeds(problem)) if request.library else []
        found = synthesize(
            problem, request.time_limit, request.exact, request.seed, seeds, request.workers, progress=progress
        )
        return found, None
    except Infeasible:  # (the one-at-a-time seed fits whatever `build` accepts; a periodic block may not)
        message = "no periodic block fits the memory limit" if request.periodic else "no schedule fits the memory limit"
        hint = "raise --time-limit, or drop --periodic to search every schedule" if request.periodic else None
        if request.memory_actions:
            message += f" with {' and '.join(request.memory_actions)}"
            hint = "raise --memory-limit (or --host-limit), or allow both actions: --memory-actions recompute,offload"
        if problem.expansion is not None and problem.expansion.mem_received is not None:
            message += " and the values in transit between jobs (measured on the model)"
        raise DiagnosticError([Diagnostic("S114", message, help=hint)]) from None


def search_with_actions(
    request: SynthRequest, problem: Problem, progress: Callable[[str], None] | None = None
) -> SynthResult:
    """`--memory-actions`: the actions search (`action_search`), then, with `--exact` or when the problem is
    small (`ACTIONS_CP_SAT_MAX_JOBS`), the whole schedule with actions in CP-SAT (exact_actions.py) from the best
    found, which proves it optimal or gives the gap; above that size, LNS windows with its actions
    (`windows_with_actions`). The better is kept. Raises Infeasible when nothing fits."""
    t0 = time.perf_counter()
    limit = request.time_limit
    clock = WorkClock(limit)  # what decides is counted work, not the wall clock (clock.py)
    whole = cpsat.available() and (request.exact or problem.jobs_per_step <= ACTIONS_CP_SAT_MAX_JOBS)
    if request.exact:
        cpsat.load_cp_model()  # a clear error when OR-Tools is missing
    if not math.isfinite(max(problem.limit)) or not cpsat.available():
        return action_search(request, problem, limit, progress, clock)
    if not whole:
        found = action_search(request, problem, (1 - ACTIONS_WINDOWS_SHARE) * limit, progress, clock)
        if found.optimal:
            return found
        # what is left of the limit (what follows: writing and checking the file), but at least
        # ACTIONS_WINDOWS_LEAST of it when the actions search ran over its share: a bounded overrun
        left = max(limit - clock.now() - min(0.05 * limit, 5.0), ACTIONS_WINDOWS_LEAST * limit)
        return windows_with_actions(request, found, left, progress, clock)
    # as `--exact` without actions: the heuristic's share is small next to the proof's
    heuristic = min(limit / 2, 10.0) if request.exact else (1 - ACTIONS_CP_SAT_SHARE) * limit
    found = action_search(request, problem, heuristic, progress, clock)
    if found.optimal:
        return found
    # (what follows the solve: re-timing, dropping needless actions, writing and checking the file)
    seconds = max(limit - clock.now() - min(0.05 * limit, 5.0), 0.5)
    try:
        solution, hinted = solve_with_actions(
            problem,
            request.memory_actions,
            seconds,
            start=(found.orders, found.evaluation),
            workers=request.workers,
            seed=request.seed,
            deterministic=request.workers == 1,
            proof=request.exact,
        )
    except NotModelled as why:
        return replace(found, origin=f"{found.origin}; CP-SAT not run: {why}")
    exact_model = model_is_exact(problem)
    best, origin = found.evaluation, found.origin
    orders = found.orders
    if solution.orders is not None:
        timer = Evaluator(problem)
        ev = timer.evaluate(solution.orders)
        if ev.feasible and ev.makespan < best.makespan - ACTION_EPS:
            solved, ev = drop_needless_actions(timer, solution.orders, ev)
            did_text = actions_taken(problem, solved)
            best, orders, origin = ev, solved, f"CP-SAT with actions ({did_text}) from: {found.origin}"
    bound = found.lower_bound
    if exact_model and solution.status != "INFEASIBLE":  # (its bound: 0 without --exact, see solve_with_actions)
        bound = max(bound, solution.bound)
    optimal = best.makespan <= bound + ACTION_EPS
    status = solution.status.lower() + ("" if hinted else ", the actions search's schedule not taken up")
    if progress is not None:
        progress(f"CP-SAT with actions: {status}, bound {number(round(solution.bound, 6))}")
    return SynthResult(
        problem,
        orders,
        best,
        bound,
        optimal,
        seconds=time.perf_counter() - t0,
        origin=origin,
        cp_sat=solution.status,
        capped=found.capped or clock.capped(),
    )


def actions_taken(problem: Problem, orders: list) -> str:
    """How many (stage, micro-batch)s the orders recompute and offload, for the origin of a result."""
    a = MemoryActions.of(problem.expansion)
    return describe_counts(
        {
            name: sum(job[0] == t for row in orders for job in row)
            for name, t in zip(ACTION_NAMES, (a.recompute, a.offload), strict=True)
        }
    )


def windows_with_actions(
    request: SynthRequest,
    found: SynthResult,
    seconds: float,
    progress: Callable[[str], None] | None = None,
    clock: WorkClock | None = None,
) -> SynthResult:
    """`found` (the actions search's best) improved by the large-neighbourhood search over windows with its
    actions (`lns(..., memory_actions=...)`, window_actions.py) for about `seconds`; each repaired schedule is
    re-timed by the checker's execution and kept only if it keeps every limit and is faster. The sizes above
    ACTIONS_CP_SAT_MAX_JOBS, where the whole schedule with actions is too large a model."""
    t0 = time.perf_counter()
    problem = found.problem
    if seconds <= 0:
        return found
    clock = clock if clock is not None else WorkClock(seconds)
    timer = Evaluator(problem)
    try:
        orders, ev, spent = lns(
            timer,
            found.orders,
            seconds,
            window=ACTIONS_WINDOW,
            target=found.lower_bound,
            seed=request.seed,
            out_of_time=clock.capped,  # (the windows count their work: the clock is only the safety net)
            per_window=ACTIONS_WINDOW_SECONDS,
            memory_actions=request.memory_actions,
            depth=ACTIONS_WINDOW_DEPTH,
        )
    except NotModelled as why:
        return replace(found, origin=f"{found.origin}; CP-SAT windows not run: {why}")
    clock.spend(spent)
    if progress is not None:
        progress(f"CP-SAT windows with actions: makespan {number(round(ev.makespan, 6))} ({spent:.1f} s of work)")
    seconds_spent = found.seconds + time.perf_counter() - t0
    if not ev.feasible or ev.makespan >= found.evaluation.makespan - ACTION_EPS:
        return replace(found, seconds=seconds_spent, cp_sat="windows", capped=found.capped or clock.capped())
    return replace(
        found,
        orders=orders,
        evaluation=ev,
        optimal=ev.makespan <= found.lower_bound + ACTION_EPS,
        seconds=seconds_spent,
        origin=f"{found.origin} + CP-SAT windows with actions ({actions_taken(problem, orders)})",
        cp_sat="windows",
        capped=found.capped or clock.capped(),
    )


def action_search(
    request: SynthRequest,
    problem: Problem,
    seconds: float,
    progress: Callable[[str], None] | None = None,
    clock: WorkClock | None = None,
) -> SynthResult:
    """The fastest orders the order search finds at a few relaxed limits (no limit, between, the tightest an order
    reaches, the request's own when an order fits it), then memory actions inserted where a rank is over its
    limit and improved by local search (actions.py), every candidate timed by the checker's execution on
    `problem` (which has the action types), within about `seconds`. Before them, in SCHEDULED_SHARE of the time,
    the list scheduler's own schedules with actions (greedy.py), and in PERIODIC_SHARE a periodic block that
    chooses the actions per stage (periodic.py): finished candidates, and the block's order and a list schedule
    it plans are bases. Raises Infeasible when nothing fits."""
    return ActionSearch(request, problem, seconds, progress, clock).run()


class ActionSearch:
    """One run of `action_search`: its shares of the counted work (clock.py), the bases it gathers (orders to
    insert actions in, fastest first) and the finished candidates it holds."""

    def __init__(
        self,
        request: SynthRequest,
        problem: Problem,
        seconds: float,
        progress: Callable[[str], None] | None,
        clock: WorkClock | None,
    ):
        self.t0 = time.perf_counter()
        self.request, self.problem, self.seconds = request, problem, seconds
        self.progress = progress
        # every share below is of counted work (clock.py): the same inputs give the same schedule under any load
        self.clock = clock if clock is not None else WorkClock(seconds)
        self.start = self.clock.now()
        self.order_share = 0.65 * seconds
        # the orders are found without the action types: their costs are the actions engine's
        self.order_costs = None if request.costs is None else request.costs.without(action_names())
        self.need, self.limit = max(problem.minimum_memory()), max(problem.limit)
        self.bound = 0.0
        self.bases: list[tuple[float, str, list]] = []

    def run(self) -> SynthResult:
        request, problem, seconds = self.request, self.problem, self.seconds
        if not math.isfinite(self.limit):  # nothing to make room for: the order search's answer, which needs no action
            return self.without_limit()
        self.bound = memory_lower_bound(problem, request.memory_actions)
        # first the list scheduler's own schedules, which take the actions while they schedule (greedy.py)
        engine = ActionEngine(problem, request.memory_actions, self.start + seconds, self.clock)
        policies = action_policies(problem, request.memory_actions)
        scheduled = engine.scheduled(policies, self.start + SCHEDULED_SHARE * seconds)
        self.report(scheduled)
        if self.at_bound(scheduled):
            scheduled.candidates = engine.evaluator.calls
            return self.result(scheduled)
        periodic = self.periodic_bases()
        if self.at_bound(periodic):
            return self.result(replace(periodic, candidates=max(engine.evaluator.calls, 1)))
        self.order_bases()
        self.library_bases()
        self.bases.sort(key=lambda b: b[0])
        self.bases.append((float("inf"), "one micro-batch at a time", problem.sequential()))  # fits the least memory
        held = scheduled is not None or periodic is not None
        bases = ((origin, orders) for _, origin, orders in self.bases)
        best = engine.search(bases, fallback=held, grace=INSERT_GRACE * seconds)

        def key(found: ActionResult) -> tuple:
            return preference(problem, found.orders, found.evaluation)

        # (among equally fast ones, the least memory, then the simplest: `schedule.preference`)
        if scheduled is not None and (best is None or key(scheduled) < key(best)):
            best = scheduled
        if periodic is not None and (best is None or key(periodic) < key(best)):
            best = periodic
        if best is None:
            raise Infeasible(problem)
        return self.result(best)

    def without_limit(self) -> SynthResult:
        request = self.request
        p = self.order_problem(None, request.split)
        seeds = list(library_seeds(p)) if request.library else []
        found = synthesize(p, self.seconds, request.exact, request.seed, seeds, request.workers, progress=self.progress)
        return replace(found, problem=self.problem, origin=f"{found.origin} (no memory limit: no action needed)")

    def order_problem(self, limit: float | None, split: str) -> Problem:
        request = self.request
        return build_problem(
            request.pp,
            request.microbatches,
            request.vpp,
            request.placement,
            self.order_costs,
            limit,
            request.memory,
            split,
            request.backward_b_frees,
            request.cost_scale,
            request.max_jobs,
        )

    def result(self, best: ActionResult) -> SynthResult:
        did = describe_counts(best.counts())
        return SynthResult(
            self.problem,
            best.orders,
            best.evaluation,
            self.bound,
            best.evaluation.makespan <= self.bound + ACTION_EPS,
            seconds=time.perf_counter() - self.t0,
            origin=f"{best.origin} ({did})",  # (no counts of work in the file: see determinism in clock.py)
            work=self.clock.now() - self.start,
            capped=self.clock.capped(),
        )

    def at_bound(self, found: ActionResult | None) -> bool:
        """Is `found` optimal (no later start can beat it)?"""
        return found is not None and found.evaluation.makespan <= self.bound + ACTION_EPS

    def report(self, found: ActionResult | None) -> None:
        if found is not None and self.progress is not None:
            self.progress(f"{found.origin}: makespan {number(round(found.evaluation.makespan, 6))}")

    def periodic_bases(self) -> ActionResult | None:
        """A periodic block that chooses the actions itself, in a bounded share of the time (the order searches
        share what is left of theirs): its compute order is a base (the engine may place actions better in it),
        and a list schedule planned by it without a limit, which fills the warm-up and cool-down the repetition
        leaves idle. Returns the block, a finished candidate."""
        share = PERIODIC_SHARE if self.need <= self.limit + ACTION_EPS else PERIODIC_SHARE_BELOW
        periodic = periodic_with_actions(self.request, self.problem, share * self.seconds, self.clock)
        if periodic is None:
            return None
        compute = [[job for job in order if job[0] in COMPUTE] for order in periodic.orders]
        self.bases.append((periodic.evaluation.makespan, f"{periodic.origin}'s order", compute))
        plain = self.order_problem(None, self.request.split)
        planned = list_schedule(plain, Policy(split=plain.split != "no", planned=True), periodic_plan(periodic))
        if planned is not None:
            self.bases.append((Evaluator(plain).evaluate(planned).makespan, f"{periodic.origin}, planned", planned))
        self.report(periodic)
        return periodic

    def add_order(self, x: float | None, split: str, seconds: float) -> SynthResult | None:
        """The order search's best at limit `x` (None: no limit) with this split, a base (None if none fits)."""
        request = self.request
        p = self.order_problem(x, split)
        seeds = list(library_seeds(p)) if request.library else []
        try:
            found = synthesize(p, max(seconds, 0.2), seed=request.seed, seeds=seeds)
        except Infeasible:
            return None
        self.clock.spend(found.work)
        whole = ", whole backwards" if split == "no" and request.split == "auto" else ""
        at = "no limit" if x is None else f"found at limit {number(x)}"
        self.bases.append((found.makespan, f"{found.origin} ({at}{whole})", found.orders))
        if self.progress is not None:
            self.progress(f"order ({at}{whole}): makespan {number(round(found.makespan, 6))}")
        return found

    def order_bases(self) -> None:
        """The ladder of limits the orders are found at: the request's own (when an order reaches it), the tightest
        an order reaches, and steps up to the peak of the fastest order without a limit. A deferred backward_w
        holds memory no action can move, so with the split free the orders are also found with whole backwards."""
        request, need, limit, start = self.request, self.need, self.limit, self.start
        low = max(need, limit)
        # first what the order alone reaches at the request's limit (when it reaches it at all): with actions the
        # result is never slower than that
        if need <= limit + ACTION_EPS:
            self.add_order(limit, request.split, 0.25 * self.seconds)
        free = self.add_order(None, request.split, self.order_share / 6)
        top = max(free.evaluation.peaks) if free is not None else low
        # then, the most useful first should time run out: halfway up with whole backwards (1F1B-like orders, whose
        # in-flight micro-batches the actions free), the request's own limit with whole backwards, and so on
        mid, upper = low + (top - low) / 2, low + (top - low) / 4
        ladder = [(mid, "no"), (low, "no"), (mid, "auto"), (upper, "no"), (upper, "auto"), (low, "auto")]
        configs = []
        for x, split in ladder:
            split = split if request.split == "auto" else request.split
            done = need <= limit + ACTION_EPS and x == low and split == request.split
            if (x, split) not in configs and not done and (x == low or low < top - ACTION_EPS):
                configs.append((x, split))
        share = max(self.order_share - (self.clock.now() - start), 0.0) / max(len(configs), 1)
        for x, split in configs:
            if self.clock.now() - start > self.order_share:
                break
            self.add_order(x, split, share)

    def library_bases(self) -> None:
        """The library's orders too: an action pattern of theirs (PipeOffload's, 1F1B with recompute) is a start."""
        if not self.request.library:
            return
        plain = self.order_problem(None, self.request.split)
        timer = Evaluator(plain)
        for name, orders in library_seeds(plain):
            self.bases.append((timer.evaluate(orders).makespan, f"{name}'s order", orders))


def periodic_plan(found: ActionResult) -> dict[tuple[int, int, int], float]:
    """A list scheduler's priorities (earlier first) from the times the block's re-timed orders run each compute
    job at."""
    priority = {}
    for r, order in enumerate(found.orders):
        for i, job in enumerate(order):
            if job[0] in COMPUTE:
                priority[job] = -found.evaluation.start[r][i]
    return priority


def periodic_with_actions(
    request: SynthRequest, problem: Problem, seconds: float, clock: WorkClock | None = None
) -> ActionResult | None:
    """The fastest periodic block with memory actions (`periodic_schedules` with `request.memory_actions`) found
    within `seconds` that keeps every limit once the checker's execution re-times its orders; None if none."""
    if seconds <= 0 or not cpsat.available():
        return None
    timer = Evaluator(problem)
    best: ActionResult | None = None
    budget, deadline = seconds / PERIODIC_SECONDS_PER_DET, safety_cap(seconds)
    for block in periodic_schedules(
        problem, budget, request.seed, 1, search_longer=True, actions=request.memory_actions, deadline=deadline
    ):
        if clock is not None:
            clock.spend(block.spent * PERIODIC_SECONDS_PER_DET)
        ev = timer.evaluate(block.orders)
        if ev.feasible and (best is None or ev.makespan < best.evaluation.makespan - ACTION_EPS):
            plan = Placement({(s, mb): a for s, a in block.choice.items() for mb in range(problem.microbatches)})
            best = ActionResult(block.orders, ev, plan, block.name)
    return best


class Infeasible(Exception):
    def __init__(self, problem: Problem):
        super().__init__("no schedule fits the memory limit")
        self.problem = problem
