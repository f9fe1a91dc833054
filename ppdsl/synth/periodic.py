"""Periodic schedules: one micro-batch's jobs as a block, repeated every period, found exactly with CP-SAT.

In a pipeline's steady state every micro-batch goes through the same motions, one period after the one before
(the building blocks of ZB-V and of "Pipeline Parallelism with Controllable Memory"). The block is one
micro-batch's jobs on every stage, each at an offset from the micro-batch's first forward; micro-batch k runs
job j at offset(j) + k * T. The model chooses the offsets for a period T:
- a job starts after its input (the forward of the stage before, the backward of the stage after, plus the
  link time; W after its I): the timing rule's (`ppdsl.analysis.timing`), as constraints;
- each rank runs one job at a time modulo T (a job and its copy one period earlier never overlap another);
- memory: in the steady state a forward's activation is held from the forward to its backward (or I), what I
  leaves until W; a hold longer than k periods counts k micro-batches in full, the rest as a partial hold at its
  phase in the period; the sum never exceeds the rank's limit (the checker's level after each job is the level
  at its start, so this is the limit the checker applies);
- the block is as short as possible: the last micro-batch's last job ends at (m - 1) * T + the block's end.
The orders read off the repeated block (every rank's jobs by start time) keep its memory levels, and in the
warm-up and cool-down fewer micro-batches are in flight; the checker's timing then runs every job as soon as its
rank and input allow, which closes the gaps the missing micro-batches leave. The period is at least the busiest
rank's work per micro-batch; a longer one can fit a tighter memory limit, so a few are tried. Where CP-SAT
finds no block in its time, it tries again from a block built by hand (`modulo.rotation_block`: a tiling of
the period, which it finds slowly alone), taken as it is when it fits and CP-SAT still finds none.

With memory actions (a problem built with them, `BlockActions`) the block also chooses, per stage and so the same
for every micro-batch, keep, recompute or offload, and places the recompute on the rank's compute and the offload
and reload on its copy stream (one per direction with duplex copies), each modulo the period like the compute.
Memory is then counted as the checker counts it (`ppdsl.analysis.memory`): half-open holds from a job's end (a
reload's start) to the end of the job that frees it, a recompute's part from its end, an offload's moved part
away from the offload's end to the reload's start; the host holds what is moved from the offload's start to the
reload's end. The checker starts a copy as soon as its position in the order allows (rule 6); a model whose
copies may start later is a relaxation, solved first (it is much faster, and its copies mostly start as soon as
they can anyway). Its orders are re-timed by the checker's execution, and only a re-timed schedule within every
limit counts; when one breaks a limit, the period is solved again with each copy anchored (`_anchor`: at the end
of a compute job of its rank, its data's arrival or its stream's previous copy). The anchoring makes the steady
state exact, not the warm-up: there the checker runs forwards back to back, and copies slower than the compute
they overlap fall behind and hold more than the steady state; such a block is dropped for a longer period.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field
from typing import Any

from ppdsl.analysis.memory import MemoryActions
from ppdsl.analysis.timing import SAME_STAGE_INPUT, input_stage, link_delay
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.clock import cpu
from ppdsl.synth.cpsat import Statics, load_cp_model
from ppdsl.synth.modulo import BlockJob, rotation_block
from ppdsl.synth.problem import KEEP, OFFLOAD, RECOMPUTE, Problem
from ppdsl.synth.schedule import Evaluator, Order

MAX_PERIOD_TRIES = 16  # periods tried before giving up (a tight limit needs a longer period than the work's)
RELAXED_SHARE = 0.75  # of a period's time with actions: the model without the copies' anchoring (`_solve_with_actions`)
# what building a hand-made block costs, counted as CP-SAT's deterministic seconds per job placed (about 4 us
# of CPU per job with its memory check, measured at pp = 8; CP-SAT's seconds count 4 of CPU, see search.py)
BUILD_SECONDS_PER_JOB = 1e-6


@dataclass(frozen=True)
class BlockActions:
    """The memory actions a block may choose per stage, in the integer scales of its `Statics`."""

    types: MemoryActions
    allowed: tuple[str, ...]  # of RECOMPUTE, OFFLOAD
    cost: dict[int, list[int]]  # recompute / offload / reload type -> [stage] its cost in ticks
    rebuilt: list[int]  # [stage] what a recompute allocates at its end (its forward keeps the rest)
    moved: list[int]  # [stage] what an offload moves to the host (and its reload brings back)
    duplex: bool  # one copy stream per direction (else one for both)
    host_cap: int | None  # all ranks' offloaded memory together

    def jobs(self, action: str, stage: int) -> list[BlockJob]:
        """The jobs `action` adds to a micro-batch's block on `stage`."""
        a = self.types
        return [(a.recompute, stage)] if action == RECOMPUTE else [(a.offload, stage), (a.reload, stage)]


