"""Large-neighbourhood search: re-solve one window of a schedule exactly, everything else as it is.

A window is the jobs that start within a stretch of time (on every rank, or on a group of neighbouring ranks).
`window.WindowModel` re-orders and re-times them with CP-SAT: the jobs before keep their times, the jobs after
keep their order and are summed up by their tails, so the model's objective is the schedule's makespan (then
the window's work as early as possible: that is what lets the next window improve the makespan). The checker's
timing decides whether the result is kept. Windows slide over the schedule from its start to its end, pass
after pass; a pass that finds nothing makes the windows larger. Before them, `cool_down` solves one window
open at the end over every rank: the end of a schedule is one joint order of every rank's backwards, which the
sliding windows see in slices.

The budget is CP-SAT's deterministic time, so the same inputs give the same schedule.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ppdsl.synth.cpsat import Statics
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Evaluation, Evaluator, Order, total_score
from ppdsl.synth.window import Context, WindowModel
from ppdsl.synth.window_actions import ActionContext, ActionStatics, ActionWindowModel

EPS = 1e-9


# What a window costs, in seconds of this kind of machine (the caller turns them into its work units): CP-SAT's
# deterministic time, evaluating the result and building the model (per job of the schedule, per free job)
SECONDS_PER_DET = 6.0
SECONDS_PER_JOB = 2.5e-6  # evaluating the result (and, when it is kept, reading the schedule again)
SECONDS_PER_FREE_JOB = 1.7e-4
BACKWARD_FIRST = 1  # passes alternate: forward (from the start) first, then backward
COOL_DOWN_GROWTH = 4  # `cool_down`'s window: at most this many times the first
DEPTH = 10  # jobs per rank a window aims at: more ranks than fit are split into groups of neighbouring ranks


def window_work(model, total: int) -> float:
    """What one solved window costs, in seconds of work: CP-SAT's deterministic time, evaluating the result (a
    schedule of `total` jobs) and building the model (per free job)."""
    return SECONDS_PER_DET * model.spent + SECONDS_PER_JOB * total + SECONDS_PER_FREE_JOB * len(model.free)


def potential(ctx: Context, sets: list[set[int]], size: int) -> dict[tuple[int, int], int]:
    """(group, first job) -> how much idle time before critical jobs (those whose start plus tail is the
    makespan) the window holds: what it could take off the makespan at most."""
    from bisect import bisect_left

    idle = []
    for r, starts in enumerate(ctx.start):
        row, acc = [0], 0
        for i, st in enumerate(starts):
            if st + ctx.tail[ctx.orders[r][i]] >= ctx.makespan:
                acc += st - (ctx.end[r][i - 1] if i else 0)
            row.append(acc)
        idle.append(row)
    out = {}
    for g, ranks in enumerate(sets):
        starts = sorted(x for r in ranks for x in ctx.start[r])
        for lo in range(0, len(starts), max(size // 4, 1)):
            t_lo, t_hi = starts[lo], starts[lo + size] if lo + size < len(starts) else float("inf")
            total = 0
            for r in ranks:
                a, b = bisect_left(ctx.start[r], t_lo), bisect_left(ctx.start[r], t_hi)
                total += idle[r][b] - idle[r][a]
            for x in range(lo, lo + max(size // 4, 1)):
                out[(g, x)] = total
    return out


def passes_per_cycle(total: int, window: int) -> int:
    size, n = min(window, total), 1
    while size < total:
        size, n = min(int(size * 1.5), total), n + 1
    return n


def groups(pp: int, size: int, depth: int = DEPTH) -> list[set[int]]:
    """Groups of neighbouring ranks (stages live on neighbouring ranks) for windows of about `size` jobs, `depth`
    per rank."""
    width = max(2, size // depth)
    if width >= pp:
        return [set(range(pp))]
    starts = list(range(0, pp - width + 1, max(width // 2, 1)))
    if starts[-1] != pp - width:
        starts.append(pp - width)
    return [set(range(a, a + width)) for a in starts]


def window_kind(problem: Problem, orders: list[Order], memory_actions: tuple[str, ...] | None) -> tuple:
    """(statics, context, window model) of the windows: window.py's, or window_actions.py's for orders with
    actions (`memory_actions`: those the windows may choose; None: the orders have none)."""
    if memory_actions is None:
        return Statics(problem, orders), Context, WindowModel
    return ActionStatics(problem, orders, memory_actions), ActionContext, ActionWindowModel


def pass_plan(ctx: Context, sets: list[set[int]], size: int, offset: int, step: int, passes: int) -> list:
    """The windows of one pass, as (group of ranks, first job): stretches of time on each group of ranks, from the
    start to the end (or, every other pass, from the end, where the makespan is decided, to the start); the
    windows that hold the most idle time before critical jobs first, among equals by time."""
    plan = []
    for g, ranks in enumerate(sets):
        n = sum(len(ctx.start[r]) for r in ranks)
        plan += [(lo / n, g, lo) for lo in range(offset, max(n - step, 1), step)]
    plan.sort(reverse=passes % 2 == BACKWARD_FIRST)
    gain = potential(ctx, sets, size)
    plan.sort(key=lambda x: -gain.get((x[1], x[2]), 0))
    return [(g, lo) for _, g, lo in plan]


def window_span(ctx: Context, ranks: set[int], lo: int, size: int) -> tuple[float, float] | None:
    """The stretch of time (in the problem's time) of the `size` jobs from the `lo`-th start on `ranks`, open at
    the schedule's ends; None when the ranks have fewer starts."""
    starts = sorted(x for r in ranks for x in ctx.start[r])
    if lo >= len(starts):
        return None
    k = ctx.statics.k
    t_lo = starts[lo] / k if lo else float("-inf")
    t_hi = starts[lo + size] / k if lo + size < len(starts) else float("inf")
    return t_lo, t_hi


def cool_down(
    evaluator: Evaluator,
    orders: list[Order],
    budget: float,
    window: int,
    seed: int = 0,
    out_of_time: Callable[[], bool] = lambda: False,
    per_window: float = 0.02,
) -> tuple[list[Order], Evaluation, float]:
    """`orders` improved by windows open at the schedule's end over every rank (the cool-down and the steady
    state just before it), from `window` jobs, growing by half while each solve is proven optimal and finds
    nothing, up to COOL_DOWN_GROWTH times `window`, within `budget` seconds of work. After a rank's last
    forward its memory only falls, so what decides the end is one joint order of every rank's backwards, which
    the sliding windows see in slices (at pp 8, m 24 on a V at 8 activations they reach 169, where one window
    of the last 163 jobs, solved to optimality in 0.01 s of deterministic time, gives 167)."""
    current = orders
    cur_ev = evaluator.evaluate(current)
    total = sum(len(o) for o in current)
    if not cur_ev.feasible or total == 0:
        return current, cur_ev, 0.0
    statics = Statics(evaluator.problem, current)
    ctx = Context(statics, current, cur_ev)
    spent = SECONDS_PER_JOB * total
    size = min(window, total)
    every_rank = set(range(evaluator.problem.pp))
    while spent < budget and not out_of_time():
        t_lo, _ = window_span(ctx, every_rank, total - size, size)  # (open at the end)
        model = WindowModel(ctx, *ctx.cut(t_lo, float("inf")))
        free = len(model.free)
        found, status = model.solve(min(per_window * (free / window) ** 2, budget - spent), seed=seed)
        spent += window_work(model, total)
        if found is not None:
            ev = evaluator.evaluate(found)
            spent += SECONDS_PER_JOB * total
            if total_score(ev) < total_score(cur_ev):
                current, cur_ev = found, ev
                break  # (what a larger window finds beyond this one, the sliding windows find cheaper)
        if status != "OPTIMAL" or size >= min(COOL_DOWN_GROWTH * window, total):
            break
        size = min(int(size * 1.5), COOL_DOWN_GROWTH * window, total)
    return current, cur_ev, spent


def lns(
    evaluator: Evaluator,
    orders: list[Order],
    budget: float,
    window: int = 30,
    target: float = 0.0,
    seed: int = 0,
    out_of_time: Callable[[], bool] = lambda: False,
    per_window: float = 0.02,
    log: Callable[[str], None] | None = None,
    memory_actions: tuple[str, ...] | None = None,
    depth: int = DEPTH,
) -> tuple[list[Order], Evaluation, float]:
    """Improve `orders` by windows of about `window` jobs (growing when a pass finds nothing) within `budget`
    seconds of work (counted, not measured: CP-SAT's deterministic time and the jobs handled); returns the
    best schedule, its evaluation and the work spent. `memory_actions` (None: the orders have no actions): the
    orders hold recompute / offload / reload jobs, and the windows are window_actions.py's, which choose among
    these actions for the (stage, micro-batch)s wholly inside them (an empty tuple: each keeps the orders'); a
    window's size counts its compute jobs. `depth`: the jobs per rank a window aims at (more ranks than fit are
    split into groups)."""
    problem = evaluator.problem
    rng = random.Random(seed)
    current = orders
    cur_ev = evaluator.evaluate(current)
    total = sum(len(o) for o in current)
    if not cur_ev.feasible or total == 0:
        return current, cur_ev, 0.0
    statics, context, window_model = window_kind(problem, current, memory_actions)
    ctx = context(statics, current, cur_ev)
    spent = SECONDS_PER_JOB * total
    size = min(window, total)
    passes = 0
    stale = 0  # passes in a row that did not shorten the makespan

    def done() -> bool:
        return spent >= budget or cur_ev.makespan <= target + EPS or out_of_time()

    while not done():
        before = cur_ev.makespan
        step = max(size // 2, 1)
        offset = rng.randrange(step) if passes else 0
        sets = groups(problem.pp, size, depth)
        for g, lo in pass_plan(ctx, sets, size, offset, step, passes):
            ranks = sets[g]
            if done():
                break
            span = window_span(ctx, ranks, lo, size)
            if span is None:
                continue
            first, last = ctx.cut(*span, None if len(sets) == 1 else ranks)
            model = window_model(ctx, first, last)
            free = len(model.free)
            found, status = model.solve(per_window * (free / window) ** 2, seed=seed)
            spent += window_work(model, total)
            if found is None:
                continue
            ev = evaluator.evaluate(found)
            if total_score(ev) < total_score(cur_ev):
                if log is not None and ev.makespan < cur_ev.makespan - EPS:
                    log(f"window {g}:{lo}+{size} ({status}): {cur_ev.makespan:g} -> {ev.makespan:g}")
                current, cur_ev = found, ev
                ctx = context(statics, current, cur_ev)
                spent += SECONDS_PER_JOB * total
        passes += 1
        # larger windows while the makespan does not move (what a pass moves earlier still helps the next one),
        # from the smallest again after the largest
        stale = 0 if cur_ev.makespan < before - EPS else stale + 1
        if size >= total:
            if stale >= passes_per_cycle(total, window):
                break  # a whole cycle of sizes found nothing
            size = min(window, total)
        elif stale:
            size = min(int(size * 1.5), total)
    return current, cur_ev, spent
