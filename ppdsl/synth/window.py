"""A window of a schedule as a small CP-SAT model: the repair step of the large-neighbourhood search.

Each rank's order is cut in three: a prefix, a window (the free jobs) and a suffix. Only the window is modelled:
- the prefix keeps its times exactly (constants: when each rank is free, when each input arrives); a prefix job
  that reads a window job's output gives that output a deadline, so the prefix stays valid as it is;
- the window's jobs are re-ordered and re-timed (no overlap per rank, inputs, micro-batches in order per job
  type and stage where the schedule has them so, memory);
- the suffix keeps its order and is summed up by tails: for each job, the longest chain from its start to the
  end of the schedule through the jobs after it (its rank's next job, its output's reader). With the suffix's
  order fixed, the makespan is exactly the largest of (a window job's end + the tail of what follows it) and
  the constants of the prefix, so the model minimises the schedule's makespan with a few dozen jobs instead of
  all of them (transfers taken as delays, as in the exact model: the checker re-times the result). A job's
  inputs are the timing rule's (`ppdsl.analysis.timing`: `input_stage`, `SAME_STAGE_INPUT`, `link_delay`).

A rank's window is a contiguous stretch of its order, so the same jobs run there in another order: its memory
level before and after the window is unchanged, and only the window's own levels are constrained.

`cut` makes windows from a time span (and optionally a set of ranks): every job that starts in the span on those
ranks is free, every job that starts before it (or, on other ranks, before its end) is prefix. Inputs arrive
after their producers end, so the prefix never reads the suffix, nor the window the suffix.
"""

from __future__ import annotations

from bisect import bisect_left

from ppdsl.plan.jobs import Job
from ppdsl.plan.kinds import BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.cpsat import GRADIENT, Statics, load_cp_model, solve_window
from ppdsl.synth.schedule import Evaluation, Order


class Context:
    """One schedule as every window of it sees it: positions, times in ticks, memory levels and tails."""

    def __init__(self, statics: Statics, orders: list[Order], ev: Evaluation):
        self.statics = st = statics
        self.orders, self.ev = orders, ev
        k = st.k
        self.where = {job: (r, i) for r, order in enumerate(orders) for i, job in enumerate(order)}
        self.start = [[round(x * k) for x in row[: len(orders[r])]] for r, row in enumerate(ev.start)]
        self.end = [[round(x * k) for x in row[: len(orders[r])]] for r, row in enumerate(ev.end)]
        self.level = []  # [rank][i]: memory level before step i (in km units)
        for order in orders:
            row, x = [0], 0
            for t, s, _ in order:
                x += st.mem[t][s]
                row.append(x)
            self.level.append(row)
        # tails: the longest chain from a job's start to the end, through the jobs after it (by time: they are
        # after it on its rank, or read it); computed from the last job back
        tail: dict[Job, int] = {}
        events = sorted(((self.start[r][i], r, i) for r, order in enumerate(orders) for i in range(len(order))))
        for _, r, i in reversed(events):
            job = orders[r][i]
            best = tail[orders[r][i + 1]] if i + 1 < len(orders[r]) else st.opt[r]
            for reader, x in st.readers[job]:
                v = tail.get(reader)
                if v is None:  # (a reader that starts at the same time: zero-cost jobs)
                    v = 0
                if x + v > best:
                    best = x + v
            tail[job] = st.cost[job[0]][job[1]] + best
        self.tail = tail
        self.makespan = round(ev.makespan * k)

    def cut(self, lo: float, hi: float, ranks: set[int] | None = None) -> tuple[list[int], list[int]]:
        """Per rank (first free step, first suffix step): the jobs of `ranks` (all by default) that start in
        [lo, hi) (in the problem's time) are free."""
        k = self.statics.k
        a_t, b_t = lo * k - 1e-6, hi * k - 1e-6
        first, last = [], []
        for r, row in enumerate(self.start):
            b = bisect_left(row, b_t)
            a = bisect_left(row, a_t, 0, b) if ranks is None or r in ranks else b
            first.append(a)
            last.append(b)
        return first, last


