"""Large-neighbourhood search: re-solve one time window of a schedule exactly, everything else as it is.

A window is the jobs that start within a stretch of time (on every rank). CP-SAT re-orders and re-times them,
with the jobs outside keeping their order, under the same no-overlap, chain and memory constraints as the exact
engine, no later than the current makespan, and as early as possible (the makespan first, then the sum of the
window's start times: moving work earlier is what lets the next window improve the makespan). The checker's
timing decides whether the result is kept. Windows slide over the schedule, pass after pass, while they help.
"""

from __future__ import annotations

from collections.abc import Callable

from ppdsl.language.jobtypes import BACKWARD
from ppdsl.synth.exact import ScheduleModel
from ppdsl.synth.schedule import Evaluation, Evaluator, Order

EPS = 1e-9


def total_score(ev: Evaluation) -> tuple[float, float]:
    """The makespan, then the sum of every job's end: what both local searches minimise."""
    if not ev.feasible:
        return (float("inf"), float("inf"))
    return (round(ev.makespan, 9), round(sum(sum(row) for row in ev.end), 6))


def lns(
    evaluator: Evaluator,
    orders: list[Order],
    budget: float,
    window: int = 96,
    target: float = 0.0,
    seed: int = 0,
    out_of_time: Callable[[], bool] = lambda: False,
) -> tuple[list[Order], Evaluation]:
    """Improve `orders` by windows of about `window` jobs, within `budget` seconds of CP-SAT deterministic time."""
    problem = evaluator.problem
    current = orders
    cur_ev = evaluator.evaluate(current)
    if not cur_ev.feasible:
        return current, cur_ev
    spent = 0.0
    per_window = 0.5
    improved = True
    while improved and spent < budget and cur_ev.makespan > target + EPS and not out_of_time():
        improved = False
        jobs = sorted(
            ((cur_ev.start[r][i], r, job) for r, order in enumerate(current) for i, job in enumerate(order)),
            key=lambda x: (x[0], x[1]),
        )
        step = max(window // 2, 1)
        for lo in range(0, max(len(jobs) - window // 2, 1), step):
            if spent >= budget or cur_ev.makespan <= target + EPS or out_of_time():
                break
            free = {job for _, _, job in jobs[lo : lo + window]}
            times = {job: cur_ev.start[r][i] for r, order in enumerate(current) for i, job in enumerate(order)}
            whole = {(s, mb): t == BACKWARD for order in current for t, s, mb in order if t == BACKWARD or t == 2}
            model = ScheduleModel(problem, whole=whole, horizon=cur_ev.makespan)
            model.keep_order(current, free)
            model.hint(times)
            _earliest_in_window(model, free)
            sol = model.solve(per_window, seed=seed)
            spent += per_window
            if sol.orders is None:
                continue
            ev = evaluator.evaluate(sol.orders)
            if total_score(ev) < total_score(cur_ev):
                current, cur_ev = sol.orders, ev
                improved = True
    return current, cur_ev


def _earliest_in_window(model: ScheduleModel, free: set) -> None:
    """Objective: the makespan first, then the free jobs as early as possible."""
    weight = len(free) * model.horizon + 1
    model.model.Minimize(model.makespan * weight + sum(model.start[job] for job in free if job in model.start))
