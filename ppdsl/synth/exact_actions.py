"""The whole schedule with memory actions as a CP-SAT model: `ppdsl synth --exact --memory-actions ...`, and the
polish of the actions search at small sizes.

`exact.ScheduleModel` with, per (stage, micro-batch), a choice of keep / recompute / offload (among the allowed
actions), and the action jobs as optional intervals, timed by rule 6 of `ppdsl.analysis.timing` as `execute`
times them (ACTIONS: a recompute R is compute, an offload O and a reload L are copies):
- R on the rank's compute (its no-overlap), after its forward; the backward (or I) of a recomputed micro-batch
  after R's end;
- O and L on the rank's copy stream (one no-overlap for both directions, one per direction with
  `comm offload duplex`): O after its forward's end, L after O's end, the backward (or I) after L's end;
- memory as exact half-open holds [allocation instant, free instant) in a cumulative per rank: a forward's kept
  part from its end, a recompute's part from R's end, an offloaded part from the forward's end to O's end and
  again from L's start, each until the backward's end (I's end for what I frees, W's end for the rest); at one
  instant this counts frees before allocations, as `analysis.memory.rank_levels` does when no two compute jobs
  of a rank end at once (every compute job costs more than nothing);
- the host limit, if set, as a cumulative over all ranks of [O's start, L's end);
- every job *anchored*, as `execute` runs a fixed order: a compute job starts at the end of its rank's job
  before it, at its input's arrival, at its reload's end, or at 0; a copy at the end of a compute job of its
  rank (the rank reaches it), at its data's ready time or at the end of its stream's copy before it. Without
  the anchoring a solution could wait where `execute` does not (a forward held back until an offload has
  freed room), and its orders would hold more memory when re-timed. With it, a solution's orders re-timed by
  `execute` give the solution's own times: the model is exact (when transfers never queue,
  `cpsat.transfers_never_queue`).
Unlike `exact`, micro-batches keep their order only in the first stage's forwards, which numbers them as they
enter (they are alike, so that loses no schedule): with actions they are no longer alike, and a kept
micro-batch's backward may pass an offloaded one's that waits for its reload (at pp 2, 2 micro-batches, a limit
of 1.2 and one activation on the host, the best schedule does: 10, against 12 in order). So `optimal` here is
over every schedule; the model with every stage in order (`in_order`) searches first, as its smaller search
finds fast schedules sooner, and hands its best on (`solve_with_actions`). The memory precedences of `exact`
("micro-batch mb + k after mb's backward") hold only when every activation stays on its rank, so this model
has none either.

The result is still re-timed by the checker's execution (`Evaluator`) before it is believed: `optimal` is claimed
only when that makespan meets the proven bound, every limit holds and the model is exact for the problem.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Iterable

from ppdsl.analysis.memory import MemoryActions
from ppdsl.analysis.timing import input_stage, link_delay
from ppdsl.plan.jobs import Job
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.bounds import memory_lower_bound
from ppdsl.synth.cpsat import GRADIENT, KINDS, Solution, hold_pieces, transfers_never_queue
from ppdsl.synth.exact import ScheduleModel
from ppdsl.synth.problem import ACTION_NAMES, KEEP, OFFLOAD, RECOMPUTE, Problem, stage_table
from ppdsl.synth.schedule import Evaluation, Evaluator, Order

HINT_SECONDS = 5.0  # the most the completion of a hint may take (it is propagation, with every start fixed)


def model_is_exact(problem: Problem) -> bool:
    """A solution's times are the checker's (see the module doc): transfers never queue and no compute job is
    free (two compute jobs ending at one instant would be counted in order, not at once)."""
    a = MemoryActions.of(problem.expansion)
    costs = [problem.cost[t][s] for t in KINDS for s in range(problem.nstages)]
    costs += [stage_table(problem, a.recompute)[s] for s in range(problem.nstages)]
    return transfers_never_queue(problem) and min(costs) > 0


class ActionModel(ScheduleModel):
    """The CP-SAT model of a problem built with memory actions (`build_problem(..., memory_actions=True)`);
    `allowed` names the actions it may choose (ACTION_NAMES); `in_order`: micro-batches in order on every stage
    (see `in_order`)."""

    def __init__(self, problem: Problem, allowed: Iterable[str], horizon: float | None = None, in_order: bool = False):
        self.ordered = in_order
        actions = MemoryActions.of(problem.expansion) if problem.expansion is not None else None
        if actions is None:
            raise ValueError("the problem was built without memory actions")
        self.types = actions
        self.allowed = [a for a in ACTION_NAMES if a in set(allowed)]
        self.duplex = bool(problem.expansion.copy_duplex)
        self.host_limit = problem.expansion.host_limit if OFFLOAD in self.allowed else None
        S = problem.nstages
        self.rcost = stage_table(problem, actions.recompute)
        self.ocost, self.lcost = stage_table(problem, actions.offload), stage_table(problem, actions.reload)
        self.rmem = stage_table(problem, actions.recompute, "mem_delta")
        self.moved = [-x for x in stage_table(problem, actions.offload, "mem_delta")]
        self.back = stage_table(problem, actions.reload, "mem_delta")
        if horizon is None:  # everything one after another: compute, copies and links
            p = problem
            per_mb = [
                p.cost[FORWARD][s]
                + max(p.cost[BACKWARD][s], p.cost[BACKWARD_B][s] + p.cost[BACKWARD_W][s])
                + self.rcost[s]
                + self.ocost[s]
                + self.lcost[s]
                + 2 * link_delay(p.link[FORWARD][s])
                for s in range(S)
            ]
            horizon = sum(per_mb) * p.microbatches + sum(p.optimizer_cost)
        self.action_lit: dict[tuple[int, int], dict[str, object]] = {}
        self.copy_intervals: list[list[list]] = []
        super().__init__(problem, horizon=horizon)

    # ---------------------------------------------------------------- the hooks of ScheduleModel

    def in_order(self, kind: int, stage: int) -> bool:
        """Every schedule: only the first stage's forwards in micro-batch order. Micro-batches are alike, so
        numbering them as they enter loses no schedule; any further order would: with actions they are no longer
        alike (one offloaded, waiting for its reload, lets a kept one's backward go first). `in_order`: every
        stage's jobs in order, as `exact` (fewer schedules, a smaller search)."""
        return self.ordered or (kind == FORWARD and stage == 0)

    def _more_costs(self) -> list[float]:
        return [*self.rcost, *self.ocost, *self.lcost]

    def _more_memory(self) -> list[float]:
        return [*self.rmem, *self.moved, *self.back] + ([self.host_limit] if self.host_limit is not None else [])

    def _more_jobs(self) -> None:
        p, model, a = self.problem, self.model, self.types
        self.copy_intervals = [[[] for _ in range(1 + self.duplex)] for _ in range(p.pp)]
        for s, mb in self.choice:
            lits = {name: model.NewBoolVar(f"{name}_{s}_{mb}") for name in (KEEP, *self.allowed)}
            model.AddExactlyOne(lits.values())
            self.action_lit[(s, mb)] = lits
            if RECOMPUTE in lits:
                self._job(a.recompute, s, mb, lits[RECOMPUTE], self.rcost[s])
            if OFFLOAD in lits:
                self._copy(a.offload, s, mb, lits[OFFLOAD], self.ocost[s], 0)
                self._copy(a.reload, s, mb, lits[OFFLOAD], self.lcost[s], 1 if self.duplex else 0)

    def _job(self, t: int, s: int, mb: int, lit=None, cost: float | None = None) -> None:
        if cost is None:
            return super()._job(t, s, mb, lit)
        self.intervals[self.problem.rank_of[s]].append(self._optional(t, s, mb, lit, cost))
        return None

    def _copy(self, t: int, s: int, mb: int, lit, cost: float, stream: int) -> None:
        self.copy_intervals[self.problem.rank_of[s]][stream].append((self._optional(t, s, mb, lit, cost), (t, s, mb)))

    def _optional(self, t: int, s: int, mb: int, lit, cost: float):
        """An action's job (a recompute on the rank's compute, or a copy): its start and end, in the schedule when
        `lit` holds; returns its interval, for the caller's no-overlap."""
        model, d = self.model, self.ticks(cost)
        st = model.NewIntVar(0, self.horizon, f"s{t}_{s}_{mb}")
        en = model.NewIntVar(0, self.horizon, f"e{t}_{s}_{mb}")
        iv = model.NewOptionalIntervalVar(st, d, en, lit, f"i{t}_{s}_{mb}")
        self.present[(t, s, mb)] = lit
        self.start[(t, s, mb)], self.end[(t, s, mb)] = st, en
        return iv

    def _chains(self) -> None:
        super()._chains()
        model, a = self.model, self.types
        for r in range(self.problem.pp):
            for stream in self.copy_intervals[r]:
                model.AddNoOverlap([iv for iv, _ in stream])
        for (s, mb), lits in self.action_lit.items():
            f, (gs, _) = (FORWARD, s, mb), self.grad[(s, mb)]
            if RECOMPUTE in lits:
                rec, lit = (a.recompute, s, mb), lits[RECOMPUTE]
                model.Add(self.start[rec] >= self.end[f]).OnlyEnforceIf(lit)
                model.Add(gs >= self.end[rec]).OnlyEnforceIf(lit)
            if OFFLOAD in lits:
                out, back, lit = (a.offload, s, mb), (a.reload, s, mb), lits[OFFLOAD]
                model.Add(self.start[out] >= self.end[f]).OnlyEnforceIf(lit)
                model.Add(self.start[back] >= self.end[out]).OnlyEnforceIf(lit)
                model.Add(gs >= self.end[back]).OnlyEnforceIf(lit)
        self._anchor()

    # ---------------------------------------------------------------- anchoring (see the module doc)

    def _node(self, job: Job) -> tuple[str, int, int]:
        """A job's place in the static order of its rank: B and I are one node (one of them runs)."""
        t, s, mb = job
        kind = {FORWARD: "F", BACKWARD: "G", BACKWARD_B: "G", BACKWARD_W: "W"}.get(t, "R")
        return kind, s, mb

    def _static_order(self, rank: int) -> dict:
        """node -> the nodes that certainly come after it on the rank (every schedule of the model)."""
        p, m = self.problem, self.problem.microbatches
        stages = p.stages_of[rank]
        after: dict = {}

        def edge(x, y) -> None:
            after.setdefault(x, set()).add(y)
            after.setdefault(y, set())

        for s in stages:
            for mb in range(m):
                edge(("F", s, mb), ("R", s, mb))
                edge(("R", s, mb), ("G", s, mb))
                edge(("G", s, mb), ("W", s, mb))
                if mb + 1 < m and self.in_order(FORWARD, s):
                    edge(("F", s, mb), ("F", s, mb + 1))
                if mb + 1 < m and self.in_order(BACKWARD, s):
                    edge(("G", s, mb), ("G", s, mb + 1))
        for s in stages:  # a micro-batch passes a rank's stages in turn, forward up and backward down
            for s2 in stages:
                for mb in range(m):
                    if s < s2:
                        edge(("F", s, mb), ("F", s2, mb))
                        edge(("G", s2, mb), ("G", s, mb))
                    edge(("F", s2, mb), ("G", s, mb))
        closure = {}
        for x in after:
            seen, todo = set(), list(after[x])
            while todo:
                y = todo.pop()
                if y not in seen:
                    seen.add(y)
                    todo.extend(after[y])
            closure[x] = seen
        return closure

    def _equal_one_of(self, var, options: list, present) -> None:
        """`var` equals one of `options` ((value expression, literal under which it exists or None)) when
        `present` (None: always)."""
        model, choices = self.model, []
        for value, exists in options:
            lit = model.NewBoolVar("anchor")
            model.Add(var == value).OnlyEnforceIf(lit)
            if exists is not None:
                model.AddImplication(lit, exists)
            if present is not None:
                model.AddImplication(lit, present)
            choices.append(lit)
        model.AddBoolOr(choices + ([present.Not()] if present is not None else []))

    def _anchor(self) -> None:
        for r in range(self.problem.pp):
            self._anchor_rank(r)

    def _anchor_rank(self, r: int) -> None:
        p, a = self.problem, self.types
        S = p.nstages
        closure = self._static_order(r)
        always = [x for x in closure if x[0] in ("F", "G")]  # (B or I: one of them runs)
        compute = [job for job in self.start if p.rank_of[job[1]] == r and not a.copies(job[0])]

        def before(x, y) -> bool:
            return y in closure[x]

        def may_precede(k: Job, j: Job) -> bool:
            """Can k be the job just before j on the rank (not after it, nor always with a job between)?"""
            nk, nj = self._node(k), self._node(j)
            if nk == nj or before(nj, nk):
                return False
            return not any(z not in (nk, nj) and before(nk, z) and before(z, nj) for z in always)

        for j in compute:
            t, s, mb = j
            options = [(self.end[k], self.present.get(k)) for k in compute if may_precede(k, j)]
            if t == FORWARD:
                frm = input_stage(FORWARD, s, S)
                if frm is None:
                    options.append((0, None))
                else:
                    link = self.ticks(link_delay(p.link[FORWARD][frm]))
                    options.append((self.end[(FORWARD, frm, mb)] + link, None))
            elif t in GRADIENT:
                frm = input_stage(BACKWARD, s, S)
                if frm is not None:
                    link = self.ticks(link_delay(p.link[BACKWARD][frm]))
                    options.append((self.grad[(frm, mb)][1] + link, None))
                lits = self.action_lit[(s, mb)]
                if OFFLOAD in lits:
                    options.append((self.end[(a.reload, s, mb)], lits[OFFLOAD]))
            self._equal_one_of(self.start[j], options, self.present.get(j))
        for stream in self.copy_intervals[r]:
            for _, c in stream:
                t, s, mb = c
                f, g, rec = ("F", s, mb), ("G", s, mb), ("R", s, mb)
                # the rank reaches it: a compute job ends then, one from its forward on and before its backward
                options = []
                for k in compute:
                    nk = self._node(k)
                    if not before(nk, f) and nk not in (g, rec) and not before(g, nk):
                        options.append((self.end[k], self.present.get(k)))
                if t == a.reload:  # its data is ready (an offload's: its forward's end, among the above)
                    options.append((self.end[(a.offload, s, mb)], None))
                options += [(self.end[o], self.present[o]) for _, o in stream if o not in (c, (a.offload, s, mb))]
                self._equal_one_of(self.start[c], options, self.present[c])

    # ---------------------------------------------------------------- memory

    def _memory(self) -> None:
        p, model, a = self.problem, self.model, self.types
        km = self.km

        def amount(x: float) -> int:
            return round(x * km)

        host: list[tuple[object, int]] = []
        for r in range(p.pp):
            holds: list[tuple[object, int]] = []
            for s in p.stages_of[r]:
                pieces = self._pieces(s)
                for mb in range(p.microbatches):
                    ends = self._frees(s, mb)
                    lits = self.action_lit[(s, mb)]
                    spans: dict[tuple, dict[str, int]] = {}
                    for option in lits:
                        for since, until, x in pieces[option]:
                            if amount(x) > 0:
                                spans.setdefault((since, until), {})[option] = amount(x)
                    for (since, until), by_option in spans.items():
                        st, en = self._instant(since, s, mb, ends), self._instant(until, s, mb, ends)
                        base = min(by_option.get(o, 0) for o in lits)
                        if base > 0:
                            holds.append((self._hold(st, en, None), base))
                        for option, x in by_option.items():
                            if x > base:
                                holds.append((self._hold(st, en, lits[option]), x - base))
                    if OFFLOAD in lits and self.host_limit is not None and amount(self.moved[s]) > 0:
                        iv = self._hold(self.start[(a.offload, s, mb)], self.end[(a.reload, s, mb)], lits[OFFLOAD])
                        host.append((iv, amount(self.moved[s])))
            if p.limit[r] != float("inf") and holds:
                model.AddCumulative([h for h, _ in holds], [x for _, x in holds], int(p.limit[r] * km + 1e-6))
        if host:
            model.AddCumulative([h for h, _ in host], [x for _, x in host], int(self.host_limit * km + 1e-6))

    def _pieces(self, s: int) -> dict[str, list[tuple[str, str, float]]]:
        return hold_pieces(self.problem, s, self.choice_of_stage(s), self.rmem[s], self.moved[s], self.back[s])

    def choice_of_stage(self, s: int) -> str:
        """whole | split | either, as every micro-batch of the stage has it (they share the problem's mode)."""
        return self.choice[(s, 0)]

    def _frees(self, s: int, mb: int) -> dict[str, object]:
        """The instants A and B of `_pieces` as variables."""
        _, ga = self.grad[(s, mb)]
        how = self.choice[(s, mb)]
        if how == "whole":
            return {"A": ga, "B": ga}
        if how == "split":
            return {"A": ga, "B": self.end[(BACKWARD_W, s, mb)]}
        gb = self.model.NewIntVar(0, self.horizon, f"gb_{s}_{mb}")
        lit = self.whole_lit[(s, mb)]
        self.model.Add(gb == self.end[(BACKWARD, s, mb)]).OnlyEnforceIf(lit)
        self.model.Add(gb == self.end[(BACKWARD_W, s, mb)]).OnlyEnforceIf(lit.Not())
        return {"A": ga, "B": gb}

    def _instant(self, name: str, s: int, mb: int, ends: dict[str, object]):
        a = self.types
        if name in ends:
            return ends[name]
        return {
            "F": lambda: self.end[(FORWARD, s, mb)],
            "R": lambda: self.end[(a.recompute, s, mb)],
            "O": lambda: self.end[(a.offload, s, mb)],
            "L": lambda: self.start[(a.reload, s, mb)],
        }[name]()

    def _hold(self, since, until, lit):
        size = self.model.NewIntVar(0, self.horizon, "held")
        if lit is None:
            return self.model.NewIntervalVar(since, size, until, "hold")
        return self.model.NewOptionalIntervalVar(since, size, until, lit, "hold")

    # ---------------------------------------------------------------- solutions and hints

    def _orders(self, solver) -> list[Order]:
        """Compute jobs in the order of their starts; a copy after every compute job of its rank that ends at or
        before its start, before those that end after it (the module doc: then `execute` times it as here)."""
        p, a = self.problem, self.types
        compute: list[list] = [[] for _ in range(p.pp)]
        copies: list[list] = [[] for _ in range(p.pp)]
        for job, st in self.start.items():
            if job in self.present and not solver.BooleanValue(self.present[job]):
                continue
            row = copies if a.copies(job[0]) else compute
            row[p.rank_of[job[1]]].append((solver.Value(st), solver.Value(self.end[job]), job[1], job[0], job))
        orders: list[Order] = []
        for r in range(p.pp):
            jobs = sorted(compute[r])
            ends = [e for _, e, *_ in jobs]
            slots: dict[int, list] = {}
            for st, *_, job in sorted(copies[r]):
                slots.setdefault(bisect_right(ends, st), []).append(job)
            row: Order = []
            for i, (*_, job) in enumerate(jobs):
                row.extend(slots.get(i, ()))
                row.append(job)
            row.extend(slots.get(len(jobs), ()))
            orders.append(row)
        return orders

    def hint_schedule(self, orders: list[Order], ev: Evaluation) -> bool:
        """Start the search from a schedule (its orders and the checker's times of them). Every variable is
        hinted, by a first solve with the schedule's starts and choices fixed; False when the schedule is not one
        of the model's (micro-batches out of order), and then only its starts and choices are hinted."""
        a, model = self.types, self.model
        present = set()
        for r, order in enumerate(orders):
            for i, job in enumerate(order):
                present.add(job)
                if job in self.start:
                    model.AddHint(self.start[job], self.ticks(ev.start[r][i]))
        for (s, mb), lits in self.action_lit.items():
            chosen = KEEP
            if (a.recompute, s, mb) in present:
                chosen = RECOMPUTE
            elif (a.offload, s, mb) in present:
                chosen = OFFLOAD
            for option, lit in lits.items():
                model.AddHint(lit, option == chosen)
        for (s, mb), lit in self.whole_lit.items():
            model.AddHint(lit, (BACKWARD, s, mb) in present)
        solver = self.cp.CpSolver()
        solver.parameters.fix_variables_to_their_hinted_value = True
        solver.parameters.stop_after_first_solution = True
        # (deterministic time: a wall-clock limit would let the machine's load decide whether the hint is taken)
        solver.parameters.max_deterministic_time = HINT_SECONDS
        solver.parameters.max_time_in_seconds = 20 * HINT_SECONDS + 1.0  # a safety net
        solver.parameters.num_workers = 1
        status = solver.Solve(model)
        if status not in (self.cp.OPTIMAL, self.cp.FEASIBLE):
            return False
        model.ClearHints()
        for i in range(len(model.Proto().variables)):
            var = model.GetIntVarFromProtoIndex(i)
            model.AddHint(var, solver.Value(var))
        return True


ORDERED_SHARE = 0.5  # of a proof's time, for the model with micro-batches in order (see `solve_with_actions`)


def solve_with_actions(
    problem: Problem,
    allowed: Iterable[str],
    seconds: float,
    start: tuple[list[Order], Evaluation] | None = None,
    workers: int = 1,
    seed: int = 0,
    deterministic: bool = True,
    proof: bool = True,
) -> tuple[Solution, bool]:
    """Minimise the makespan with the allowed actions, from `start`; `proof`: a search that is to prove its
    result (`--exact`), not a short polish. Two models, each from the best schedule so far: micro-batches in
    order on every stage (as `exact`: a smaller search, which finds faster schedules sooner: 28 against 30 at
    pp 4, 8 micro-batches, limit 2 in the same time), then, for a proof, every schedule (the class doc), unless
    the best so far already meets `memory_lower_bound` (each model has it as the makespan's floor). The
    solution's bound is the larger of the two; without a proof it is 0, the first's holding only for schedules
    in order.
    Returns the solution (its orders: the best found, `start`'s if neither improved on it) and whether a model
    took up its start as its first solution."""
    t0 = time.perf_counter()
    timer = Evaluator(problem)
    best = start
    floor = memory_lower_bound(problem, allowed)  # no schedule beats it, in order or not
    first, hinted = _solve(
        problem, allowed, seconds * (ORDERED_SHARE if proof else 1.0), best, True, workers, seed, deterministic, floor
    )
    if first.orders is not None:
        ev = timer.evaluate(first.orders)
        if ev.feasible and (best is None or ev.makespan < best[1].makespan - 1e-9):
            best = (first.orders, ev)
    last = first
    # the model of every schedule only when the best so far is not already at the bound of every schedule
    if proof and not (best is not None and best[1].makespan <= floor + 1e-9):
        left = seconds * (1 - ORDERED_SHARE)  # (counted, not timed: the same inputs give the same schedule)
        last, hinted_free = _solve(problem, allowed, left, best, False, workers, seed, deterministic, floor)
        hinted = hinted or hinted_free
    orders = last.orders if last.orders is not None else (best[0] if best is not None else None)
    bound = max(last.bound, floor) if proof else 0.0
    return Solution(orders, bound, last.status, time.perf_counter() - t0), hinted


def _solve(
    problem: Problem,
    allowed: Iterable[str],
    seconds: float,
    start: tuple[list[Order], Evaluation] | None,
    in_order: bool,
    workers: int,
    seed: int,
    deterministic: bool,
    floor: float,
) -> tuple[Solution, bool]:
    horizon = start[1].makespan if start is not None else None
    model = ActionModel(problem, allowed, horizon=horizon, in_order=in_order)
    # no schedule beats `floor` (`memory_lower_bound`): the search stops when it gets there
    model.model.Add(model.makespan >= math.floor(floor * model.k + 1e-9))
    hinted = model.hint_schedule(*start) if start is not None else False
    left = max(seconds, 0.1)
    # The budget is CP-SAT's deterministic time (as `exact`), with its wall-clock safety net: a wall-clock budget
    # would let the machine's load decide the schedule. The model in order goes without presolve, which costs it
    # more than it saves and delays taking up the hint.
    parameters: dict = {}
    if in_order:
        parameters["cp_model_presolve"] = False
    return model.solve(left, workers, seed, deterministic, parameters), hinted


def drop_needless_actions(evaluator: Evaluator, orders: list[Order], ev: Evaluation) -> tuple[list[Order], Evaluation]:
    """The model does not count actions, so a solution may recompute or offload where nothing needs it: drop
    each (stage, micro-batch)'s action whose removal keeps every limit and is no slower (timed by `evaluator`)."""
    types = MemoryActions.of(evaluator.problem.expansion)
    moves = (types.recompute, types.offload, types.reload)
    acted = sorted({(s, mb) for order in orders for t, s, mb in order if t in (types.recompute, types.offload)})
    for key in acted:
        trial = [[job for job in order if job[0] not in moves or job[1:] != key] for order in orders]
        found = evaluator.evaluate(trial)
        if found.feasible and found.makespan <= ev.makespan + 1e-9:
            orders, ev = trial, found
    return orders, ev
