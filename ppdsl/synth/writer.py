"""A synthesized schedule as `.sched` text that `ppdsl check` proves at the sizes it was made for.

The file is self-contained where it can be: the sizes as a `require`, the placement, the costs and the link
latency / bandwidth as `cost` / `comm` declarations, the memory accounting and the limit as `memory`
declarations, so that a plain `ppdsl check FILE --pp P -m M [--vpp V]` reports the makespan the search found.
Costs with many per-stage values (a calibrated cost file) and bytes measured on a model stay outside the file;
its docstring says which options reproduce them.

The order is written per rank as job statements, runs of a repeated group folded into `repeat n { ... }`, when
every job type keeps its micro-batches in order on every stage (the counters of the language then give each
job its micro-batch); otherwise as a literal table. A periodic schedule (`synth --periodic`) is written as its
block instead: a loop over periods in which each rank runs its jobs of the block, each for the micro-batch that
is as many periods behind as the job's delay, so one file holds for any number of micro-batches.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

from ppdsl.common.text import escaped
from ppdsl.language.format import format_text
from ppdsl.plan.kinds import (
    ALWAYS,
    BACKWARD,
    BACKWARD_B,
    BACKWARD_W,
    DEFAULT_RECOMPUTE_FRACTION,
    FORWARD,
    OPTIMIZER,
    Memory,
    copies,
    is_action,
    letter_of,
    memory_of,
)
from ppdsl.synth.periodic import Block
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import GRADIENTS, Order, last_gradients, with_reductions
from ppdsl.synth.steady import RankSteady, SteadyForm

NAMES = {t: k.name for t, k in enumerate(ALWAYS)}
LETTERS = {t: k.letter for t, k in enumerate(ALWAYS)}
MAX_COST_VALUES = 8  # distinct per-stage values written as a conditional in the file; more stay outside
MAX_GROUP = 8  # the longest repeated group folded into `repeat`
WIDTH = 100


@dataclass
class Header:
    """What the docstring says: the inputs, the result and how it was found."""

    name: str
    inputs: list[str]  # lines: sizes, costs, memory, limit
    result: list[str]  # lines: makespan, bound, bubble, peaks
    found_by: list[str]  # lines: engines and their steps
    command: str  # the command line that regenerates the file
    check: str  # the command line that checks it


def docstring_line(text: str) -> str:
    """A line of the file's docstring: control characters escaped and three double quotes broken, so that no path
    of the command line (which the docstring quotes) can end the docstring early or add lines."""
    return escaped(text).replace('"""', '\\"\\"\\"')


def number(value: float) -> str:
    """A number as the language writes it: `1`, `0.5`, `0.0000001`: digits and a point, never an exponent (the
    language has none), the shortest that reads back as the same float."""
    if value == int(value):
        return str(int(value))
    return format(Decimal(repr(float(value))), "f")


def _per_stage_expression(values: list[float], index: str = "stage") -> str | None:
    """`1`, or `if stage == 7 then 1.5 else 1`; None when there are too many distinct values to write. `index`:
    what `values` are indexed by (`rank` for the optimizer, which runs once per rank)."""
    counts = Counter(values)
    if len(counts) == 1:
        return number(values[0])
    if len(counts) > MAX_COST_VALUES:
        return None
    common = counts.most_common(1)[0][0]
    expr = number(common)
    for value in sorted(set(values) - {common}, reverse=True):
        stages = [s for s, v in enumerate(values) if v == value]
        test = " or ".join(f"{index} == {s}" for s in stages)
        expr = f"if {test} then {number(value)} else {expr}"
    return expr


def type_name(problem: Problem, t: int) -> str:
    """A job type's name: the built-in five by index, the memory actions through the probe's types (their
    indices depend on the schedule, see `ppdsl.plan.kinds`)."""
    if t in NAMES:
        return NAMES[t]
    assert problem.expansion is not None
    return problem.expansion.type_names[t]


def _action_costs(problem: Problem, used: set[int]) -> list[tuple[str, list[float]]]:
    """(name, [stage] cost) of the memory actions the orders use."""
    exp = problem.expansion
    if exp is None:
        return []
    out = []
    for t in sorted(used):
        name = exp.type_names[t]
        if is_action(name):
            out.append((name, [exp.cost[t][problem.rank_of[s]][problem.chunk_of[s]] for s in range(problem.nstages)]))
    return out


