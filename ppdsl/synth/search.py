"""The search: from policies to schedules, improved step by step, each step proven by the checker's timing.

1. A portfolio of list-scheduling policies (`greedy.Policy`), the best refined rank by rank (per-rank admission,
   memory reserve and W lag), plus any seed schedules (the library's, at these sizes and within the limit).
2. Local search along the critical path (`improve`).
3. With OR-Tools: large-neighbourhood search, CP-SAT re-solving small windows of the schedule with the rest
   fixed (`lns`, `window`); then, when the problem is small, the whole problem in CP-SAT from the best schedule,
   which can prove it optimal (`exact`).
4. `--split-backward auto`: an I directly followed by its own W becomes one whole backward where that is no
   slower (fewer jobs to run).
The search stops at the lower bound (the schedule is then optimal) or when its budget is spent. The budget is
counted in work, not wall time (job evaluations, CP-SAT's deterministic time), so the same inputs give the same
schedule; `time_limit` sets it in roughly seconds.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OFFLOAD_NAME, RECOMPUTE_NAME
from ppdsl.synth import cpsat, exact
from ppdsl.synth.bounds import lower_bound
from ppdsl.synth.clock import WORK_PER_SECOND, cpu, safety_cap
from ppdsl.synth.greedy import RANK_KNOBS, Policy, list_schedule
from ppdsl.synth.improve import improve
from ppdsl.synth.lns import lns
from ppdsl.synth.periodic import Block, periodic_schedules
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Evaluation, Evaluator, Order, complete, preference, total_score
from ppdsl.synth.vfill import fill_seeds, staircase_policies
from ppdsl.synth.weights import placements

EPS = 1e-9
CP_SAT_WHOLE_MAX_JOBS = 300  # up to this, CP-SAT also runs on the whole problem (to prove the schedule optimal)
PERIODIC_SECONDS_PER_DET = 4.0  # seconds of CPU per deterministic second of CP-SAT on block models
# of the budget left when each step starts
FRACTIONS = {"periodic": 0.15, "refine": 0.2, "race": 0.4, "local": 0.15, "windows": 0.6}
RACE_WITHIN = 0.1  # starts this much slower than the best still race


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
        """Large-neighbourhood search over windows of the best schedule (`lns`), for about `seconds`."""
        if self.best is None or self.reached_bound() or not cpsat.available():
            return
        orders, _, origin = self.best
        found_orders, found, spent = lns(
            self.evaluator,
            orders,
            seconds,
            window=lns_window(self.problem.pp),
            target=self.bound,
            seed=self.seed,
            out_of_time=self.budget.capped,
        )
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


class Infeasible(Exception):
    def __init__(self, problem: Problem):
        super().__init__("no schedule fits the memory limit")
        self.problem = problem
