"""Seed schedules for the search: the library's schedules at the problem's sizes, as orders of compute jobs.

A library schedule seeds the search only where it applies as it is: its `require`s accept the sizes, it puts
the stages where the problem does, and its backwards are whole or split as the problem allows (a whole backward
becomes I then W when the problem wants split backwards). Auxiliary jobs (Paddle's `recv_forward`, ...) are
left out: the synthesized schedule moves its data with its compute jobs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_files
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order


def orders_of(problem: Problem, exp: Expansion) -> list[Order] | None:
    """The expansion's compute jobs as the problem's orders, or None where the schedule does not fit it."""
    if [sorted(row) for row in exp.stage_of] != problem.stages_of:
        return None
    index = {name: t for t, name in enumerate(exp.type_names)}
    compute = {
        index[n]: t
        for n, t in (
            ("forward", FORWARD),
            ("backward", BACKWARD),
            ("backward_b", BACKWARD_B),
            ("backward_w", BACKWARD_W),
        )
    }
    orders: list[Order] = []
    for r, codes in enumerate(exp.jobs):
        order: Order = []
        for code in codes:
            t, c, mb = exp.decode(code)
            if t not in compute:
                continue
            kind, stage = compute[t], exp.stage_of[r][c]
            if kind == BACKWARD and problem.split == "yes":
                order += [(BACKWARD_B, stage, mb), (BACKWARD_W, stage, mb)]
            elif kind in (BACKWARD_B, BACKWARD_W) and problem.split == "no":
                return None
            else:
                order.append((kind, stage, mb))
        orders.append(order)
    return orders


def library_seeds(problem: Problem, files: list[Path] | None = None) -> Iterator[tuple[str, list[Order]]]:
    """(name, orders) of every library schedule that applies to the problem."""
    for path in files if files is not None else library_files():
        try:
            exp = Scenario(path, problem.pp, problem.microbatches, problem.vpp).expansion()
        except DiagnosticError:
            continue  # its requires reject these sizes, or it does not load
        orders = orders_of(problem, exp)
        if orders is not None:
            yield f"library {exp.defn.name}", orders
