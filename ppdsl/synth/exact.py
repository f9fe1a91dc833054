"""The schedule as a CP-SAT model (OR-Tools): the exact engine (`ppdsl synth --exact`), and the repair step of
the heuristic's large-neighbourhood search, which re-solves a window of a schedule with everything else fixed.

Model, in integer time (costs scaled to integers exactly, by their common denominator):
- an interval per job; each rank runs one job at a time (no-overlap);
- a job starts after its input: a forward after the forward of the stage before plus the link time, a backward
  (whole, or its input-gradient part I) after the backward of the stage after, a W after its I;
- micro-batches keep their order on every stage, per job type (as every published schedule does: this is what
  "optimal" means here, and it removes the symmetry of identical micro-batches);
- memory as a cumulative profile per rank: a micro-batch holds its forward's activation from the forward's start
  to the start of its backward (or I), then what I leaves to W until W starts; the checker's level after each
  job is exactly this profile at the job's start, so the rank's capacity is its memory limit;
- with `--split-backward auto`, each (stage, micro-batch) chooses a whole backward or I + W;
- the makespan is the latest end, plus the optimizer where it costs anything.

The rule is `ppdsl.analysis.timing`'s, as constraints: each precedence between stages comes from
`timing.input_stage` (the stage whose output a job waits for), its delay is `timing.link_delay` of the problem's
link table (the one `execute` uses), and the precedences on a stage are `timing.SAME_STAGE_INPUT`'s.
Transfers are delays of the link time. The checker also queues a rank's transfers one after another on its send
stream; that queue never forms when every job that sends lasts at least as long as a transfer, and then the
model is exact. Otherwise it is a relaxation: its bound is still a bound, and the schedule is re-timed by the
checker, so `optimal` is claimed only when the checker's makespan meets the proven bound.

Memory actions (recompute, offload, reload) are not in this model: `exact_actions.ActionModel` extends it with
them (through the hooks `_more_costs`, `_more_memory`, `_more_jobs` and `_orders`), for `--exact
--memory-actions`.

Searches use CP-SAT's deterministic time and one worker unless asked otherwise, so the same inputs give the
same schedule.
"""

from __future__ import annotations

import time

from ppdsl.analysis.timing import SAME_STAGE_INPUT, input_stage, link_delay
from ppdsl.plan.jobs import Job
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.cpsat import KINDS, SAFETY_NET_FACTOR, SAFETY_NET_SECONDS, Solution, integer_scale, load_cp_model
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order


