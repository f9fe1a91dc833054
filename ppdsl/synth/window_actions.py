"""A window of a schedule with memory actions as a small CP-SAT model: the repair step of the large-neighbourhood
search over schedules with actions (`lns.lns(..., memory_actions=...)`), for the sizes where the whole schedule
with actions (`exact_actions.ActionModel`, whose anchoring grows with the square of a rank's jobs) is too large.

The cut is window.py's: each rank's order in a prefix (its times fixed), a window (re-ordered and re-timed) and a
suffix (its order fixed, summed up by tails: the longest chain from a job's start to the end of the schedule).
Compute jobs are cut by their start times as window.py cuts them; a copy belongs to the part of the compute jobs
around it in the order (the copies between the prefix's last compute job and the suffix's first are free).

A (stage, micro-batch) whose forward, backward (I and W) and actions are all in the window chooses again among
the allowed actions (`ActionStatics.allowed`: keep / recompute / offload, as `exact_actions`, each option's jobs
optional under its literal); every other one keeps what the schedule chose (the actions engine, `actions.py`,
chooses them; this repairs where they run). The backward's form (whole, or I + W) stays. The window's jobs are
timed by rule 6 of `ppdsl.analysis.timing` as `execute` times them:
- a recompute R on the rank's compute, after its forward; the backward (or I) of a recomputed micro-batch after
  R's end;
- an offload O and a reload L on the rank's copy stream (one no-overlap for both directions, one per direction
  with `comm offload duplex`), after the prefix's copies on it: O after its forward's end, L after O's end, the
  backward (or I) after L's end;
- every free job *anchored*, as in `exact_actions`: a compute job starts at the end of a compute job of its rank,
  at the prefix's end, or at an input's arrival (a reload's end among them); a copy at the end of a compute job of
  its rank, at its data's ready time or at the end of a copy of its stream. The orders read off a solution (a
  copy after the compute jobs that end at or before its start) then run, in `execute`, at the solution's times
  (when transfers never queue, `cpsat.transfers_never_queue`);
- memory as exact half-open holds [allocation, free) (`cpsat.hold_pieces`) in a cumulative per rank:
  the prefix's at their times, the window's as variables. What the suffix frees or allocates is not modelled (a
  hold freed in the suffix is held to the end): the suffix starts after the window's compute, so this is its level
  until then, but a copy of the window still running then is counted against that level, not the suffix's.
  The host limit is not modelled either. Both are why every repaired schedule is re-timed by the checker's
  execution (`Evaluator`) and kept only if it keeps every limit and is faster (lns.py).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from ppdsl.analysis.memory import MemoryActions
from ppdsl.plan.jobs import Job
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.cpsat import GRADIENT, KINDS, Statics, hold_pieces, load_cp_model, solve_window
from ppdsl.synth.problem import ACTION_NAMES, KEEP, OFFLOAD, RECOMPUTE, Problem, stage_table
from ppdsl.synth.schedule import Evaluation, Order

PREFIX, WINDOW, SUFFIX = 0, 1, 2


class ActionStatics:
    """What does not change while the jobs of a schedule with actions are re-ordered: the integer scales, each
    job's cost and stream, and the actions a window may choose (`allowed`, of ACTION_NAMES: for the (stage,
    micro-batch)s wholly inside it; none: every one keeps the schedule's)."""

    def __init__(self, problem: Problem, orders: list[Order], allowed: Iterable[str] = ()):
        a = MemoryActions.of(problem.expansion) if problem.expansion is not None else None
        if a is None:
            raise ValueError("the problem was built without memory actions")
        self.problem, self.types = problem, a
        self.allowed = [x for x in ACTION_NAMES if x in set(allowed)]
        rcost, ocost, lcost = (stage_table(problem, t) for t in (a.recompute, a.offload, a.reload))
        self.rmem = stage_table(problem, a.recompute, "mem_delta")
        self.moved = [-x for x in stage_table(problem, a.offload, "mem_delta")]
        self.back = stage_table(problem, a.reload, "mem_delta")
        # (the compute jobs' relations do not change with the actions: the backward's form stays)
        compute = [[job for job in order if job[0] in KINDS] for order in orders]
        self.plain = Statics(problem, compute, [*rcost, *ocost, *lcost], [*self.rmem, *self.moved, *self.back])
        self.k, self.km, self.cap, self.opt = self.plain.k, self.plain.km, self.plain.cap, self.plain.opt
        self.duplex = bool(problem.expansion.copy_duplex)
        extra = {a.recompute: rcost, a.offload: ocost, a.reload: lcost}
        self.cost: dict[Job, int] = {}
        for s in range(problem.nstages):
            for mb in range(problem.microbatches):
                for t in KINDS:
                    self.cost[(t, s, mb)] = self.plain.cost[t][s]
                for t, row in extra.items():
                    self.cost[(t, s, mb)] = round(row[s] * self.k)

    def copy(self, job: Job) -> bool:
        return self.types.copies(job[0])

    def stream(self, job: Job) -> int:
        """The copy stream a copy runs on: 0, or 1 for a reload with duplex copies."""
        return 1 if self.duplex and job[0] == self.types.reload else 0

    def action_jobs(self, s: int, mb: int, action: str) -> list[Job]:
        a = self.types
        return {KEEP: [], RECOMPUTE: [(a.recompute, s, mb)], OFFLOAD: [(a.offload, s, mb), (a.reload, s, mb)]}[action]

    def inputs_of(self, job: Job, present: set[Job]) -> list[tuple[Job, int]]:
        """A job's inputs as (job, delay in ticks): the timing rule's (cpsat.Statics), a recompute's or an
        offload's forward, a reload's offload, and a backward's (or I's) recompute or reload."""
        a = self.types
        t, s, mb = job
        if t not in KINDS:
            return [((FORWARD if t != a.reload else a.offload, s, mb), 0)]
        ins = list(self.plain.inputs[job])
        if t in GRADIENT:
            ins += [((waits, s, mb), 0) for waits in (a.recompute, a.reload) if (waits, s, mb) in present]
        return ins