def _action_lines(problem: Problem, used: set[int]) -> list[str]:
    """`memory recompute fraction = ...` (what a recomputed forward rebuilds) and the host limit, when the
    orders use the actions."""
    exp = problem.expansion
    names = {type_name(problem, t) for t in used}
    lines = []
    full = problem.recompute_fraction in (None, DEFAULT_RECOMPUTE_FRACTION)  # (a full recompute needs no line)
    rebuilds = [n for n in names if memory_of(n) is Memory.REBUILDS]
    if rebuilds and not full:
        lines.append(f"memory {rebuilds[0]} fraction = {number(problem.recompute_fraction)}")
    if exp is not None and exp.host_limit is not None and any(copies(n) for n in names):
        lines.append(f"memory host limit = {number(exp.host_limit)}")
    return lines


def declarations(problem: Problem, used: set[int], costs_in_file: bool) -> list[str]:
    """The placement, costs, links and memory of the problem as `.sched` declarations."""
    lines = [f"placement {problem.placement}", ""]
    if costs_in_file:
        for t in (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W):
            if t in used:
                lines.append(f"cost {NAMES[t]} = {_per_stage_expression(problem.cost[t])}")
        for name, values in _action_costs(problem, used):
            lines.append(f"cost {name} = {_per_stage_expression(values)}")
        if problem.reduce_type is not None:  # (at the request's --dp: `check --dp` then times it as searched)
            lines.append(f"cost {type_name(problem, problem.reduce_type)} = {_per_stage_expression(problem.reduce)}")
        if any(problem.optimizer_cost):  # (a calibrated cost file times it; the default is 0)
            lines.append(f"cost optimizer = {_per_stage_expression(problem.optimizer_cost, 'rank')}")
        latency, bandwidth = problem_links(problem)
        if latency:
            lines.append(f"comm latency = {number(latency)}")
        if bandwidth:
            lines.append(f"comm bandwidth = {number(bandwidth)}")
        lines.append("")
    if problem.memory_unit == "activations":
        if BACKWARD_B in used:
            lines.append(f"memory backward_b frees {number(problem.backward_b_frees)}")
        limits = set(problem.limit)
        if len(limits) == 1 and (limit := limits.pop()) != float("inf"):
            lines.append(f"memory limit = {number(limit)}")
    lines += _action_lines(problem, used)
    if lines[-1] != "":
        lines.append("")
    return lines


def problem_links(problem: Problem) -> tuple[float, float | None]:
    """The latency and bandwidth the problem's link times came from."""
    exp = problem.expansion
    return (exp.latency, exp.bandwidth) if exp is not None else (0.0, None)


def costs_fit_in_file(problem: Problem) -> bool:
    tables = [problem.cost[t] for t in (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W)]
    if problem.expansion is not None:
        every_type = set(range(len(problem.expansion.type_names)))
        tables += [values for _, values in _action_costs(problem, every_type)]
    tables += [problem.reduce] if problem.reduce else []
    return all(_per_stage_expression(values) is not None for values in [*tables, problem.optimizer_cost])


def in_order(orders: list[Order]) -> bool:
    """Does every (job type, stage) run its micro-batches 0, 1, 2, ... in order (whole and split backwards
    sharing one count, as the language's counters do)?"""
    seen: dict[tuple[int, int], int] = {}
    for order in orders:
        for t, s, mb in order:
            key = (BACKWARD if t == BACKWARD_B else t, s)
            if seen.get(key, 0) != mb:
                return False
            seen[key] = mb + 1
    return True


def _fold(tokens: list[str]) -> list[tuple[int, list[str]]]:
    """Runs of a repeated group: [(count, group), ...] covering `tokens` in order, greedily longest first."""
    out: list[tuple[int, list[str]]] = []
    i, n = 0, len(tokens)
    while i < n:
        best_len, best_count = 1, 1
        for size in range(1, MAX_GROUP + 1):
            if i + 2 * size > n:
                break
            group = tokens[i : i + size]
            count = 1
            while tokens[i + count * size : i + (count + 1) * size] == group:
                count += 1
            if count > 1 and count * size > best_len * best_count:
                best_len, best_count = size, count
        out.append((best_count, tokens[i : i + best_len]))
        i += best_len * best_count
    # merge neighbouring single jobs that did not repeat into one line
    merged: list[tuple[int, list[str]]] = []
    for count, group in out:
        if count == 1 and merged and merged[-1][0] == 1:
            merged[-1][1].extend(group)
        else:
            merged.append((count, list(group)))
    return merged