def block_statics(problem: Problem, allowed: Iterable[str] = ()) -> tuple[Statics, BlockActions | None]:
    """The block's integer scales, and the memory actions it may choose (None: the problem was built without
    them, or none is allowed)."""
    exp = problem.expansion
    types = MemoryActions.of(exp) if exp is not None else None
    wanted = tuple(a for a in (RECOMPUTE, OFFLOAD) if a in set(allowed))
    if exp is None or types is None or not wanted:
        return Statics(problem, problem.sequential()), None
    stages = range(problem.nstages)

    def table(values: list[list[list[float]]], t: int) -> list[float]:
        return [values[t][problem.rank_of[s]][problem.chunk_of[s]] for s in stages]

    costs = {t: table(exp.cost, t) for t in (types.recompute, types.offload, types.reload)}
    rebuilt = table(exp.mem_delta, types.recompute)
    moved = [-x for x in table(exp.mem_delta, types.offload)]
    host = [] if exp.host_limit is None else [exp.host_limit]
    times = [x for row in costs.values() for x in row]
    st = Statics(problem, problem.sequential(), times, rebuilt + moved + host)
    actions = BlockActions(
        types,
        wanted,
        {t: [st.tick(x) for x in row] for t, row in costs.items()},
        [round(x * st.km) for x in rebuilt],
        [round(x * st.km) for x in moved],
        exp.copy_duplex,
        None if exp.host_limit is None else int(exp.host_limit * st.km + 1e-6),
    )
    return st, actions


def job_cost(st: Statics, actions: BlockActions | None, job: BlockJob) -> int:
    """A block job's cost in ticks (a compute job's or a memory action's)."""
    t, s = job
    if actions is not None and t in actions.cost:
        return actions.cost[t][s]
    return st.cost[t][s]


def kinds(problem: Problem, split: bool) -> list[BlockJob]:
    types = (FORWARD, BACKWARD_B, BACKWARD_W) if split else (FORWARD, BACKWARD)
    return [(t, s) for s in range(problem.nstages) for t in types]