class ActionContext:
    """One schedule with actions as every window of it sees it: positions, times in ticks and tails. What lns.py
    reads (`orders`, `start`, `end`: per rank, its compute jobs only, whose starts grow along the order; `tail`,
    `makespan`, `cut`) is as `window.Context` has it; `schedule` is the whole orders."""

    def __init__(self, statics: ActionStatics, orders: list[Order], ev: Evaluation):
        self.statics = st = statics
        self.schedule, self.ev = orders, ev
        k = st.k
        self.where = {job: (r, i) for r, order in enumerate(orders) for i, job in enumerate(order)}
        self.t_start = {job: round(ev.start[r][i] * k) for r, order in enumerate(orders) for i, job in enumerate(order)}
        self.t_end = {job: round(ev.end[r][i] * k) for r, order in enumerate(orders) for i, job in enumerate(order)}
        present = set(self.where)
        self.inputs = {job: st.inputs_of(job, present) for job in present}
        self.readers: dict[Job, list[tuple[Job, int]]] = {job: [] for job in present}
        for job, ins in self.inputs.items():
            for producer, x in ins:
                self.readers[producer].append((job, x))
        # per (stage, micro-batch): its action and its backward's form, as the schedule has them
        a = st.types
        self.choice: dict[tuple[int, int], str] = {}
        for t, s, mb in present:
            if t == FORWARD:
                chosen = KEEP
                if (a.recompute, s, mb) in present:
                    chosen = RECOMPUTE
                elif (a.offload, s, mb) in present:
                    chosen = OFFLOAD
                self.choice[(s, mb)] = chosen
        self.whole = {(s, mb): (BACKWARD, s, mb) in present for s, mb in self.choice}
        self.compute_at = [[i for i, job in enumerate(order) if not st.copy(job)] for order in orders]
        self.orders = [[order[i] for i in at] for order, at in zip(orders, self.compute_at, strict=True)]
        self.start = [[self.t_start[job] for job in row] for row in self.orders]
        self.end = [[self.t_end[job] for job in row] for row in self.orders]
        # the order's own successors of each job (what it is before on its rank): a compute job's next compute job
        # and the copies right after it (the rank reaches them when it ends), a copy's next copy on its stream
        self.next: dict[Job, list[Job]] = {}
        self.last_compute: set[Job] = set()
        for order in orders:
            prev: Job | None = None
            prev_copy: list[Job | None] = [None, None]
            for job in order:
                self.next[job] = []
                if st.copy(job):
                    if prev is not None:
                        self.next[prev].append(job)
                    q = st.stream(job)
                    if prev_copy[q] is not None:
                        self.next[prev_copy[q]].append(job)
                    prev_copy[q] = job
                else:
                    if prev is not None:
                        self.next[prev].append(job)
                    prev = job
            if prev is not None:
                self.last_compute.add(prev)
        tail: dict[Job, int] = {}
        for job in sorted(self.t_start, key=self.t_start.__getitem__, reverse=True):
            r = self.where[job][0]
            best = st.opt[r] if job in self.last_compute else 0
            for succ in self.next[job]:
                best = max(best, tail.get(succ, 0))
            for reader, x in self.readers[job]:
                best = max(best, x + tail.get(reader, 0))
            tail[job] = st.cost[job] + best
        self.tail = tail
        self.makespan = round(ev.makespan * k)

    def cut(self, lo: float, hi: float, ranks: set[int] | None = None) -> tuple[list[int], list[int]]:
        """Per rank (first free position, first suffix position) in its whole order: the compute jobs of `ranks`
        (all by default) that start in [lo, hi) (in the problem's time) are free, and the copies between them (and
        between the prefix's last compute job and the suffix's first)."""
        k = self.statics.k
        a_t, b_t = lo * k - 1e-6, hi * k - 1e-6
        first, last = [], []
        for r, row in enumerate(self.start):
            at, n = self.compute_at[r], len(self.schedule[r])
            b = bisect_left(row, b_t)
            if ranks is not None and r not in ranks:  # nothing free: the copies after the prefix stay with it
                x = at[b] if b < len(at) else n
                first.append(x)
                last.append(x)
                continue
            a = bisect_left(row, a_t, 0, b)
            first.append(at[a - 1] + 1 if a else 0)
            last.append(at[b] if b < len(at) else n)
        return first, last


