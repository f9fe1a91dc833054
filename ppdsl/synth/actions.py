"""Memory actions in a synthesized schedule (`ppdsl synth --memory-actions recompute,offload`): per (stage,
micro-batch) keep, recompute or offload, placed in an order the order search found.

Below the memory an order alone can reach, or where holding less lets a faster order fit, the engine
1. takes the fastest orders the order search finds at relaxed limits (the caller's `bases`), and first puts
   PipeOffload's whole pattern on each (`offload_pattern`: every micro-batch whose gap covers both copies
   offloaded, by the paper's rule and by their code's stricter one); the fastest that fits is improved (step 3);
2. inserts actions where a rank's level exceeds its limit: of the micro-batches in flight at the rank's peak, the
   one held longest first; it is offloaded when the gap between its forward's end and its backward's start
   covers both copies (PipeOffload's rule), else recomputed. A recompute goes right before its backward, where the
   rank would wait for the gradient (it needs nothing from another stage, so it fills that bubble, as Mario
   does); an offload right after its forward, its reload early enough before the backward for the copy;
3. improves by local search: drop an action, swap recompute and offload, move a recompute earlier into an idle
   gap, move a reload earlier or later.
Every candidate is timed by the checker's own execution (`Evaluator`, which packs the jobs into the probe's
expansion): one timing rule, rule 6 of `ppdsl.analysis.timing` for the copy stream.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ppdsl.analysis.memory import MemoryActions
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, FORWARD
from ppdsl.synth.clock import WorkClock
from ppdsl.synth.greedy import Policy, list_schedule
from ppdsl.synth.problem import ACTION_NAMES, KEEP, OFFLOAD, RECOMPUTE, Problem
from ppdsl.synth.schedule import Evaluation, Evaluator, Order

EPS = 1e-9
# seconds of work (`clock.WorkClock`): a base timed this fast gets every variant of PipeOffload's pattern even past
# the deadline (four timings; a few milliseconds each at pp 8, m 32, 0.06-0.09 s at pp 16, m 32 on a V on the
# slower of the machines measured, seconds at pp 64, m 512). At 0.05 that slower machine skipped the variants at
# pp 16 and lost by 0.1% to ZB-V with PipeOffload's pattern in 3 of bench_memory_synth's limits
QUICK_TIMING = 0.25
LIST_SCHEDULE_WORK = 3  # a list schedule, in evaluations of as many jobs (as `search.Search.run_policy` counts)


@dataclass
class Placement:
    """Which (stage, micro-batch) gets which action, and where its jobs go, in steps relative to the anchors: a
    recompute `hoist` jobs before its backward, a reload `lead` jobs before it, an offload `lag` jobs after its
    forward (0: right after it)."""

    action: dict[tuple[int, int], str] = field(default_factory=dict)
    hoist: dict[tuple[int, int], int] = field(default_factory=dict)
    lead: dict[tuple[int, int], int] = field(default_factory=dict)
    lag: dict[tuple[int, int], int] = field(default_factory=dict)

    def copy(self) -> Placement:
        return Placement(dict(self.action), dict(self.hoist), dict(self.lead), dict(self.lag))


@dataclass
class ActionResult:
    orders: list[Order]
    evaluation: Evaluation
    placement: Placement
    origin: str
    candidates: int = 0  # schedules timed

    def counts(self) -> dict[str, int]:
        out = {RECOMPUTE: 0, OFFLOAD: 0}
        for a in self.placement.action.values():
            out[a] += 1
        return out


def describe_counts(counts: Mapping[str, int]) -> str:
    """`{"recompute": 2, "offload": 0}` -> "2 recompute", for a result's origin ("no action needed" for none)."""
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "no action needed"