def _statement(problem: Problem, t: int, s: int, mb: str | None = None) -> str:
    args = ([] if problem.vpp == 1 else [f"chunk = {problem.chunk_of[s]}"]) + ([] if mb is None else [f"mb = {mb}"])
    name = type_name(problem, t)
    return f"{name}({', '.join(args)})" if args else name


def _job_lines(problem: Problem, tokens: list[tuple[int, int]], indent: int) -> list[str]:
    """Job statements with repeated groups folded (`repeat n { ... }`, `forward * 4`), wrapped at `indent`."""
    pad = " " * indent
    lines = []
    for count, group in _fold([_statement(problem, t, s) for t, s in tokens]):
        if count == 1:
            lines.extend(textwrap.wrap(" ".join(group), WIDTH, initial_indent=pad, subsequent_indent=pad))
        elif len(group) == 1:
            lines.append(f"{pad}{group[0]} * {count}")
        else:
            lines.append(f"{pad}repeat {count} {{ {' '.join(group)} }}")
    return lines


def _repeats_expression(steady: SteadyForm, rank: int) -> str:
    """How often `rank` repeats its block at any admitted count: `microbatches - 4`, `(microbatches - 2) // 4`."""
    offset = steady.repeats_offset(rank)
    count = f"microbatches - {offset}" if offset else "microbatches"
    return count if steady.stride == 1 else f"({count}) // {steady.stride}"


def order_text(problem: Problem, orders: list[Order], steady: SteadyForm | None = None) -> list[str]:
    """`order { if rank == 0 { ... } elif ... }` with repeated groups folded; with `steady`, each rank's block
    repeated as often as the micro-batch count asks."""
    lines = ["order {"]
    for r, order in enumerate(orders):
        lines.append(f"    {'if' if r == 0 else 'elif'} rank == {r} {{")
        if steady is None:
            lines += _job_lines(problem, [(t, s) for t, s, _ in order], 8)
        else:
            part = steady.ranks[r]
            lines += _job_lines(problem, list(part.warmup), 8)
            lines.append(f"        repeat {_repeats_expression(steady, r)} {{")
            lines += _job_lines(problem, list(part.block), 12)
            lines.append("        }")
            lines += _job_lines(problem, _cooldown_with_reductions(problem, part), 8)
        lines.append("    }")
    lines.append("    optimizer")
    lines.append("}")
    return lines


def _cooldown_with_reductions(problem: Problem, part: RankSteady) -> list[tuple[int, int]]:
    """A rank's cool-down with each of its stages' `reduce_grads` after the stage's last gradient job there, or
    first when that job is in the block's last repetition (the earliest point the repeated form can say: later
    than the search timed it where the block goes on after that job; the driver then writes the fixed form)."""
    cooldown = list(part.cooldown)
    reduce = problem.reduce_type
    if reduce is None:
        return cooldown
    stages = {s for _, s in part.block}
    last = last_gradients(cooldown)
    in_block = last_gradients(part.block)
    out = [(reduce, s) for s in sorted(stages - set(last), key=in_block.__getitem__)]
    for i, token in enumerate(cooldown):
        out.append(token)
        out += [(reduce, s) for s, at in last.items() if at == i]
    return out


def _periodic_reductions(problem: Problem, rounds: list[tuple[int, tuple[int, int]]]) -> dict[int, str]:
    """round index -> the `reduce_grads` statement to write after it, guarded to the last period that runs the
    stage's last gradient job (the one whose delay, then place in the period, is the greatest)."""
    reduce = problem.reduce_type
    if reduce is None:
        return {}
    last: dict[int, tuple[int, int]] = {}
    for i, (d, (t, s)) in enumerate(rounds):
        if t in GRADIENTS and (d, i) > last.get(s, (-1, -1)):
            last[s] = (d, i)
    out = {}
    for s, (d, i) in last.items():
        period = "microbatches - 1" if d == 0 else "microbatches" if d == 1 else f"microbatches + {d - 1}"
        out[i] = f"if n == {period} {{ {_statement(problem, reduce, s)} }}"
    return out