def minimum_period(st: Statics, split: bool, actions: BlockActions | None = None) -> int:
    """The shortest period any block can have: the busiest rank's work per micro-batch, and (memory) the time
    a micro-batch's activations are held on a rank at the least, over the rank's limit (a level at most the
    limit holds at most limit * T of activation-time per period). With memory actions a stage holds least with
    the action that holds least (`_least_hold`)."""
    p = st.problem
    S = p.nstages
    grad = BACKWARD_B if split else BACKWARD
    types = (FORWARD, BACKWARD_B, BACKWARD_W) if split else (FORWARD, BACKWARD)
    link = [[st.tick(link_delay(x)) for x in row] for row in p.link]
    # the shortest time from a forward's start on stage s to its backward's start: the round trip beyond s
    trip = [0] * S
    for s in range(S - 1, -1, -1):
        after = input_stage(grad, s, S)  # where the gradient comes from (and the activation goes)
        if after is None:
            trip[s] = st.cost[FORWARD][s]
        else:
            trip[s] = st.cost[FORWARD][s] + link[FORWARD][s] + trip[after] + st.cost[grad][after] + link[grad][after]
    period = 0
    for r in range(p.pp):
        period = max(period, sum(st.cost[t][s] for s in p.stages_of[r] for t in types))
        if st.cap[r] is not None and st.cap[r] > 0:
            held = 0
            for s in p.stages_of[r]:
                if actions is not None:
                    held += _least_hold(st, actions, s, trip[s], grad)
                    if split:
                        held += max(st.mem[FORWARD][s] + st.mem[BACKWARD_B][s], 0) * st.cost[BACKWARD_W][s]
                    continue
                held += st.mem[FORWARD][s] * trip[s]
                if split:
                    held += max(st.mem[FORWARD][s] + st.mem[BACKWARD_B][s], 0) * st.cost[BACKWARD_B][s]
            period = max(period, -(-held // st.cap[r]))
    return period


def _least_hold(st: Statics, actions: BlockActions, s: int, trip: int, grad: int) -> int:
    """The least activation-time a micro-batch holds on stage `s` from its forward's end to its gradient job's
    end, over keep and the allowed actions (a recompute's part is held at least through the gradient job, an
    offload's at least through both copies and it)."""
    a = actions.types
    held = trip - st.cost[FORWARD][s] + st.cost[grad][s]
    whole = st.mem[FORWARD][s]
    least = whole * held
    if RECOMPUTE in actions.allowed:
        part = actions.rebuilt[s]
        least = min(least, max(whole - part, 0) * held + part * st.cost[grad][s])
    if OFFLOAD in actions.allowed:
        part, copies = actions.moved[s], actions.cost[a.offload][s] + actions.cost[a.reload][s]
        least = min(least, max(whole - part, 0) * held + part * (copies + st.cost[grad][s]))
    return max(least, 0)


# A hold of memory for `BlockModel._cumulative`: (begin, the begin's phase, end, amount, present), the begin and
# end as linear expressions of the offsets, present a literal (None: always held)
Segment = tuple[Any, Any, Any, int, Any]  # (CP-SAT expressions and literal: the model's own types)


class BlockModel:
    """The offsets of one micro-batch's jobs for period `period` (in ticks of `st`); with `actions`, also which
    memory action each stage takes and where its jobs go (`anchored`: each copy as soon as its position allows,
    `_anchor`; without, a relaxation whose re-timed orders may hold memory earlier than it counts)."""

    def __init__(
        self, st: Statics, period: int, split: bool, actions: BlockActions | None = None, anchored: bool = True
    ):
        self.cp = load_cp_model()
        p = self.problem = st.problem
        self.st, self.period, self.split, self.actions = st, period, split, actions
        model = self.model = self.cp.CpModel()
        jobs = self.jobs = kinds(p, split)
        S, T = p.nstages, period
        link = [[st.tick(link_delay(x)) for x in row] for row in p.link]
        # the actions' jobs, in the block only when their stage takes the action (`present`)
        optional = [] if actions is None else [j for s in range(S) for a in actions.allowed for j in actions.jobs(a, s)]
        extra = sum(self.cost(job) for job in optional)
        horizon = sum(st.cost[t][s] for t, s in jobs) + extra + sum(max(row) for row in link) * 2 * S + T
        self.horizon = horizon
        offset, phase = {}, {}
        for job in jobs + optional:
            offset[job] = model.NewIntVar(0, horizon, "")
            phase[job] = model.NewIntVar(0, T - 1, "")
            model.AddModuloEquality(phase[job], offset[job], T)
        self.offset, self.phase = offset, phase
        self.present: dict[BlockJob, Any] = {}  # an action's job -> its literal: is it in the block
        self.choice: dict[int, dict[str, Any]] = {}  # stage -> keep / action -> its literal: chosen
        self._end_phase: dict[BlockJob, Any] = {}
        grad = BACKWARD_B if split else BACKWARD
        cost = self.cost

        model.Add(offset[(FORWARD, 0)] == 0)
        for s in range(S):  # the timing rule's inputs (see ppdsl.analysis.timing)
            f, g = (FORWARD, s), (grad, s)
            f_from, g_from = input_stage(FORWARD, s, S), input_stage(grad, s, S)
            if f_from is not None:
                src = (FORWARD, f_from)
                model.Add(offset[f] >= offset[src] + cost(src) + link[FORWARD][f_from])
            model.Add(offset[g] >= offset[(SAME_STAGE_INPUT[grad], s)] + cost((SAME_STAGE_INPUT[grad], s)))
            if g_from is not None:
                src = (grad, g_from)
                model.Add(offset[g] >= offset[src] + cost(src) + link[grad][g_from])
            if split:
                w = SAME_STAGE_INPUT[BACKWARD_W]
                model.Add(offset[(BACKWARD_W, s)] >= offset[(w, s)] + cost((w, s)))
        if actions is not None:
            self._choose_actions(grad)
        # one job at a time on each rank, modulo the period (and one copy at a time on each copy stream)
        for r in range(p.pp):
            mine = [job for job in jobs + optional if p.rank_of[job[1]] == r and cost(job) > 0]
            computes = [job for job in mine if not self.is_copy(job)]
            model.AddNoOverlap([x for job in computes for x in self._modulo_intervals(job)])
            if actions is None:
                continue
            copies = [job for job in mine if self.is_copy(job)]
            a = actions.types
            streams = [[j for j in copies if j[0] == t] for t in (a.offload, a.reload)] if actions.duplex else [copies]
            for stream in streams:
                model.AddNoOverlap([x for job in stream for x in self._modulo_intervals(job)])
                for job in stream if anchored else ():
                    self._anchor(job, computes, stream)
        if actions is None:
            self._memory()
        else:
            self._exact_memory(grad)
        self.span = model.NewIntVar(0, horizon + max(st.cost[t][s] for t, s in jobs), "span")
        for job in jobs:
            model.Add(self.span >= offset[job] + cost(job) + st.opt[p.rank_of[job[1]]])
        if actions is None:
            model.Minimize(self.span)
        else:  # the shortest block, and of those the one with the fewest actions (each costs compute or copies)
            acted = [lit for lits in self.choice.values() for a, lit in lits.items() if a != KEEP]
            model.Minimize(self.span * (len(acted) + 1) + sum(acted))

    def cost(self, job: BlockJob) -> int:
        return job_cost(self.st, self.actions, job)

    def is_copy(self, job: BlockJob) -> bool:
        return self.actions is not None and self.actions.types.copies(job[0])

    def _modulo_intervals(self, job: BlockJob) -> list:
        """The job's interval at its phase and one period earlier (so that it also excludes what wraps)."""
        at, d, lit, T = self.phase[job], self.cost(job), self.present.get(job), self.period
        if lit is None:
            return [self.model.NewIntervalVar(at, d, at + d, ""), self.model.NewIntervalVar(at - T, d, at - T + d, "")]
        return [
            self.model.NewOptionalIntervalVar(at, d, at + d, lit, ""),
            self.model.NewOptionalIntervalVar(at - T, d, at - T + d, lit, ""),
        ]

    def end(self, job: BlockJob):
        return self.offset[job] + self.cost(job)

    def end_phase(self, job: BlockJob):
        """Where in the period the job ends."""
        if job not in self._end_phase:
            v = self._end_phase[job] = self.model.NewIntVar(0, self.period - 1, "")
            self.model.AddModuloEquality(v, self.end(job), self.period)
        return self._end_phase[job]

    def _choose_actions(self, grad: int) -> None:
        """Per stage keep or one allowed action, the same for every micro-batch; an action's jobs between its
        forward and its gradient job (a recompute on the compute, an offload and then its reload on the copy
        stream, the gradient job after the reload's end)."""
        actions, model, offset = self.actions, self.model, self.offset
        assert actions is not None
        a = actions.types
        for s in range(self.problem.nstages):
            lits = {KEEP: model.NewBoolVar("")} | {x: model.NewBoolVar("") for x in actions.allowed}
            model.AddExactlyOne(lits.values())
            self.choice[s] = lits
            for x in actions.allowed:
                for job in actions.jobs(x, s):
                    self.present[job] = lits[x]
                    model.Add(offset[job] == 0).OnlyEnforceIf(lits[x].Not())  # (an absent job: one value only)
            f, g = (FORWARD, s), (grad, s)
            if RECOMPUTE in lits:
                rj, lit = (a.recompute, s), lits[RECOMPUTE]
                model.Add(offset[rj] >= self.end(f)).OnlyEnforceIf(lit)
                model.Add(offset[g] >= self.end(rj)).OnlyEnforceIf(lit)
            if OFFLOAD in lits:
                o, ld, lit = (a.offload, s), (a.reload, s), lits[OFFLOAD]
                model.Add(offset[o] >= self.end(f)).OnlyEnforceIf(lit)
                model.Add(offset[ld] >= self.end(o)).OnlyEnforceIf(lit)
                model.Add(offset[g] >= self.end(ld)).OnlyEnforceIf(lit)

    def _anchor(self, job: BlockJob, computes: list[BlockJob], stream: list[BlockJob]) -> None:
        """A copy starts as soon as its position in the order lets it (rule 6): at its data's arrival, or the end
        of a compute job of its rank (the one before it in the order), or of the copy before it on its stream.
        A copy that started later would start earlier when the order is re-timed, and hold memory earlier."""
        assert self.actions is not None
        model, t, s = self.model, job[0], job[1]
        source = (FORWARD, s) if t == self.actions.types.offload else (self.actions.types.offload, s)
        ready = model.NewBoolVar("")
        model.Add(self.offset[job] == self.end(source)).OnlyEnforceIf(ready)
        anchors = [ready]
        for other in computes + [c for c in stream if c != job]:
            lit = model.NewBoolVar("")
            model.Add(self.phase[job] == self.end_phase(other)).OnlyEnforceIf(lit)
            if other in self.present:
                model.AddImplication(lit, self.present[other])
            anchors.append(lit)
        model.AddBoolOr(anchors).OnlyEnforceIf(self.present[job])

    def _exact_memory(self, grad: int) -> None:
        """The checker's accounting as half-open holds (see the module's doc), per rank and on the host."""
        st, p, actions = self.st, self.problem, self.actions
        assert actions is not None
        for r in range(p.pp):
            if st.cap[r] is not None:
                self._cumulative([h for s in p.stages_of[r] for h in self._holds(s, grad)], st.cap[r])
        if actions.host_cap is not None and OFFLOAD in actions.allowed:
            a = actions.types
            moved = []
            for s in range(p.nstages):
                o, ld = (a.offload, s), (a.reload, s)
                moved.append((self.offset[o], self.phase[o], self.end(ld), actions.moved[s], self.present[o]))
            self._cumulative(moved, actions.host_cap)

    def _holds(self, s: int, grad: int) -> list[Segment]:
        """What a micro-batch holds on stage `s`, as segments of constant level between the events that change
        it: the forward's end, a recompute's end, an offload's end, a reload's start, the gradient job's end
        (and with the split, I's end to W's end)."""
        st, actions, lits = self.st, self.actions, self.choice[s]
        assert actions is not None
        a = actions.types
        whole = st.mem[FORWARD][s]
        f, g = (FORWARD, s), (grad, s)
        out: list[Segment] = []
        if self.split:
            w = (BACKWARD_W, s)
            out.append((self.end(g), self.end_phase(g), self.end(w), whole + st.mem[BACKWARD_B][s], None))
        out.append((self.end(f), self.end_phase(f), self.end(g), whole, lits[KEEP]))
        if RECOMPUTE in lits:
            rj, lit = (a.recompute, s), lits[RECOMPUTE]
            out.append((self.end(f), self.end_phase(f), self.end(rj), whole - actions.rebuilt[s], lit))
            out.append((self.end(rj), self.end_phase(rj), self.end(g), whole, lit))
        if OFFLOAD in lits:
            o, ld, lit = (a.offload, s), (a.reload, s), lits[OFFLOAD]
            out.append((self.end(f), self.end_phase(f), self.end(o), whole, lit))
            out.append((self.end(o), self.end_phase(o), self.offset[ld], whole - actions.moved[s], lit))
            out.append((self.offset[ld], self.phase[ld], self.end(g), whole, lit))
        return out

    def _cumulative(self, segments: list[Segment], cap: int) -> None:
        """The holds' sum at every phase of the period at most `cap`: a hold of k periods and a rest counts k
        micro-batches in full and the rest at its phase (wrapping around the period's end)."""
        model, T = self.model, self.period
        intervals, demands, full = [], [], []
        for begin, at, end, amount, lit in segments:
            if amount <= 0:
                if amount < 0 and lit is not None:  # (a level below zero is not a hold: not this action)
                    model.Add(lit == 0)
                continue
            length = model.NewIntVar(0, self.horizon, "")
            if lit is None:
                model.Add(length == end - begin)
            else:
                model.Add(length == end - begin).OnlyEnforceIf(lit)
                model.Add(length == 0).OnlyEnforceIf(lit.Not())
            periods = model.NewIntVar(0, self.horizon // T + 1, "")
            model.AddDivisionEquality(periods, length, T)
            rest = model.NewIntVar(0, T - 1, "")
            model.Add(rest == length - periods * T)
            until = model.NewIntVar(0, 2 * T, "")
            model.Add(until == at + rest)
            intervals.append(model.NewIntervalVar(at, rest, until, ""))
            intervals.append(model.NewIntervalVar(at - T, rest, until - T, ""))
            demands += [amount, amount]
            full.append((periods, amount))
        if intervals:
            room = model.NewIntVar(0, cap, "")  # what the partial holds may use
            model.Add(room == cap - sum(k * x for k, x in full))
            model.AddCumulative(intervals, demands, room)

    def _memory(self) -> None:
        """Without actions: a micro-batch holds its forward's activations from the forward's start to its gradient
        job's start (with the split, also I's from I's start to W's), counted by `_cumulative` per rank."""
        st, p, offset, phase = self.st, self.problem, self.offset, self.phase
        grad = BACKWARD_B if self.split else BACKWARD
        for r in range(p.pp):
            if st.cap[r] is None:
                continue
            segments: list[Segment] = []
            for s in p.stages_of[r]:
                holds = [((FORWARD, s), (grad, s), st.mem[FORWARD][s])]
                if self.split:
                    holds.append(((grad, s), (BACKWARD_W, s), st.mem[FORWARD][s] + st.mem[BACKWARD_B][s]))
                segments += [(offset[begin], phase[begin], offset[end], amount, None) for begin, end, amount in holds]
            self._cumulative(segments, st.cap[r])

    def solve(
        self,
        seconds: float,
        seed: int = 0,
        wall: float | None = None,
        hint: dict[BlockJob, int] | None = None,
    ) -> tuple[dict[BlockJob, int] | None, str, float]:
        """The shortest block CP-SAT finds within `seconds` of deterministic time (the budget), and `wall` seconds
        of wall time at most; `hint` (offsets, e.g. a block `modulo` built) is where its search starts."""
        if hint is not None:
            for job, var in self.offset.items():
                self.model.AddHint(var, hint[job])
        solver = self.cp.CpSolver()
        solver.parameters.max_deterministic_time = max(seconds, 0.001)
        safety = max(20 * seconds, 1.0)  # a safety net, not the budget
        solver.parameters.max_time_in_seconds = safety if wall is None else max(min(safety, wall), 0.001)
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = seed
        solver.parameters.linearization_level = 0  # (the LP relaxation of the modulo constraints is weak and slow)
        status = solver.Solve(self.model)
        spent = solver.ResponseProto().deterministic_time
        name = solver.StatusName(status)
        if status not in (self.cp.OPTIMAL, self.cp.FEASIBLE):
            return None, name, spent
        offsets = {
            job: solver.Value(v)
            for job, v in self.offset.items()
            if job not in self.present or solver.BooleanValue(self.present[job])
        }
        return offsets, name, spent


def order_positions(
    problem: Problem, offsets: dict[BlockJob, int], period: int, duration: Callable[[BlockJob], int], copies: Set
) -> dict[BlockJob, int]:
    """Where each job goes in its rank's order, as a time: a compute job at its start, a copy before the compute
    job that runs when it starts (the checker issues a copy when the rank reaches it: after every compute job that
    ends by its start, before the ones that end after it)."""
    out = dict(offsets)
    for job, x in offsets.items():
        if job not in copies:
            continue
        r = problem.rank_of[job[1]]
        for other, o in offsets.items():
            if other in copies or problem.rank_of[other[1]] != r:
                continue
            into = (x - o) % period  # how far into `other`'s run (of some micro-batch) the copy starts
            if 0 < into < duration(other) and x - into >= 0:
                out[job] = x - into
    return out


def orders_from_block(
    problem: Problem,
    offsets: dict[BlockJob, int],
    period: int,
    positions: dict[BlockJob, int] | None = None,
    copies: Set = frozenset(),
) -> list[Order]:
    """Every micro-batch's jobs at its block's offsets, one period apart, as each rank's order (at their
    `positions` when given, `order_positions`; at one time a copy first, then by start, the older micro-batch
    first)."""
    at = positions or offsets
    timed: list[list[tuple[int, bool, int, int, BlockJob]]] = [[] for _ in range(problem.pp)]
    for mb in range(problem.microbatches):
        for job, o in offsets.items():
            timed[problem.rank_of[job[1]]].append((at[job] + mb * period, job not in copies, o + mb * period, mb, job))
    return [[(t, s, mb) for _, _, _, mb, (t, s) in sorted(row)] for row in timed]


@dataclass
class Block:
    """One micro-batch's jobs at their offsets, repeated every `period` (both in ticks: `ticks` per unit of
    time), and the orders that repetition gives at the problem's sizes. With memory actions, `choice` says which
    stages take one, and `positions` / `copies` where the copies go in the order (`order_positions`)."""

    name: str
    offsets: dict[BlockJob, int]
    period: int
    ticks: int
    orders: list[Order]
    spent: float  # CP-SAT deterministic time it took
    positions: dict[BlockJob, int] | None = None
    copies: frozenset[BlockJob] = frozenset()
    choice: dict[int, str] = field(default_factory=dict)  # stage -> recompute / offload (the others keep)

    def planned_times(self, microbatches: int) -> dict[tuple[int, int, int], float]:
        """When the repeated block runs each job (in the problem's time): a plan for `greedy`'s planned
        policies."""
        return {
            (t, s, mb): (o + mb * self.period) / self.ticks
            for (t, s), o in self.offsets.items()
            for mb in range(microbatches)
        }

    def rounds(self, rank_of: list[int], rank: int) -> list[tuple[int, BlockJob]]:
        """Rank `rank`'s jobs of the block as (periods of delay, job), in the order they run within a period:
        in period n the rank runs each job for micro-batch n - delay (when that micro-batch exists)."""
        at, T = self.positions or self.offsets, self.period
        mine = []
        for job, o in self.offsets.items():
            if rank_of[job[1]] == rank:
                delay = at[job] // T
                # as in `orders_from_block`: by position, a copy first, by start, the older micro-batch first
                mine.append(((at[job] % T, job not in self.copies, o - delay * T, -delay, job), delay, job))
        return [(delay, job) for _, delay, job in sorted(mine)]


def _describe(choice: dict[int, str]) -> str:
    """`2 stages recomputed, 1 stage offloaded`."""
    done = {RECOMPUTE: "recomputed", OFFLOAD: "offloaded"}
    counts = [(n, a) for a in done if (n := sum(x == a for x in choice.values()))]
    if not counts:
        return "no memory action"
    return ", ".join(f"{n} stage{'s' if n > 1 else ''} {done[a]}" for n, a in counts)


def _solve_with_actions(
    problem: Problem,
    st: Statics,
    acts: BlockActions,
    period: int,
    split: bool,
    seconds: float,
    seed: int,
    deadline: float | None,
) -> tuple[Block | None, float]:
    """A block with actions for `period` whose orders keep every limit once re-timed by the checker's execution,
    and the deterministic time spent. First without the copies' anchoring (much faster, and its copies mostly
    start as soon as they can anyway), with most of the time; if the re-timed orders break a limit (a copy
    started earlier than the model had it), again with the anchoring and what is left."""
    timer = Evaluator(problem)
    spent = 0.0
    for anchored in (False, True):
        wall = None  # (the solve's own safety net: a wall-clock cap here would let load decide the block)
        share = seconds * RELAXED_SHARE if not anchored else seconds - spent
        if share <= 0 or (wall is not None and wall <= 0):
            break
        offsets, status, used = BlockModel(st, period, split, acts, anchored).solve(share, seed, wall)
        spent += used
        if offsets is None:  # (without a block when relaxed, none with the anchoring either)
            break
        name = f"periodic block, period {period / st.k:g}"
        name += ", the shortest block for it" if status == "OPTIMAL" else ""
        block = _block_with_actions(problem, st, acts, name, offsets, period, used)
        if timer.evaluate(block.orders).feasible:
            return block, spent
    return None, spent


def _block_with_actions(
    problem: Problem,
    st: Statics,
    acts: BlockActions,
    name: str,
    offsets: dict[BlockJob, int],
    period: int,
    spent: float,
) -> Block:
    """A solved block with memory actions: its choice per stage, and its orders with the copies placed where the
    checker issues them."""
    a = acts.types
    choice = {s: RECOMPUTE for t, s in offsets if t == a.recompute}
    choice |= {s: OFFLOAD for t, s in offsets if t == a.offload}
    copies = frozenset(job for job in offsets if a.copies(job[0]))
    positions = order_positions(problem, offsets, period, lambda job: job_cost(st, acts, job), copies)
    orders = orders_from_block(problem, offsets, period, positions, copies)
    return Block(f"{name} ({_describe(choice)})", offsets, period, st.k, orders, spent, positions, copies, choice)


def periodic_schedules(
    problem: Problem,
    budget: float,
    seed: int = 0,
    periods: int = 2,
    search_longer: bool = False,
    actions: Iterable[str] = (),
    deadline: float | None = None,
) -> list[Block]:
    """Periodic schedules for `periods` periods from the shortest one, within `budget` seconds of CP-SAT
    deterministic time in all (the shorter period gets twice the time of the next). With `search_longer`, a
    period without a block does not count: longer ones are tried until `periods` have one (a tight memory limit
    needs a period longer than the work; a period the model proves too short costs next to nothing, and the
    step to the next one doubles every second such proof). `actions` (of recompute, offload; for a problem built
    with memory actions): what each stage's block may choose instead of keeping its activations. `deadline`
    (`clock.cpu()`, a safety net): no period is tried after it (building a model with actions takes time the
    deterministic budget does not count); this process's CPU time, so other processes' load never decides."""
    st, acts = block_statics(problem, actions)
    out = []
    splits = {"yes": (True,), "no": (False,), "auto": (True,)}[problem.split]
    for split in splits:
        left = budget / len(splits)
        period = minimum_period(st, split, acts)
        step = max(1, min(st.cost[t][s] for t, s in kinds(problem, split) if st.cost[t][s] > 0) // 2)
        found = misses = tries = 0
        while found < periods and left > 0 and tries < (MAX_PERIOD_TRIES if search_longer else periods):
            if deadline is not None and cpu() >= deadline:
                break
            tries += 1
            if search_longer:  # half of what is left, all of it for the last block wanted
                seconds = left if found == periods - 1 else left / 2
            else:  # 2/3 and 1/3 of the budget for two periods, and so on
                seconds = budget / len(splits) * 2.0 ** -(tries - 1) / (2.0 - 2.0 ** (1 - periods))
            if acts is None:
                wall = None  # (the solve's own safety net: a wall-clock cap here would let load decide the block)
                model = BlockModel(st, period, split)
                offsets, status, spent = model.solve(seconds, seed, wall)
                left -= spent
                # (without `search_longer` each period has its share, and a retry costs as much again)
                retry = min(seconds, left) if search_longer else seconds
                start = None
                if offsets is None and retry > 0:
                    # CP-SAT alone found no block in its time: again, from a hand-built tiling of the period (where
                    # CP-SAT alone finds a block, that block leads the search as far or further: measured at pp = 8)
                    start, start_fits, built = rotation_block(st, period, split)
                if start is not None:
                    wall = None  # (the solve's own safety net: a wall-clock cap here would let load decide the block)
                    offsets, status, more = model.solve(retry, seed, wall, hint=start)
                    more += built * len(model.jobs) * BUILD_SECONDS_PER_JOB
                    spent += more  # (a block found so costs both tries)
                    left -= more if search_longer else 0.0
                    if offsets is None and start_fits:
                        offsets, status = start, "ROTATED"
                block = None
                if offsets is not None:
                    shortest = {"OPTIMAL": ", the shortest block for it", "ROTATED": ", rotated by hand"}.get(
                        status, ""
                    )
                    name = f"periodic block, period {period / st.k:g}{shortest}"
                    block = Block(name, offsets, period, st.k, orders_from_block(problem, offsets, period), spent)
            else:
                block, spent = _solve_with_actions(problem, st, acts, period, split, seconds, seed, deadline)
                left -= spent
            if block is not None:
                found += 1
                out.append(block)
            else:
                misses += 1
                step *= 2 if misses % 2 == 0 else 1
            period += step
    return out