class ScheduleModel:
    """The CP-SAT model of a problem. `whole` fixes, per (stage, micro-batch), a whole backward (True) or I + W
    (False); without it the problem's split mode decides (auto: the solver chooses)."""

    def __init__(
        self, problem: Problem, whole: dict[tuple[int, int], bool] | None = None, horizon: float | None = None
    ):
        self.cp = load_cp_model()
        p = self.problem = problem
        m, S = p.microbatches, p.nstages
        values = [p.cost[t][s] for t in KINDS for s in range(S)] + [link_delay(x) for t in KINDS for x in p.link[t]]
        self.k = integer_scale(values + list(p.optimizer_cost) + self._more_costs())
        memory = [x for t in KINDS for x in p.mem[t]] + [x for x in p.limit if x != float("inf")]
        self.km = integer_scale(memory + self._more_memory())
        if horizon is None:
            per_mb = [
                p.cost[FORWARD][s]
                + max(p.cost[BACKWARD][s], p.cost[BACKWARD_B][s] + p.cost[BACKWARD_W][s])
                + 2 * link_delay(p.link[FORWARD][s])
                for s in range(S)
            ]
            horizon = sum(per_mb) * m + sum(p.optimizer_cost)
        self.horizon = self.ticks(horizon) + 1
        model = self.model = self.cp.CpModel()
        self.start: dict[Job, object] = {}
        self.end: dict[Job, object] = {}
        self.present: dict[Job, object] = {}  # optional jobs -> their presence literal
        self.whole_lit: dict[tuple[int, int], object] = {}
        self.intervals: list[list] = [[] for _ in range(p.pp)]

        def choice(s: int, mb: int) -> str:
            if whole is not None and (s, mb) in whole:
                return "whole" if whole[(s, mb)] else "split"
            return {"yes": "split", "no": "whole", "auto": "either"}[p.split]

        self.choice = {(s, mb): choice(s, mb) for s in range(S) for mb in range(m)}
        for (s, mb), how in self.choice.items():
            self._job(FORWARD, s, mb)
            lit = None
            if how == "either":
                lit = model.NewBoolVar(f"whole_{s}_{mb}")
                self.whole_lit[(s, mb)] = lit
            if how in ("whole", "either"):
                self._job(BACKWARD, s, mb, lit)
            if how in ("split", "either"):
                self._job(BACKWARD_B, s, mb, None if lit is None else lit.Not())
                self._job(BACKWARD_W, s, mb, None if lit is None else lit.Not())
        self._more_jobs()
        for r in range(p.pp):
            model.AddNoOverlap(self.intervals[r])
        self._chains()
        self._memory()
        self.makespan = model.NewIntVar(0, self.horizon, "makespan")
        for job, en in self.end.items():
            c = model.Add(self.makespan >= en + self.ticks(p.optimizer_cost[p.rank_of[job[1]]]))
            if job in self.present:
                c.OnlyEnforceIf(self.present[job])
        model.Minimize(self.makespan)

    def ticks(self, x: float) -> int:
        return round(x * self.k)

    # hooks of a model with more job types (synth/exact_actions.py): their costs and memory in the integer
    # scales, and their jobs (made before each rank's no-overlap is posted)
    def _more_costs(self) -> list[float]:
        return []

    def _more_memory(self) -> list[float]:
        return []

    def _more_jobs(self) -> None:
        return None

    def in_order(self, kind: int, stage: int) -> bool:
        """Do the stage's jobs of this kind run in micro-batch order (see the module doc)?"""
        return True

    def _job(self, t: int, s: int, mb: int, lit=None) -> None:
        model, d = self.model, self.ticks(self.problem.cost[t][s])
        st = model.NewIntVar(0, self.horizon, f"s{t}_{s}_{mb}")
        en = model.NewIntVar(0, self.horizon, f"e{t}_{s}_{mb}")
        if lit is None:
            iv = model.NewIntervalVar(st, d, en, f"i{t}_{s}_{mb}")
        else:
            iv = model.NewOptionalIntervalVar(st, d, en, lit, f"i{t}_{s}_{mb}")
            self.present[(t, s, mb)] = lit
        self.start[(t, s, mb)], self.end[(t, s, mb)] = st, en
        self.intervals[self.problem.rank_of[s]].append(iv)

    def _gradient(self, s: int, mb: int):
        """(start, end) of the job that starts a micro-batch's backward on stage s and sends its gradient on."""
        how = self.choice[(s, mb)]
        if how != "either":
            job = (BACKWARD if how == "whole" else BACKWARD_B, s, mb)
            return self.start[job], self.end[job]
        model, lit = self.model, self.whole_lit[(s, mb)]
        gs = model.NewIntVar(0, self.horizon, f"gs_{s}_{mb}")
        ge = model.NewIntVar(0, self.horizon, f"ge_{s}_{mb}")
        for var, of in ((gs, self.start), (ge, self.end)):
            model.Add(var == of[(BACKWARD, s, mb)]).OnlyEnforceIf(lit)
            model.Add(var == of[(BACKWARD_B, s, mb)]).OnlyEnforceIf(lit.Not())
        return gs, ge

    def _split_literal(self, s: int, mb: int) -> tuple:
        """Enforcement literals under which (s, mb) runs as I + W (none when that is fixed)."""
        return (self.whole_lit[(s, mb)].Not(),) if (s, mb) in self.whole_lit else ()

    def _chains(self) -> None:
        p, model = self.problem, self.model
        m, S = p.microbatches, p.nstages
        self.grad = {(s, mb): self._gradient(s, mb) for s in range(S) for mb in range(m)}
        start, end = self.start, self.end
        for s in range(S):
            # the timing rule's inputs: the stage a forward's activation and a backward's gradient come from
            f_from, g_from = input_stage(FORWARD, s, S), input_stage(BACKWARD, s, S)
            link_f = 0 if f_from is None else self.ticks(link_delay(p.link[FORWARD][f_from]))
            link_g = 0 if g_from is None else self.ticks(link_delay(p.link[BACKWARD][g_from]))
            for mb in range(m):
                f = (FORWARD, s, mb)
                gs, _ = self.grad[(s, mb)]
                if f_from is not None:
                    model.Add(start[f] >= end[(FORWARD, f_from, mb)] + link_f)
                if mb > 0 and self.in_order(FORWARD, s):  # micro-batches in order on every stage
                    model.Add(start[f] >= end[(FORWARD, s, mb - 1)])
                if mb > 0 and self.in_order(BACKWARD, s):
                    model.Add(gs >= self.grad[(s, mb - 1)][1])
                model.Add(gs >= end[(SAME_STAGE_INPUT[BACKWARD], s, mb)])
                if g_from is not None:
                    model.Add(gs >= self.grad[(g_from, mb)][1] + link_g)
                if self.choice[(s, mb)] == "whole":
                    continue
                w, i = (BACKWARD_W, s, mb), (SAME_STAGE_INPUT[BACKWARD_W], s, mb)
                lits = self._split_literal(s, mb)
                c = model.Add(start[w] >= end[i])
                if lits:
                    c.OnlyEnforceIf(list(lits))
                if mb > 0 and self.choice[(s, mb - 1)] != "whole" and self.in_order(BACKWARD_W, s):
                    c = model.Add(start[w] >= end[(BACKWARD_W, s, mb - 1)])
                    both = (*lits, *self._split_literal(s, mb - 1))
                    if both:
                        c.OnlyEnforceIf(list(both))

    def _memory(self) -> None:
        """A forward's activation is held from its start to its backward's (or I's) start, then what I leaves
        until W starts: a cumulative profile per rank, within its limit."""
        p, model = self.problem, self.model
        for r in range(p.pp):
            cap = p.limit[r]
            if cap == float("inf"):
                continue
            holds, demands = [], []
            for s in p.stages_of[r]:
                held = round(p.mem[FORWARD][s] * self.km)
                rest = round((p.mem[FORWARD][s] + p.mem[BACKWARD_B][s]) * self.km)
                for mb in range(p.microbatches):
                    f = (FORWARD, s, mb)
                    gs, _ = self.grad[(s, mb)]
                    size = model.NewIntVar(0, self.horizon, f"hold_{s}_{mb}")  # (the interval ties it)
                    holds.append(model.NewIntervalVar(self.start[f], size, gs, f"hold_{s}_{mb}"))
                    demands.append(held)
                    if self.choice[(s, mb)] == "whole" or rest <= 0:
                        continue
                    i, w = (BACKWARD_B, s, mb), (BACKWARD_W, s, mb)
                    size = model.NewIntVar(0, self.horizon, f"holdw_{s}_{mb}")
                    lits = self._split_literal(s, mb)
                    if lits:
                        iv = model.NewOptionalIntervalVar(self.start[i], size, self.start[w], lits[0], f"hw_{s}_{mb}")
                    else:
                        iv = model.NewIntervalVar(self.start[i], size, self.start[w], f"hw_{s}_{mb}")
                    holds.append(iv)
                    demands.append(rest)
            model.AddCumulative(holds, demands, int(cap * self.km + 1e-6))
            # The same limit as precedences, which propagate far better than the cumulative profile: a stage
            # with room for k activations cannot start the forward of micro-batch mb + k before micro-batch
            # mb's backward has started (k + 1 of its activations would be held at once).
            for s in p.stages_of[r]:
                held = p.mem[FORWARD][s]
                if held <= 0:
                    continue
                k = int(cap / held + 1e-9)
                for mb in range(p.microbatches - k):
                    model.Add(self.start[(FORWARD, s, mb + k)] >= self.grad[(s, mb)][0])

    # ---------------------------------------------------------------- warm starts and neighbourhoods

    def hint(self, times: dict[Job, float]) -> None:
        for job, st in self.start.items():
            if job in times:
                self.model.AddHint(st, self.ticks(times[job]))
        for (s, mb), lit in self.whole_lit.items():
            self.model.AddHint(lit, (BACKWARD, s, mb) in times)

    def solve(
        self,
        seconds: float,
        workers: int = 1,
        seed: int = 0,
        deterministic: bool = True,
        parameters: dict | None = None,
    ) -> Solution:
        """`parameters`: CP-SAT's, over the ones set here (the budget, workers, seed)."""
        t0 = time.perf_counter()
        solver = self.cp.CpSolver()
        if deterministic:
            # CP-SAT's deterministic time runs about twice as fast as the clock here: half of it for the seconds
            solver.parameters.max_deterministic_time = max(seconds / 2, 0.05)
            # a safety net, not the budget, and wide: on a machine loaded 10x (2 cores, 20 busy processes) a 0.25 s
            # deterministic budget took over 2 s of the clock, and a net of 2 s made two identical runs differ
            solver.parameters.max_time_in_seconds = max(SAFETY_NET_FACTOR * seconds, SAFETY_NET_SECONDS)
        else:
            solver.parameters.max_time_in_seconds = max(seconds, 0.05)
        solver.parameters.num_workers = max(1, workers)
        solver.parameters.random_seed = seed
        for name, value in (parameters or {}).items():
            setattr(solver.parameters, name, value)
        status = solver.Solve(self.model)
        name = solver.StatusName(status)
        orders = self._orders(solver) if status in (self.cp.OPTIMAL, self.cp.FEASIBLE) else None
        bound = solver.BestObjectiveBound() / self.k if status != self.cp.INFEASIBLE else float("inf")
        return Solution(orders, bound, name, time.perf_counter() - t0)

    def _orders(self, solver) -> list[Order]:
        """Every rank's jobs of the solution, in the order of their starts."""
        placed = []
        for job, st in self.start.items():
            if job in self.present and not solver.BooleanValue(self.present[job]):
                continue
            placed.append((solver.Value(st), job[1], job[0], job))
        orders: list[Order] = [[] for _ in range(self.problem.pp)]
        for *_, job in sorted(placed):
            orders[self.problem.rank_of[job[1]]].append(job)
        return orders


def solve(
    problem: Problem,
    seconds: float,
    hint: dict[Job, float] | None = None,
    upper_bound: float | None = None,
    workers: int = 1,
    seed: int = 0,
    deterministic: bool = True,
) -> Solution:
    """Minimise the makespan over every schedule (the exact engine)."""
    model = ScheduleModel(problem, horizon=upper_bound)
    if hint is not None:
        model.hint(hint)
    return model.solve(seconds, workers, seed, deterministic)
