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
"""

from __future__ import annotations

from dataclasses import dataclass

from ppdsl.analysis.timing import SAME_STAGE_INPUT, input_stage, link_delay
from ppdsl.language.jobtypes import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.exact import load_cp_model
from ppdsl.synth.modulo import BlockJob, rotation_block
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order
from ppdsl.synth.window import Statics

MAX_PERIOD_TRIES = 16  # periods tried before giving up (a tight limit needs a longer period than the work's)
# what building a hand-made block costs, counted as CP-SAT's deterministic seconds per job placed (about 4 us
# of CPU per job with its memory check, measured at pp = 8; CP-SAT's seconds count 4 of CPU, see search.py)
BUILD_SECONDS_PER_JOB = 1e-6


def kinds(problem: Problem, split: bool) -> list[BlockJob]:
    types = (FORWARD, BACKWARD_B, BACKWARD_W) if split else (FORWARD, BACKWARD)
    return [(t, s) for s in range(problem.nstages) for t in types]


def minimum_period(st: Statics, split: bool) -> int:
    """The shortest period any block can have: the busiest rank's work per micro-batch, and (memory) the time
    a micro-batch's activations are held on a rank at the least, over the rank's limit (a level at most the
    limit holds at most limit * T of activation-time per period)."""
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
                held += st.mem[FORWARD][s] * trip[s]
                if split:
                    held += max(st.mem[FORWARD][s] + st.mem[BACKWARD_B][s], 0) * st.cost[BACKWARD_B][s]
            period = max(period, -(-held // st.cap[r]))
    return period


class BlockModel:
    """The offsets of one micro-batch's jobs for period `period` (in ticks of `st`)."""

    def __init__(self, st: Statics, period: int, split: bool):
        self.cp = load_cp_model()
        p = self.problem = st.problem
        self.st, self.period, self.split = st, period, split
        model = self.model = self.cp.CpModel()
        jobs = self.jobs = kinds(p, split)
        S, T = p.nstages, period
        link = [[st.tick(link_delay(x)) for x in row] for row in p.link]
        horizon = sum(st.cost[t][s] for t, s in jobs) + sum(max(row) for row in link) * 2 * S + T
        self.horizon = horizon
        offset, phase = {}, {}
        for job in jobs:
            offset[job] = model.NewIntVar(0, horizon, "")
            phase[job] = model.NewIntVar(0, T - 1, "")
            model.AddModuloEquality(phase[job], offset[job], T)
        self.offset = offset
        grad = BACKWARD_B if split else BACKWARD

        def cost(job: BlockJob) -> int:
            return st.cost[job[0]][job[1]]

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
        # one job at a time on each rank, modulo the period
        for r in range(p.pp):
            intervals = []
            for job in jobs:
                if p.rank_of[job[1]] != r or cost(job) == 0:
                    continue
                d = cost(job)
                intervals.append(model.NewIntervalVar(phase[job], d, phase[job] + d, ""))
                intervals.append(model.NewIntervalVar(phase[job] - T, d, phase[job] - T + d, ""))
            model.AddNoOverlap(intervals)
        self._memory(phase)
        self.span = model.NewIntVar(0, horizon + max(st.cost[t][s] for t, s in jobs), "span")
        for job in jobs:
            model.Add(self.span >= offset[job] + cost(job) + st.opt[p.rank_of[job[1]]])
        model.Minimize(self.span)

    def _memory(self, phase: dict) -> None:
        st, p, model, T = self.st, self.problem, self.model, self.period
        grad = BACKWARD_B if self.split else BACKWARD
        for r in range(p.pp):
            if st.cap[r] is None:
                continue
            intervals, demands, full = [], [], []
            for s in p.stages_of[r]:
                holds = [((FORWARD, s), (grad, s), st.mem[FORWARD][s])]
                if self.split:
                    holds.append(((grad, s), (BACKWARD_W, s), st.mem[FORWARD][s] + st.mem[BACKWARD_B][s]))
                for begin, end, amount in holds:
                    if amount <= 0:
                        continue
                    length = model.NewIntVar(0, self.horizon, "")
                    model.Add(length == self.offset[end] - self.offset[begin])
                    periods = model.NewIntVar(0, self.horizon // T + 1, "")
                    model.AddDivisionEquality(periods, length, T)
                    rest = model.NewIntVar(0, T - 1, "")
                    model.Add(rest == length - periods * T)
                    at = phase[begin]
                    until = model.NewIntVar(0, 2 * T, "")
                    model.Add(until == at + rest)
                    intervals.append(model.NewIntervalVar(at, rest, until, ""))
                    intervals.append(model.NewIntervalVar(at - T, rest, until - T, ""))
                    demands += [amount, amount]
                    full.append((periods, amount))
            if intervals:
                room = model.NewIntVar(0, st.cap[r], "")  # what the partial holds may use
                model.Add(room == st.cap[r] - sum(k * a for k, a in full))
                model.AddCumulative(intervals, demands, room)

    def solve(
        self, seconds: float, seed: int = 0, hint: dict[BlockJob, int] | None = None
    ) -> tuple[dict[BlockJob, int] | None, str, float]:
        """The shortest block CP-SAT finds within `seconds` of deterministic time; `hint` (offsets, e.g. a block
        `modulo` built) is where its search starts."""
        if hint is not None:
            for job, var in self.offset.items():
                self.model.AddHint(var, hint[job])
        solver = self.cp.CpSolver()
        solver.parameters.max_deterministic_time = max(seconds, 0.001)
        solver.parameters.max_time_in_seconds = max(20 * seconds, 1.0)  # a safety net, not the budget
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = seed
        solver.parameters.linearization_level = 0  # (the LP relaxation of the modulo constraints is weak and slow)
        status = solver.Solve(self.model)
        spent = solver.ResponseProto().deterministic_time
        name = solver.StatusName(status)
        if status not in (self.cp.OPTIMAL, self.cp.FEASIBLE):
            return None, name, spent
        return {job: solver.Value(v) for job, v in self.offset.items()}, name, spent


def orders_from_block(problem: Problem, offsets: dict[BlockJob, int], period: int) -> list[Order]:
    """Every micro-batch's jobs at its block's offsets, one period apart, as each rank's order."""
    timed: list[list[tuple[int, int, BlockJob, int]]] = [[] for _ in range(problem.pp)]
    for mb in range(problem.microbatches):
        for (t, s), o in offsets.items():
            timed[problem.rank_of[s]].append((o + mb * period, mb, (t, s), mb))
    return [[(t, s, mb) for _, _, (t, s), mb in sorted(row)] for row in timed]


@dataclass
class Block:
    """One micro-batch's jobs at their offsets, repeated every `period` (both in ticks: `ticks` per unit of
    time), and the orders that repetition gives at the problem's sizes."""

    name: str
    offsets: dict[BlockJob, int]
    period: int
    ticks: int
    orders: list[Order]
    spent: float  # CP-SAT deterministic time it took

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
        mine = [(o // self.period, o % self.period, job) for job, o in self.offsets.items() if rank_of[job[1]] == rank]
        # at equal times the older micro-batch (more periods of delay) runs first, as in `orders_from_block`
        return [(delay, job) for delay, _, job in sorted(mine, key=lambda x: (x[1], -x[0], x[2]))]


def periodic_schedules(
    problem: Problem, budget: float, seed: int = 0, periods: int = 2, search_longer: bool = False
) -> list[Block]:
    """Periodic schedules for `periods` periods from the shortest one, within `budget` seconds of CP-SAT
    deterministic time in all (the shorter period gets twice the time of the next). With `search_longer`, a
    period without a block does not count: longer ones are tried until `periods` have one (a tight memory limit
    needs a period longer than the work; a period the model proves too short costs next to nothing, and the
    step to the next one doubles every second such proof)."""
    st = Statics(problem, problem.sequential())
    out = []
    splits = {"yes": (True,), "no": (False,), "auto": (True,)}[problem.split]
    for split in splits:
        left = budget / len(splits)
        period = minimum_period(st, split)
        step = max(1, min(st.cost[t][s] for t, s in kinds(problem, split) if st.cost[t][s] > 0) // 2)
        found = misses = tries = 0
        while found < periods and left > 0 and tries < (MAX_PERIOD_TRIES if search_longer else periods):
            tries += 1
            model = BlockModel(st, period, split)
            if search_longer:  # half of what is left, all of it for the last block wanted
                seconds = left if found == periods - 1 else left / 2
            else:  # 2/3 and 1/3 of the budget for two periods, and so on
                seconds = budget / len(splits) * 2.0 ** -(tries - 1) / (2.0 - 2.0 ** (1 - periods))
            offsets, status, spent = model.solve(seconds, seed)
            left -= spent
            # (without `search_longer` each period has its share, and a retry costs as much again)
            retry = min(seconds, left) if search_longer else seconds
            start = None
            if offsets is None and retry > 0:
                # CP-SAT alone found no block in its time: again, from a hand-built tiling of the period (where
                # CP-SAT alone finds a block, that block leads the search as far or further: measured at pp = 8)
                start, start_fits, built = rotation_block(st, period, split)
            if start is not None:
                offsets, status, more = model.solve(retry, seed, hint=start)
                more += built * len(model.jobs) * BUILD_SECONDS_PER_JOB
                spent += more  # (a block found so costs both tries)
                left -= more if search_longer else 0.0
                if offsets is None and start_fits:
                    offsets, status = start, "ROTATED"
            if offsets is not None:
                found += 1
                shortest = {"OPTIMAL": ", the shortest block for it", "ROTATED": ", rotated by hand"}.get(status, "")
                name = f"periodic block, period {period / st.k:g}{shortest}"
                orders = orders_from_block(problem, offsets, period)
                out.append(Block(name, offsets, period, st.k, orders, spent))
            else:
                misses += 1
                step *= 2 if misses % 2 == 0 else 1
            period += step
    return out