def periodic_text(problem: Problem, block: Block) -> list[str]:
    """`order { if rank == 0 { for n in 0 .. microbatches + d { ... } } ... }`: the block, period by period."""
    lines = ["order {"]
    for r in range(problem.pp):
        rounds = block.rounds(problem.rank_of, r)
        delay = max(d for d, _ in rounds)
        lines.append(f"    {'if' if r == 0 else 'elif'} rank == {r} {{")
        end = "microbatches" + (f" + {delay}" if delay else "")
        lines.append(f"        for n in 0 .. {end} {{")
        reductions = _periodic_reductions(problem, rounds)
        for i, (d, (t, s)) in enumerate(rounds):
            if d == 0:
                lines.append(f"            if n < microbatches {{ {_statement(problem, t, s, 'n')} }}")
            else:
                job = _statement(problem, t, s, f"n - {d}")
                lines.append(f"            if n >= {d} and n - {d} < microbatches {{ {job} }}")
            if i in reductions:
                lines.append(f"            {reductions[i]}")
        lines.append("        }")
        lines.append("    }")
    lines.append("    optimizer")
    lines.append("}")
    return lines


def table_text(problem: Problem, orders: list[Order]) -> list[str]:
    lines = ["table {"]
    for r, order in enumerate(orders):
        cells = []
        for t, s, mb in order:
            name = type_name(problem, t)  # (a collective has no letter: its cell is its name, `reduce_grads0`)
            cell = f"{LETTERS.get(t) or letter_of(name) or name}{mb}"
            cells.append(cell if problem.vpp == 1 else f"{cell}.c{problem.chunk_of[s]}")
        cells.append(NAMES[OPTIMIZER])
        head = f"    rank {r}:"
        lines.extend(textwrap.wrap(" ".join(cells), WIDTH, initial_indent=head + " ", subsequent_indent=" " * 8))
    lines.append("}")
    return lines


def sizes_required(problem: Problem, block: Block | None, steady: SteadyForm | None, proven_up_to: int) -> str:
    """The file's `require` of the sizes it holds for: pp and vpp always; the micro-batch count it was found for,
    any (a periodic block), or the counts its steady state was proven at (`steady`, up to `proven_up_to`)."""
    sizes = f"pp == {problem.pp} and vpp == {problem.vpp}"
    m, where = problem.microbatches, f"pp={problem.pp}, vpp={problem.vpp}"
    if block is not None:
        return (
            f'require {sizes} : "synthesized for {where} (any number of micro-batches); '
            'run `ppdsl synth` for other sizes"'
        )
    if steady is None:
        return (
            f"require {sizes} and microbatches == {m} : "
            f'"synthesized for {where}, microbatches={m}; run `ppdsl synth` for other sizes"'
        )
    counts = f"microbatches >= {m} and microbatches <= {proven_up_to}"
    steps = ""
    if steady.stride > 1:
        counts += f" and (microbatches - {m}) % {steady.stride} == 0"
        steps = f" in steps of {steady.stride}"
    return (
        f"require {sizes} and {counts} : "
        f'"synthesized for {where} and proven for microbatches from {m} to {proven_up_to}{steps}; '
        'run `ppdsl synth` for other sizes"'
    )


def sched_text(
    problem: Problem,
    orders: list[Order],
    header: Header,
    block: Block | None = None,
    steady: SteadyForm | None = None,
    proven_up_to: int = 0,
) -> str:
    """The file; with `block`, the periodic form, which holds for any number of micro-batches; with `steady`, the
    orders' steady state, which holds at every count its `require` admits (`proven_up_to` the largest)."""
    orders = with_reductions(problem, orders)  # (the search's orders are compute jobs: each chunk's reduction too)
    used = {t for order in orders for t, _, _ in order}
    costs_in_file = costs_fit_in_file(problem)

    def paragraph(lines: list[str]) -> list[str]:
        return textwrap.wrap(" ".join(lines), WIDTH, break_on_hyphens=False)

    doc = [
        f"Synthesized by `ppdsl synth` for pp={problem.pp}, microbatches={problem.microbatches}, vpp={problem.vpp}.",
        "",
        *paragraph(header.inputs),
        "",
        *paragraph(header.result),
        "",
        *paragraph(header.found_by),
        "",
        f"Regenerate: {header.command}",
        f"Check:      {header.check}",
    ]
    doc = [docstring_line(line) for line in doc]
    lines = ['"""' + doc[0], *doc[1:], '"""', f'schedule "{header.name}"', ""]
    lines.append(sizes_required(problem, block, steady, proven_up_to))
    lines.append("")
    lines += declarations(problem, used, costs_in_file)
    if block is not None:
        lines += periodic_text(problem, block)
    elif in_order(orders):
        lines += order_text(problem, orders, steady)
    else:
        lines += table_text(problem, orders)
    return format_text("\n".join(lines) + "\n")  # the canonical layout, as `ppdsl fmt` would leave it