class ActionEngine:
    """Inserts and improves memory actions in orders of one problem (whose expansion has the action types)."""

    def __init__(self, problem: Problem, allowed: Iterable[str], deadline: float, clock: WorkClock | None = None):
        """`deadline`: a point on `clock` (counted work, deterministic; a clock of its own when none is given)."""
        self.problem = problem
        self.evaluator = Evaluator(problem)
        self.clock = clock if clock is not None else WorkClock(max(deadline, 0.0))
        self.clock.attach(self.evaluator, problem.jobs_per_step)
        actions = MemoryActions.of(problem.expansion) if problem.expansion is not None else None
        if actions is None:
            raise ValueError("the problem was built without memory actions")
        self.types = actions
        self.allowed = [a for a in ACTION_NAMES if a in set(allowed)]
        self.deadline = deadline
        self.started = self.clock.now()
        exp = problem.expansion
        stages = range(problem.nstages)
        self.copy_time = [
            exp.cost[actions.offload][problem.rank_of[s]][problem.chunk_of[s]]
            + exp.cost[actions.reload][problem.rank_of[s]][problem.chunk_of[s]]
            for s in range(problem.nstages)
        ]
        # what an action takes off its rank's level while its micro-batch waits: a recompute all but what the
        # forward keeps, an offload what it moves
        self.saving = {
            RECOMPUTE: [exp.mem_delta[actions.recompute][problem.rank_of[s]][problem.chunk_of[s]] for s in stages],
            OFFLOAD: [-exp.mem_delta[actions.offload][problem.rank_of[s]][problem.chunk_of[s]] for s in stages],
        }
        self.reload_time = [
            exp.cost[actions.reload][problem.rank_of[s]][problem.chunk_of[s]] for s in range(problem.nstages)
        ]

    def out_of_time(self) -> bool:
        return self.clock.past(self.deadline)

    # -- building orders --------------------------------------------------------------------------------------
    def materialize(self, base: list[Order], plan: Placement) -> list[Order]:
        """`base` (compute jobs only) with the plan's jobs inserted."""
        a = self.types
        out: list[Order] = []
        for order in base:
            backward_at: dict[tuple[int, int], int] = {}
            for i, (t, s, mb) in enumerate(order):
                if t in (BACKWARD, BACKWARD_B):
                    backward_at[(s, mb)] = i
            before: dict[int, list[tuple[int, int, int]]] = {}
            after: dict[int, list[tuple[int, int, int]]] = {}
            for i, (t, s, mb) in enumerate(order):
                if t != FORWARD:
                    continue
                action = plan.action.get((s, mb), KEEP)
                if action == KEEP:
                    continue
                b = backward_at[(s, mb)]
                if action == RECOMPUTE:
                    at = max(i + 1, b - plan.hoist.get((s, mb), 0))
                    before.setdefault(at, []).append((a.recompute, s, mb))
                else:
                    after.setdefault(min(i + plan.lag.get((s, mb), 0), b - 1), []).append((a.offload, s, mb))
                    at = max(i + 1, b - plan.lead.get((s, mb), 0))
                    before.setdefault(at, []).append((a.reload, s, mb))
            row: Order = []
            for i, job in enumerate(order):
                row.extend(before.get(i, ()))
                row.append(job)
                row.extend(after.get(i, ()))
            out.append(row)
        return out

    def unpack(self, orders: list[Order]) -> tuple[list[Order], Placement]:
        """Orders with actions as the compute-only orders and the placement that `materialize` puts back into
        them (exactly, where each gap between two compute jobs holds its offloads first, then its recomputes and
        reloads in the order of their forwards; check `materialize(*unpack(orders)) == orders` to rely on it)."""
        a, plan, base = self.types, Placement(), []
        for row in orders:
            compute: Order = []
            forward_at: dict[tuple[int, int], int] = {}
            backward_at: dict[tuple[int, int], int] = {}
            acts: list[tuple[int, tuple[int, int], int]] = []  # (type, (stage, mb), compute jobs before it)
            for job in row:
                t, s, mb = job
                if t == a.recompute or a.copies(t):
                    acts.append((t, (s, mb), len(compute)))
                    continue
                if t == FORWARD:
                    forward_at[(s, mb)] = len(compute)
                elif t in (BACKWARD, BACKWARD_B):
                    backward_at[(s, mb)] = len(compute)
                compute.append(job)
            for t, key, before in acts:
                if t == a.recompute:
                    plan.action[key] = RECOMPUTE
                    plan.hoist[key] = backward_at[key] - before
                elif t == a.offload:
                    plan.action[key] = OFFLOAD
                    plan.lag[key] = before - 1 - forward_at[key]
                else:
                    plan.lead[key] = backward_at[key] - before
            base.append(compute)
        return base, plan

    def scheduled(self, policies: Iterable[Policy], until: float) -> ActionResult | None:
        """The list scheduler's own schedules with actions (`greedy`, which takes them while it schedules, under
        each of `policies` until `until`, then the best few with random tie-breaking while time is left): the
        fastest within the limits, then improved by the local search (whose moves place the actions as
        `materialize` does)."""
        best: ActionResult | None = None
        ranked: list[tuple[float, int, Policy]] = []

        def run(policy: Policy) -> None:
            nonlocal best
            orders = list_schedule(self.problem, policy)
            self.clock.spend(LIST_SCHEDULE_WORK * self.problem.jobs_per_step / self.clock.rate)
            if orders is None:
                return  # a memory deadlock of this policy
            ev = self.evaluator.evaluate(orders)
            if not ev.feasible:
                return
            ranked.append((ev.makespan, len(ranked), policy))
            if best is None or ev.makespan < best.evaluation.makespan - EPS:
                best = ActionResult(orders, ev, Placement(), f"list scheduling {policy.label()}")

        for policy in policies:
            if self.clock.past(until) and best is not None:
                break
            run(policy)
        # (the search's improve and local steps need most of the share on large problems; this fills the rest)
        tops = [policy for _, _, policy in sorted(ranked)[:3]]
        seed = 0
        while tops and not self.clock.past(until - 0.5 * (until - self.started)):
            seed += 1
            for policy in tops:
                run(replace(policy, seed=seed))
        if best is None:
            return None
        base, plan = self.unpack(best.orders)
        best.placement = plan
        deadline, self.deadline = self.deadline, min(self.deadline, until)
        plan, orders, ev = self.improve(base, plan, best.evaluation, best.orders)
        self.deadline = deadline
        if orders is not best.orders:
            best = ActionResult(orders, ev, plan, f"{best.origin}, improved")
        return best

    def evaluate(self, base: list[Order], plan: Placement) -> tuple[list[Order], Evaluation]:
        orders = self.materialize(base, plan)
        return orders, self.evaluator.evaluate(orders)

    # -- choosing ---------------------------------------------------------------------------------------------
    def _held(self, base: list[Order], orders: list[Order], ev: Evaluation, rank: int, plan: Placement):
        """The kept (stage, micro-batch)s of `rank` in flight at its peak, each with how long it is held (from
        its forward's end to its backward's start), longest first."""
        fwd_end: dict[tuple[int, int], float] = {}
        bwd_start: dict[tuple[int, int], float] = {}
        for i, (t, s, mb) in enumerate(orders[rank]):
            if t == FORWARD:
                fwd_end[(s, mb)] = ev.end[rank][i]
            elif t in (BACKWARD, BACKWARD_B):
                bwd_start[(s, mb)] = ev.start[rank][i]
        at = ev.peak_times[rank] if ev.peak_times else 0.0
        kept = [k for k in fwd_end if k in bwd_start and plan.action.get(k, KEEP) == KEEP]
        # (one held no time at all cannot lower a peak)
        live = [k for k in kept if fwd_end[k] <= at + EPS < bwd_start[k]]
        live = live or [k for k in kept if bwd_start[k] > fwd_end[k] + EPS]
        return sorted(((bwd_start[k] - fwd_end[k], k) for k in live), key=lambda x: (-x[0], x[1]))

    def _choose(self, gap: float, stage: int, prefer: str) -> str:
        """`prefer` offload: PipeOffload's rule, offload when the gap covers both copies, else recompute;
        `prefer` recompute: recompute whenever allowed."""
        covers = gap >= self.copy_time[stage] - EPS
        if OFFLOAD in self.allowed and (covers or RECOMPUTE not in self.allowed) and prefer == OFFLOAD:
            return OFFLOAD
        return RECOMPUTE if RECOMPUTE in self.allowed else OFFLOAD

    def _lead(
        self,
        orders: list[Order],
        ev: Evaluation,
        rank: int,
        key: tuple[int, int],
        early: bool = False,
        at: tuple[int, int] | None = None,
    ) -> int:
        """How many compute jobs of the base order before its backward a reload is issued: as late as the backward
        allows, right after the last compute job between its forward and its backward that ends early enough for
        the copy to end by the backward's start (a copy starts when the rank reaches it, so one issued earlier
        would give the memory back sooner and lower no peak). When only the forward ends that early (the gap is
        short), after the forward's next job: issued right after the offload, the reload would start as the
        offload ends and hold the rank's memory all along; one job later it holds it off for that job, and
        delays the backward the least of the places that do. `early`: before the last job in between that
        starts early enough instead (one job sooner, where the copy stream is busy with offloads then). `at`: where
        the forward and the backward are in the rank's order, when the caller knows (else a scan of the order)."""
        s, _ = key
        row = orders[rank]
        if at is not None:
            f, b = at
        else:
            f = next(i for i, job in enumerate(row) if job == (FORWARD, *key))
            b = next(i for i, (t, ss, m) in enumerate(row) if t in (BACKWARD, BACKWARD_B) and (ss, m) == key)
        # the base order's jobs in between count (`materialize` counts the lead in those: no copy, no recompute);
        # from the backward back to the last that is early enough (a rank's compute jobs end in order)
        need = ev.start[rank][b] - self.reload_time[s]
        times = ev.start[rank] if early else ev.end[rank]
        recompute, copies = self.types.recompute, self.types.copies
        after = 0  # jobs in between after the one found
        for i in range(b - 1, f, -1):
            t = row[i][0]
            if t == recompute or copies(t):
                continue
            if times[i] <= need + EPS:
                return after + 1 if early else after
            after += 1
        return after if early else max(after - 1, 0)

    def insert(
        self,
        base: list[Order],
        prefer: str,
        must: bool = False,
        bound: float = float("inf"),
        until: float | None = None,
        timed: tuple[list[Order], Evaluation] | None = None,
    ) -> tuple[Placement, list[Order], Evaluation] | None:
        """Add actions, one (stage, micro-batch) at a time on the rank furthest over its limit, until every rank
        and the host fit (None: nothing left to act on, slower than `bound` already (actions rarely make an order
        faster), or out of time (the deadline, or `until` when given) unless `must`: nothing found yet). Once the
        host is over its limit, the offloads it holds at its peak become recomputes (`_relieve_host`) and what a
        rank still needs is recomputed. `timed`: `base` already timed without actions (`evaluate`)."""
        plan = Placement()
        orders, ev = timed if timed is not None else self.evaluate(base, plan)
        limit = self.problem.limit
        host_limit = self.problem.expansion.host_limit if self.problem.expansion is not None else None
        barred: set[tuple[int, int]] = set()  # offloads the host could not hold: not offloaded again
        host_full = False
        while not ev.feasible:
            late = self.clock.past(self.deadline if until is None else until)
            if ev.deadlock or (late and not must) or ev.makespan > bound:
                return None
            if host_limit is not None and ev.host_peak > host_limit + EPS:
                host_full = True
                if not self._relieve_host(orders, ev, plan, host_limit, barred):
                    return None
                orders, ev = self.evaluate(base, plan)
                continue
            over = [(ev.peaks[r] - limit[r], r) for r in range(self.problem.pp) if ev.peaks[r] > limit[r] + EPS]
            # (with the host full, a new offload would likely be traded back: what is left is recomputed)
            now = RECOMPUTE if host_full and RECOMPUTE in self.allowed else prefer
            acted = False
            # on every rank over its limit at once (one evaluation per round, not per action): of the micro-batches
            # in flight at its peak, the ones held longest, as many as the excess needs
            for excess, rank in sorted(over, reverse=True):
                saved = 0.0
                for gap, key in self._held(base, orders, ev, rank, plan):
                    if saved >= excess - EPS:
                        break
                    action = self._choose(gap, key[0], now)
                    if action == OFFLOAD and key in barred:
                        continue
                    plan.action[key] = action
                    if action == OFFLOAD:
                        plan.lead[key] = self._lead(orders, ev, rank, key)
                    saved += self.saving[action][key[0]]
                    acted = True
                if saved < excess - EPS and RECOMPUTE in self.allowed:
                    # (nothing kept is left to act on, but an offloaded one is on the rank at its peak: between
                    # its forward's end and its offload's, or reloaded already; recomputed, it keeps less there)
                    for _, key in self._on_rank(orders, ev, rank, plan):
                        if saved >= excess - EPS:
                            break
                        plan.action[key] = RECOMPUTE
                        plan.lead.pop(key, None)
                        plan.lag.pop(key, None)
                        saved += self.saving[RECOMPUTE][key[0]]
                        acted = True
            if not acted:
                return None
            orders, ev = self.evaluate(base, plan)
        return plan, orders, ev

    def _on_rank(
        self, orders: list[Order], ev: Evaluation, rank: int, plan: Placement
    ) -> list[tuple[float, tuple[int, int]]]:
        """The offloaded (stage, micro-batch)s of `rank` whose memory is on the rank at its peak (from the forward's
        end to the offload's, or from the reload's start to the backward's end), each with how long the offload
        keeps it off the rank, longest first."""
        a, at = self.types, ev.peak_times[rank] if ev.peak_times else 0.0
        times: dict[tuple[int, int], dict[int, tuple[float, float]]] = {}
        for i, (t, s, mb) in enumerate(orders[rank]):
            times.setdefault((s, mb), {})[t] = (ev.start[rank][i], ev.end[rank][i])
        out = []
        for key, action in plan.action.items():
            job = times.get(key, {})
            if action != OFFLOAD or a.offload not in job or a.reload not in job:
                continue
            backward = job.get(BACKWARD) or job.get(BACKWARD_B)
            f_end, o_end, l_start = job[FORWARD][1], job[a.offload][1], job[a.reload][0]
            # (at one instant finished offloads free first, then compute jobs, then reloads starting)
            if f_end <= at + EPS < o_end or (backward is not None and l_start <= at + EPS < backward[1]):
                out.append((l_start - o_end, key))
        return sorted(out, key=lambda x: (-x[0], x[1]))

    def host_held(self, orders: list[Order], ev: Evaluation) -> list[tuple[float, float, tuple[int, int]]]:
        """The offloads the host holds at its peak (from the offload's start to the reload's end), each as (what
        it holds, how long, (stage, micro-batch)), the most held and longest first."""
        a, at = self.types, ev.host_peak_time
        copied: dict[tuple[int, int], float] = {}
        held = []
        for r, row in enumerate(orders):
            for i, (t, s, mb) in enumerate(row):
                if t == a.offload:
                    copied[(s, mb)] = ev.start[r][i]
            for i, (t, s, mb) in enumerate(row):
                # (at one instant the host takes back what reloads ended before an offload starts)
                if t == a.reload and copied[(s, mb)] <= at + EPS < ev.end[r][i]:
                    held.append((self.saving[OFFLOAD][s], ev.end[r][i] - copied[(s, mb)], (s, mb)))
        return sorted(held, key=lambda x: (-x[0], -x[1], x[2]))

    def _relieve_host(
        self, orders: list[Order], ev: Evaluation, plan: Placement, host_limit: float, barred: set[tuple[int, int]]
    ) -> bool:
        """Turn the offloads the host holds at its peak into recomputes (or keep them, with offload alone), the
        most held and longest first, as many as its excess needs; False: none held there."""
        excess, freed, acted = ev.host_peak - host_limit, 0.0, False
        for amount, _, key in self.host_held(orders, ev):
            if freed >= excess - EPS:
                break
            plan.lead.pop(key, None)
            plan.lag.pop(key, None)
            if RECOMPUTE in self.allowed:
                plan.action[key] = RECOMPUTE
            else:
                del plan.action[key]
            barred.add(key)
            freed += amount
            acted = True
        return acted

    def improve(
        self, base: list[Order], plan: Placement, ev: Evaluation, orders: list[Order] | None = None
    ) -> tuple[Placement, list[Order], Evaluation]:
        """Local search over the plan: accept a move that keeps every limit and is faster, or as fast with fewer
        actions; stop when no move helps or time is up. It starts from the plan materialized, or from `orders`
        (timed `ev`) when given: the plan materialized and timed already, or the list scheduler's orders, whose
        actions are placed otherwise."""
        if orders is not None:
            best_plan, best_orders, best = plan, orders, ev
        else:
            best_plan, (best_orders, best) = plan, self.evaluate(base, plan)
        improved = True
        while improved and not self.out_of_time():
            improved = False
            for cand in self._moves(best_plan):
                if self.out_of_time():
                    break
                orders, cev = self.evaluate(base, cand)
                if not cev.feasible:
                    continue
                fewer = len(cand.action) < len(best_plan.action)
                if cev.makespan < best.makespan - EPS or (fewer and cev.makespan <= best.makespan + EPS):
                    best_plan, best_orders, best, improved = cand, orders, cev, True
                    break
        return best_plan, best_orders, best

    def _moves(self, plan: Placement) -> Iterable[Placement]:
        keys = sorted(plan.action)
        for key in keys:  # fewer actions first: each kept micro-batch costs nothing
            cand = plan.copy()
            del cand.action[key]
            cand.hoist.pop(key, None)
            cand.lead.pop(key, None)
            cand.lag.pop(key, None)
            yield cand
        for key in keys:
            action = plan.action[key]
            if action == RECOMPUTE:
                if OFFLOAD in self.allowed:
                    cand = plan.copy()
                    cand.action[key] = OFFLOAD
                    cand.lead[key] = 2
                    cand.lag.pop(key, None)
                    yield cand
                for step in (1, 2):
                    cand = plan.copy()
                    cand.hoist[key] = plan.hoist.get(key, 0) + step
                    yield cand
            else:
                if RECOMPUTE in self.allowed:
                    cand = plan.copy()
                    cand.action[key] = RECOMPUTE
                    yield cand
                for step in (1, -1):
                    lead = plan.lead.get(key, 0) + step
                    if lead >= 0:
                        cand = plan.copy()
                        cand.lead[key] = lead
                        yield cand

    def offload_pattern(
        self,
        base: list[Order],
        early: bool = False,
        strict: bool = False,
        timed: tuple[list[Order], Evaluation] | None = None,
    ) -> Placement | None:
        """PipeOffload's rule on a whole order at once: offload every (stage, micro-batch) whose forward-to-backward
        gap, timed without actions, covers both its copies (`strict`: the rule of their code, the gap less the
        backward covers three round trips), each reload as late as its backward allows (`early`: see `_lead`) (None:
        offload not allowed, or no gap covers them). The insertion acts only where a rank is over its limit, one
        peak at a time, and at large sizes runs out of time before it reaches this pattern."""
        if OFFLOAD not in self.allowed:
            return None
        orders, ev = timed if timed is not None else self.evaluate(base, Placement())  # (`timed`: base, timed)
        if ev.deadlock:
            return None
        plan = Placement()
        for rank, row in enumerate(orders):
            forward_at: dict[tuple[int, int], int] = {}  # (stage, micro-batch) -> its forward's step
            for i, (t, s, mb) in enumerate(row):
                if t == FORWARD:
                    forward_at[(s, mb)] = i
                elif t in (BACKWARD, BACKWARD_B) and (s, mb) in forward_at:
                    f = forward_at[(s, mb)]
                    gap = ev.start[rank][i] - ev.end[rank][f]
                    if strict:  # (PipeOffload's code: the gap less the backward covers three round trips)
                        covers = gap - (ev.end[rank][i] - ev.start[rank][i]) > 3 * self.copy_time[s]
                    else:
                        covers = gap >= self.copy_time[s] - EPS
                    if covers:
                        plan.action[(s, mb)] = OFFLOAD
                        plan.lead[(s, mb)] = self._lead(orders, ev, rank, (s, mb), early, at=(f, i))
        return plan if plan.action else None

    def search(
        self, bases: Iterable[tuple[str, list[Order]]], fallback: bool = False, grace: float = 0.0
    ) -> ActionResult | None:
        """The fastest schedule within the limits over the bases, with actions inserted and improved. Until one is
        found, an insertion goes on past the deadline: to its end when nothing else was found (`fallback` False),
        else for `grace` seconds more (at large sizes one insertion can outlast the whole time limit, and the
        caller already holds a schedule)."""
        best: ActionResult | None = None
        policies = [OFFLOAD, RECOMPUTE] if len(self.allowed) == 2 else self.allowed
        bases = list(bases)
        # PipeOffload's pattern on every base first (one evaluation each), the fastest one improved
        patterned: tuple[list[Order], Placement] | None = None
        timed: dict[int, tuple[list[Order], Evaluation]] = {}

        spent: list[float] = []  # how long timing a base took

        def unacted(n: int, base: list[Order]) -> tuple[list[Order], Evaluation]:
            """Base `n` timed without actions, once: the start of its pattern and of each of its insertions."""
            if n not in timed:
                t0 = self.clock.now()
                timed[n] = self.evaluate(base, Placement())
                spent.append(self.clock.now() - t0)
            return timed[n]

        for n, (origin, base) in enumerate(bases):
            # a base that fits as it is needs no action (the insertion finds nothing to act on in it, and drops it)
            orders, ev = unacted(n, base)
            if ev.feasible and (best is None or ev.makespan < best.evaluation.makespan - EPS):
                best = ActionResult(orders, ev, Placement(), f"{origin} as it is")
        for (n, (origin, base)), early, strict in itertools.product(enumerate(bases), (False, True), (False, True)):
            # (the paper's rule on every base whatever the time, as an insertion that must end; the other variants
            # past the deadline's grace only where a timing is quick: at pp=64 m=512 one takes seconds)
            late = self.clock.past(self.deadline + grace) and (best is not None or fallback)
            if late and (early or strict) and max(spent, default=0.0) > QUICK_TIMING:
                continue
            if OFFLOAD not in self.allowed:
                break
            pattern = self.offload_pattern(base, early, strict, unacted(n, base))
            if pattern is None:
                continue
            orders, ev = self.evaluate(base, pattern)
            if ev.feasible and (best is None or ev.makespan < best.evaluation.makespan - EPS):
                best = ActionResult(orders, ev, pattern, f"{origin} with PipeOffload's rule")
                patterned = (base, pattern)
        if best is not None and patterned is not None:
            plan, orders, ev = self.improve(*patterned, best.evaluation, best.orders)
            best = ActionResult(orders, ev, plan, best.origin)
        for n, (origin, base) in enumerate(bases):
            for prefer in policies:
                if self.out_of_time() and best is not None:
                    break
                bound = float("inf") if best is None else best.evaluation.makespan + self._slack(best)
                until = self.deadline + grace if best is None else None
                must = best is None and not fallback
                found = self.insert(base, prefer, must=must, bound=bound, until=until, timed=unacted(n, base))
                if found is None:
                    continue
                plan, orders, ev = found
                if best is None or ev.makespan < best.evaluation.makespan + self._slack(best):
                    plan, orders, ev = self.improve(base, plan, ev, orders)  # (insert timed the plan)
                if best is None or ev.makespan < best.evaluation.makespan - EPS:
                    best = ActionResult(orders, ev, plan, origin)
        if best is not None:
            best.candidates = self.evaluator.calls
        return best

    @staticmethod
    def _slack(best: ActionResult) -> float:
        """How much slower an inserted schedule may be and still be improved (local search often gains this)."""
        return 0.1 * best.evaluation.makespan