class WindowModel:
    """The window [first[r], last[r]) of every rank's order as a CP-SAT model (see the module doc)."""

    def __init__(self, ctx: Context, first: list[int], last: list[int]):
        self.cp = load_cp_model()
        self.ctx = ctx
        st = ctx.statics
        p = st.problem
        self.first, self.last = first, last
        orders, where = ctx.orders, ctx.where
        self.free = [job for r, order in enumerate(orders) for job in order[first[r] : last[r]]]
        self.valid = bool(self.free)
        if not self.valid:
            return

        def part(job: Job) -> int:  # 0 prefix, 1 window, 2 suffix
            r, i = where[job]
            return 0 if i < first[r] else (1 if i < last[r] else 2)

        self.part = part
        self.horizon = ctx.makespan + 1
        model = self.model = self.cp.CpModel()
        start, end = self.start, self.end = {}, {}
        self.hints: list[tuple[object, int]] = []
        ready = [ctx.end[r][first[r] - 1] if first[r] else 0 for r in range(p.pp)]
        intervals: list[list] = [[] for _ in range(p.pp)]
        for job in self.free:
            r, i = where[job]
            c = st.cost[job[0]][job[1]]
            lb = ready[r]
            for producer, x in st.inputs[job]:
                q, j = where[producer]
                if j < first[q]:
                    lb = max(lb, ctx.end[q][j] + x)
            s_var = model.NewIntVar(lb, self.horizon, "")
            e_var = model.NewIntVar(lb + c, self.horizon + c, "")
            intervals[r].append(model.NewIntervalVar(s_var, c, e_var, ""))
            start[job], end[job] = s_var, e_var
            self.hints += [(s_var, ctx.start[r][i]), (e_var, ctx.end[r][i])]
        for r in range(p.pp):
            if len(intervals[r]) > 1:
                model.AddNoOverlap(intervals[r])
        for job in self.free:
            for producer, x in st.inputs[job]:
                if producer in start:
                    model.Add(start[job] >= end[producer] + x)
            for reader, x in st.readers[job]:
                q, j = where[reader]
                if j < first[q]:  # a prefix job reads it: it must still arrive in time
                    model.Add(end[job] + x <= ctx.start[q][j])
            # micro-batches in order per job type and stage, where the schedule has them so
            t, s, mb = job
            before = (t, s, mb - 1)
            if mb and before in start and where[before][1] < where[job][1]:
                model.Add(start[job] >= end[before])
        for r in range(p.pp):
            if st.cap[r] is not None and first[r] < last[r]:
                self._memory(r)
        self._makespan()

    # ------------------------------------------------------------------ parts of the model

    def _memory(self, r: int) -> None:
        """Rank r's memory level within its window, from its level before the window."""
        ctx, st, model = self.ctx, self.statics, self.model
        a, b = self.first[r], self.last[r]
        order = ctx.orders[r]
        end_of_time = self.horizon + max(st.cost[t][s] for t in range(4) for s in st.problem.stages_of[r])
        base = ctx.level[r][a]  # the level before the window: what the prefix holds
        holds, demands = [], []

        def hold(begin, finish, amount: int, hint: int) -> None:
            size = model.NewIntVar(0, end_of_time, "")
            holds.append(model.NewIntervalVar(begin, size, finish, ""))
            demands.append(amount)
            self.hints.append((size, hint))

        for i in range(a, b):
            job = order[i]
            t, s, mb = job
            if not st.holds[s]:  # as steps: a rise from the job's start on, a fall as a rise that ends there
                delta = st.mem[t][s]
                if delta > 0:
                    hold(self.start[job], end_of_time, delta, end_of_time - ctx.start[r][i])
                elif delta < 0:
                    base += delta
                    hold(0, self.start[job], -delta, ctx.start[r][i])
                continue
            if t == FORWARD:
                amount = st.mem[FORWARD][s]
            elif t == BACKWARD_B:
                amount = st.mem[FORWARD][s] + st.mem[BACKWARD_B][s]
            else:
                amount = 0
            if amount > 0:  # held from this job to its release (in the window, or after it)
                release = st.release[job]
                j = ctx.where[release][1]
                if j < b:
                    hold(self.start[job], self.start[release], amount, ctx.start[r][j] - ctx.start[r][i])
                else:
                    hold(self.start[job], end_of_time, amount, end_of_time - ctx.start[r][i])
            if t != FORWARD:  # it releases what its F (or I) held since before the window
                held_by = (FORWARD, s, mb) if t in GRADIENT else (BACKWARD_B, s, mb)
                if ctx.where[held_by][1] < a:
                    amount = st.mem[FORWARD][s] + (st.mem[BACKWARD_B][s] if t == BACKWARD_W else 0)
                    if amount > 0:
                        base -= amount
                        hold(0, self.start[job], amount, ctx.start[r][i])
        if holds:
            model.AddCumulative(holds, demands, max(st.cap[r] - base, 0))

    def _makespan(self) -> None:
        """The makespan: a window job's end plus the tail of what follows it, or a constant of the prefix."""
        ctx, st, model = self.ctx, self.statics, self.model
        p = st.problem
        orders, where, first, last, tail = ctx.orders, ctx.where, self.first, self.last, ctx.tail
        constant = 0
        after = []  # per rank: the tail of its first suffix job (or the optimizer)
        for r, order in enumerate(orders):
            a, b = first[r], last[r]
            follow = tail[order[b]] if b < len(order) else st.opt[r]
            after.append(follow)
            if a == b:  # nothing free: the suffix follows the prefix
                constant = max(constant, (ctx.end[r][a - 1] if a else 0) + follow)
        # a prefix job read in the suffix
        for r, order in enumerate(orders):
            ends = ctx.end[r]
            for i in range(first[r]):
                for reader, x in st.readers[order[i]]:
                    q, j = where[reader]
                    if j >= last[q]:
                        constant = max(constant, ends[i] + x + tail[reader])
        self.constant = constant
        self.makespan = model.NewIntVar(constant, max(self.horizon, constant) + 1, "makespan")
        value = constant
        terms = []
        for job in self.free:
            r, i = where[job]
            now = ctx.end[r][i]
            model.Add(self.makespan >= self.end[job] + after[r])
            value = max(value, now + after[r])
            for reader, x in st.readers[job]:
                q, j = where[reader]
                if j >= last[q]:
                    model.Add(self.makespan >= self.end[job] + x + tail[reader])
                    value = max(value, now + x + tail[reader])
            if job[0] != BACKWARD_W:
                terms.append(self.end[job])
        # then as early as possible: the window's F and I (or B), and each rank's window end
        for r in range(p.pp):
            mine = [self.end[job] for job in orders[r][first[r] : last[r]]]
            if mine:
                last_end = model.NewIntVar(0, 2 * self.horizon, "")
                model.AddMaxEquality(last_end, mine)
                terms.append(last_end)
                self.hints.append((last_end, ctx.end[r][last[r] - 1]))
        self.hints.append((self.makespan, value))
        self.estimate = value  # the model's makespan of the current schedule
        weight = len(terms) * (2 * self.horizon + 1) + 1
        model.Minimize(self.makespan * weight + sum(terms))

    @property
    def statics(self) -> Statics:
        return self.ctx.statics

    # ------------------------------------------------------------------ solving

    def solve(self, seconds: float, seed: int = 0, debug: bool = False) -> tuple[list[Order] | None, str]:
        """The window re-solved within `seconds` of deterministic time (the current schedule as the hint)."""
        solver, name, self.spent = solve_window(self, seconds, seed, debug)
        if solver is None:
            return None, name
        orders = []
        where = self.ctx.where
        for r, order in enumerate(self.ctx.orders):
            a, b = self.first[r], self.last[r]
            if a == b:
                orders.append(order)
                continue
            value = solver.Value
            key = {job: (value(self.start[job]), value(self.end[job]), where[job][1]) for job in order[a:b]}
            orders.append(order[:a] + sorted(order[a:b], key=key.__getitem__) + order[b:])
        self.value = solver.Value(self.makespan) / self.statics.k
        return orders, name