class ActionWindowModel:
    """The window [first[r], last[r]) of every rank's whole order as a CP-SAT model (see the module doc)."""

    def __init__(self, ctx: ActionContext, first: list[int], last: list[int]):
        self.cp = load_cp_model()
        self.ctx = ctx
        st = self.statics = ctx.statics
        p = st.problem
        self.first, self.last = first, last
        orders, where = ctx.schedule, ctx.where
        current = [job for r, order in enumerate(orders) for job in order[first[r] : last[r]]]
        self.valid = bool(current)
        if not self.valid:
            self.free = current
            return

        def part(job: Job) -> int:
            r, i = where[job]
            return PREFIX if i < first[r] else (WINDOW if i < last[r] else SUFFIX)

        self.part = part
        self.valid = self._reads_no_suffix(current)
        if not self.valid:
            return
        self.model = self.cp.CpModel()
        self._choices(current)
        self._waits()
        self.horizon = ctx.makespan + 1
        self.start, self.end = {}, {}
        self.hints: list[tuple[object, int]] = []
        self._prefix_ends()
        compute, streams = self._jobs()
        self._precedences(compute, streams)
        for r in range(p.pp):
            self._anchor(r, compute[r], streams[r])
            if st.cap[r] is not None and first[r] < last[r]:
                self._memory(r)
        self._makespan()

    def _reads_no_suffix(self, current: list[Job]) -> bool:
        """A free job reads only the prefix and the window; a prefix job reads a free one only from another rank
        (then as a deadline). Orders with a copy before its data may break this: such windows are left out."""
        ctx, part, where = self.ctx, self.part, self.ctx.where
        for job in current:
            if any(part(q) == SUFFIX for q, _ in ctx.inputs[job]):
                return False
            for reader, _ in ctx.readers[job]:
                if part(reader) == PREFIX and where[reader][0] == where[job][0]:
                    return False
        return True

    def _choices(self, current: list[Job]) -> None:
        """The (stage, micro-batch)s wholly inside the window choose their action: each option's jobs are optional,
        present under its literal; every other one keeps the schedule's. The free jobs are the window's and
        the options' (`free`)."""
        ctx, st, model = self.ctx, self.statics, self.model
        self.options: dict[tuple[int, int], dict[str, object]] = {}
        self.lit: dict[Job, object] = {}
        inside = set(current)
        if st.allowed:
            for (s, mb), chosen in ctx.choice.items():
                own = [(FORWARD, s, mb), *st.action_jobs(s, mb, chosen)]
                own += [(BACKWARD, s, mb)] if ctx.whole[(s, mb)] else [(BACKWARD_B, s, mb), (BACKWARD_W, s, mb)]
                if not all(job in inside for job in own):
                    continue
                lits = {x: model.NewBoolVar("") for x in (KEEP, *st.allowed)}
                if chosen not in lits:
                    continue  # (an action the search may not choose: it stays)
                model.AddExactlyOne(lits.values())
                self.options[(s, mb)] = lits
                for x, lit in lits.items():
                    for job in st.action_jobs(s, mb, x):
                        self.lit[job] = lit
        optional = [job for job in self.lit if job not in inside]
        self.free = current + optional

    def _waits(self) -> None:
        """Each free job's inputs as (job, delay, the literal under which it waits for it: None always)."""
        ctx, st = self.ctx, self.statics
        self.waits: dict[Job, list[tuple[Job, int, object]]] = {}
        for job in self.free:
            t, s, mb = job
            if job in self.lit or (t in GRADIENT and (s, mb) in self.options):
                ins = [(q, x, None) for q, x in st.inputs_of(job, set())]
                if t in GRADIENT:
                    for q in self.lit:
                        if q[1:] == (s, mb) and q[0] in (st.types.recompute, st.types.reload):
                            ins.append((q, 0, self.lit[q]))
            else:
                ins = [(q, x, None) for q, x in ctx.inputs[job]]
            self.waits[job] = ins

    def _prefix_ends(self) -> None:
        """When each rank's compute (`ready`), and each of its copy streams (`stream_ready`), is free after the
        prefix."""
        ctx, st = self.ctx, self.statics
        self.ready = ready = [0] * st.problem.pp
        self.stream_ready = [[0, 0] for _ in range(st.problem.pp)]
        for r, order in enumerate(ctx.schedule):
            for job in order[: self.first[r]]:
                if st.copy(job):
                    self.stream_ready[r][st.stream(job)] = ctx.t_end[job]
                else:
                    ready[r] = ctx.t_end[job]

    def _jobs(self) -> tuple[list[list[Job]], list[list[list[Job]]]]:
        """Each free job's start, end and interval (from the earliest the prefix allows), hinted at the schedule's
        times; returns the free jobs per rank on its compute and on each copy stream."""
        ctx, st, model, p = self.ctx, self.statics, self.model, self.statics.problem
        start, end, ready = self.start, self.end, self.ready
        compute: list[list[Job]] = [[] for _ in range(p.pp)]
        streams: list[list[list[Job]]] = [[[], []] for _ in range(p.pp)]
        self.lb: dict[Job, int] = {}
        self.interval = {}
        for job in self.free:
            r = p.rank_of[job[1]]
            c = st.cost[job]
            lb = ready[r]
            if st.copy(job):
                lb = max(lb, self.stream_ready[r][st.stream(job)])
                streams[r][st.stream(job)].append(job)
            else:
                compute[r].append(job)
            for producer, x, _ in self.waits[job]:
                if producer in ctx.where and self.part(producer) == PREFIX:
                    lb = max(lb, ctx.t_end[producer] + x)
            self.lb[job] = lb
            start[job] = model.NewIntVar(lb, self.horizon, "")
            end[job] = model.NewIntVar(lb + c, self.horizon + c, "")
            if job in self.lit:
                self.interval[job] = model.NewOptionalIntervalVar(start[job], c, end[job], self.lit[job], "")
            else:
                self.interval[job] = model.NewIntervalVar(start[job], c, end[job], "")
            if job in ctx.t_start:
                self.hints += [(start[job], ctx.t_start[job]), (end[job], ctx.t_end[job])]
        for (s, mb), lits in self.options.items():
            for x, lit in lits.items():
                self.hints.append((lit, int(x == ctx.choice[(s, mb)])))
        return compute, streams

    def _precedences(self, compute: list[list[Job]], streams: list[list[list[Job]]]) -> None:
        """One job at a time on each rank's compute and copy stream; each free job after its inputs, before a
        prefix reader's start, and micro-batches in order per compute job type and stage where the schedule has
        them so."""
        ctx, model, start, end, where = self.ctx, self.model, self.start, self.end, self.ctx.where
        for r in range(self.statics.problem.pp):
            for jobs in (compute[r], *streams[r]):
                if len(jobs) > 1:
                    model.AddNoOverlap([self.interval[job] for job in jobs])
        for job in self.free:
            for producer, x, cond in self.waits[job]:
                if producer in start:
                    c = model.Add(start[job] >= end[producer] + x)
                    when = [lit for lit in (self.lit.get(job), cond) if lit is not None]
                    if when:
                        c.OnlyEnforceIf(when)
            for reader, x in ctx.readers.get(job, ()):
                if self.part(reader) == PREFIX:  # (on another rank) it must still arrive in time
                    model.Add(end[job] + x <= ctx.t_start[reader])
            t, s, mb = job
            before = (t, s, mb - 1)
            if t in KINDS and mb and before in start and where[before][1] < where[job][1]:
                model.Add(start[job] >= end[before])

    def _arrival(self, producer: Job, x: int):
        return self.end[producer] + x if producer in self.end else self.ctx.t_end[producer] + x

    def _equal_one_of(self, var, options: list, present) -> None:
        """`var` equals one of `options` ((a constant or an expression, the literal under which it exists or
        None)) when `present` (None: always): as `execute`, a job starts as soon as the last of what it waits
        for allows."""
        model, lits = self.model, []
        constants = set()
        for value, exists in options:
            if isinstance(value, int) and exists is None:
                if value in constants:
                    continue
                constants.add(value)
            lit = model.NewBoolVar("")
            model.Add(var == value).OnlyEnforceIf(lit)
            if exists is not None:
                model.AddImplication(lit, exists)
            lits.append(lit)
        model.AddBoolOr(lits + ([present.Not()] if present is not None else []))

    def _anchor(self, r: int, compute: list[Job], streams: list[list[Job]]) -> None:
        lit = self.lit.get
        for job in compute:
            options = [(self.ready[r], None)] + [(self.end[k], lit(k)) for k in compute if k != job]
            options += [(self._arrival(q, x), lit(q) if cond is None else cond) for q, x, cond in self.waits[job]]
            self._equal_one_of(self.start[job], options, lit(job))
        for q, jobs in enumerate(streams):
            for job in jobs:
                options = [(self.ready[r], None), (self.stream_ready[r][q], None)]
                options += [(self.end[k], lit(k)) for k in compute]
                options += [(self._arrival(d, x), lit(d)) for d, x, _ in self.waits[job]]
                options += [(self.end[c], lit(c)) for c in jobs if c != job]
                self._equal_one_of(self.start[job], options, lit(job))

    # ------------------------------------------------------------------ memory

    def _instant(self, job: Job, at_end: bool):
        """A job's start or end: a constant in the prefix, a variable in the window, None in the suffix."""
        if job in self.start:
            return self.end[job] if at_end else self.start[job]
        if self.part(job) == SUFFIX:
            return None
        return self.ctx.t_end[job] if at_end else self.ctx.t_start[job]

    def _memory(self, r: int) -> None:
        """Rank r's memory as half-open holds (see the module doc), within its limit."""
        ctx, st, model = self.ctx, self.statics, self.model
        p, a = st.problem, st.types
        km = st.km
        t0 = min(self.lb[job] for job in self.free if p.rank_of[job[1]] == r)
        end_of_time = self.horizon + max(st.cost[job] for job in ctx.schedule[r])
        holds, demands = [], []

        def hold(begin, finish, amount: int, lit) -> None:
            if isinstance(begin, int) and isinstance(finish, int):
                if finish <= t0:
                    return  # over before anything free runs
                iv = model.NewIntervalVar(begin, finish - begin, finish, "")
            else:
                size = model.NewIntVar(0, end_of_time, "")
                if lit is None:
                    iv = model.NewIntervalVar(begin, size, finish, "")
                else:
                    iv = model.NewOptionalIntervalVar(begin, size, finish, lit, "")
            holds.append(iv)
            demands.append(amount)

        for s in p.stages_of[r]:
            for mb in range(p.microbatches):
                whole = ctx.whole[(s, mb)]
                pieces = hold_pieces(p, s, "whole" if whole else "split", st.rmem[s], st.moved[s], st.back[s])
                grad = (BACKWARD if whole else BACKWARD_B, s, mb)
                jobs = {
                    "F": ((FORWARD, s, mb), True),
                    "R": ((a.recompute, s, mb), True),
                    "O": ((a.offload, s, mb), True),
                    "L": ((a.reload, s, mb), False),
                    "A": (grad, True),
                    "B": ((BACKWARD, s, mb) if whole else (BACKWARD_W, s, mb), True),
                }
                lits = self.options.get((s, mb), {ctx.choice[(s, mb)]: None})
                # per span, each option's amount: what every option holds over it is one hold, the rest optional
                spans: dict[tuple[str, str], dict[str, int]] = {}
                for option in lits:
                    for since, until, x in pieces[option]:
                        if round(x * km) > 0:
                            spans.setdefault((since, until), {})[option] = round(x * km)
                for (since, until), by_option in spans.items():
                    begin = self._instant(*jobs[since])
                    if begin is None:
                        continue  # allocated in the suffix: not modelled
                    finish = self._instant(*jobs[until])
                    if finish is None:
                        finish = end_of_time
                    base = min(by_option.get(o, 0) for o in lits)
                    if base > 0:
                        hold(begin, finish, base, None)
                    for option, x in by_option.items():
                        if x > base:
                            hold(begin, finish, x - base, lits[option])
        if holds:
            model.AddCumulative(holds, demands, st.cap[r])

    # ------------------------------------------------------------------ the makespan

    def _makespan(self) -> None:
        """The makespan: a window job's end plus the tail of what follows it in the suffix, or a constant of the
        prefix (window.py's, with the copies' own successors: the next copy of their stream)."""
        ctx, st, model = self.ctx, self.statics, self.model
        p = st.problem
        orders, part, tail = ctx.schedule, self.part, ctx.tail
        # per rank, the suffix's first compute job and first copy of each stream
        first_compute: list[Job | None] = []
        first_copy: list[list[Job | None]] = []
        for r, order in enumerate(orders):
            fc, fs = None, [None, None]
            for job in order[self.last[r] :]:
                if st.copy(job):
                    q = st.stream(job)
                    fs[q] = fs[q] or job
                elif fc is None:
                    fc = job
            first_compute.append(fc)
            first_copy.append(fs)
        constant = 0
        for r, order in enumerate(orders):
            for job in order[: self.first[r]]:
                value = ctx.t_end[job] + (st.opt[r] if job in ctx.last_compute else 0)
                for succ in ctx.next[job]:
                    if part(succ) == SUFFIX:
                        value = max(value, ctx.t_end[job] + tail[succ])
                for reader, x in ctx.readers[job]:
                    if part(reader) == SUFFIX:
                        value = max(value, ctx.t_end[job] + x + tail[reader])
                constant = max(constant, value)
        self.constant = constant
        self.makespan = model.NewIntVar(constant, max(self.horizon, constant) + 1, "makespan")
        value = constant
        terms = []
        for job in self.free:
            r = p.rank_of[job[1]]
            if st.copy(job):
                follow = first_copy[r][st.stream(job)]
                after = tail[follow] if follow is not None else 0
            else:
                follow = first_compute[r]
                after = tail[follow] if follow is not None else st.opt[r]
            c = model.Add(self.makespan >= self.end[job] + after)
            if job in self.lit:
                c.OnlyEnforceIf(self.lit[job])  # (an option's jobs are wholly inside: nothing after reads them)
            if job in ctx.t_end:
                value = max(value, ctx.t_end[job] + after)
            for reader, x in ctx.readers.get(job, ()):
                if part(reader) == SUFFIX:
                    model.Add(self.makespan >= self.end[job] + x + tail[reader])
                    value = max(value, ctx.t_end[job] + x + tail[reader])
            if job[0] != BACKWARD_W and job not in self.lit:
                terms.append(self.end[job])
        # then as early as possible: the window's jobs, and each rank's last compute job in it
        for r in range(p.pp):
            mine = [job for job in orders[r][self.first[r] : self.last[r]] if not st.copy(job) and job not in self.lit]
            if mine:
                last_end = model.NewIntVar(0, 2 * self.horizon, "")
                model.AddMaxEquality(last_end, [self.end[job] for job in mine])
                terms.append(last_end)
                self.hints.append((last_end, max(ctx.t_end[job] for job in mine)))
        self.hints.append((self.makespan, value))
        self.estimate = value  # the model's makespan of the current schedule
        weight = len(terms) * (2 * self.horizon + 1) + 1
        model.Minimize(self.makespan * weight + sum(terms))

    # ------------------------------------------------------------------ solving

    def solve(self, seconds: float, seed: int = 0, debug: bool = False) -> tuple[list[Order] | None, str]:
        """The window re-solved within `seconds` of deterministic time (the current schedule as the hint)."""
        solver, name, self.spent = solve_window(self, seconds, seed, debug)
        if solver is None:
            return None, name
        st, value = self.statics, solver.Value
        placed = [job for job in self.free if job not in self.lit or solver.BooleanValue(self.lit[job])]
        self.times = {job: (value(self.start[job]), value(self.end[job])) for job in placed}
        rank_of = st.problem.rank_of
        orders = []
        for r, order in enumerate(self.ctx.schedule):
            a, b = self.first[r], self.last[r]
            if a == b:
                orders.append(order)
                continue
            mine = [job for job in placed if rank_of[job[1]] == r]
            # compute jobs by their starts; a copy after every compute job that ends at or before its start
            jobs = sorted((job for job in mine if not st.copy(job)), key=lambda job: self.times[job])
            ends = [self.times[job][1] for job in jobs]
            slots: dict[int, list[Job]] = {}
            for job in sorted((job for job in mine if st.copy(job)), key=lambda job: self.times[job]):
                slots.setdefault(bisect_right(ends, self.times[job][0]), []).append(job)
            row: Order = []
            for i, job in enumerate(jobs):
                row.extend(slots.get(i, ()))
                row.append(job)
            row.extend(slots.get(len(jobs), ()))
            orders.append(order[:a] + row + order[b:])
        self.value = solver.Value(self.makespan) / st.k
        return orders, name
