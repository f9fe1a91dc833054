"""The rank x step grid: a schedule as people draw it, one row per rank, one column per step.

`text_grid` with `columns` fits a terminal of that width: long job names are abbreviated (`recv_forward5.c1` ->
`rf5.c1`, with a legend), and the steps wrap into blocks that each fit; with `marks` (the stuck steps of a
deadlock), only a window around them is drawn.
"""

from __future__ import annotations

import re

from ppdsl.analysis.expansion import Expansion

MAX_COLUMNS = 16
ROW_HEAD = 8  # "rank 10 " and "step    "
MIN_COLUMNS = 40


def abbreviations(exp: Expansion) -> dict[str, str]:
    """Type name -> a short form for every type whose labels spell its whole name (`recv_forward` -> `rf`): its
    words' initials, unique among the schedule's types (a type whose initials would clash keeps its name)."""
    long = [
        name
        for name, jt in zip(exp.type_names, exp.defn.job_types, strict=True)
        if jt.per_chunk and len(name) > 3 and jt.label(0, 0, 1).startswith(name)
    ]
    short = {name: "".join(w[0] for w in re.split(r"[_\W]+", name) if w) for name in long}
    taken = {jt.label(0, 0, 1).rstrip("0") for jt in exp.defn.job_types if jt.name not in short} | {"opt"}
    counts: dict[str, int] = {}
    for s in short.values():
        counts[s] = counts.get(s, 0) + 1
    return {n: s for n, s in short.items() if len(s) < len(n) and counts[s] == 1 and s not in taken}


def grid_label(exp: Expansion, code: int, short: dict[str, str]) -> str:
    """A job's label in the grid: `opt` for the optimizer, a long type name abbreviated as `short` says."""
    label = exp.label(code)
    if label == "optimizer":  # the optimizer's own short form in the grid (its label is its name)
        return "opt"
    name = exp.type_names[exp.decode(code)[0]]
    return short[name] + label[len(name) :] if name in short and label.startswith(name) else label


def legend(exp: Expansion, short: dict[str, str]) -> str:
    """`rf = recv_forward, sb = send_backward` for the abbreviations the grid used; "" for none."""
    return ", ".join(f"{s} = {n}" for n, s in short.items())


def text_grid(
    exp: Expansion,
    marks: dict[int, int] | None = None,
    width: int = MAX_COLUMNS,
    start: int | None = None,
    columns: int | None = None,
) -> str:
    """Plain-text grid. Without `columns`: `width` steps from step `start` (0 by default), or with `marks`
    (rank -> step) a window around the marked steps, marking each. With `columns`: everything fits that many
    characters a line (see the module text); `width` still caps the steps of a block."""
    marks = marks or {}
    longest = max((len(j) for j in exp.jobs), default=0)
    short = abbreviations(exp) if columns is not None else {}
    if columns is None:
        if start is not None:
            lo = start
        elif marks:
            lo = max(0, min(marks.values()) - width // 2)
        else:
            lo = 0
        return _block(exp, marks, lo, min(longest, lo + width), longest, short)
    labels = [grid_label(exp, code, short) for jobs in exp.jobs for code in jobs]
    marked = [grid_label(exp, exp.jobs[r][s], short) for r, s in marks.items() if 0 <= s < len(exp.jobs[r])]
    cell = max([len(x) + 2 for x in labels] + [len(x) + 3 for x in marked] + [len(str(longest)) + 2, 4])
    per_block = max(1, min(width, (max(columns, MIN_COLUMNS) - ROW_HEAD - len(" ...")) // cell))
    if marks:
        first, last = min(marks.values()), max(marks.values())
        if last - first + 1 <= per_block:  # one block, the marks in its middle
            lo = max(0, min(first - (per_block - (last - first + 1)) // 2, longest - per_block))
            ranges_ = [(lo, min(longest, lo + per_block))]
        else:
            ranges_ = [(lo, min(last + 1, lo + per_block)) for lo in range(first, last + 1, per_block)]
    else:
        begin = start or 0
        ranges_ = [(lo, min(longest, lo + per_block)) for lo in range(begin, max(longest, begin + 1), per_block)]
    blocks = [_block(exp, marks, lo, hi, longest, short, cell) for lo, hi in ranges_]
    text = "\n\n".join(blocks)
    used = {n: s for n, s in short.items() if any(label.startswith(s) for label in labels)}
    return text + (f"\n{legend(exp, used)}" if used else "")


def _block(
    exp: Expansion,
    marks: dict[int, int],
    lo: int,
    hi: int,
    longest: int,
    short: dict[str, str],
    cell: int | None = None,
) -> str:
    labels = [[grid_label(exp, code, short) for code in jobs[lo:hi]] for jobs in exp.jobs]
    if cell is None:
        cell = max([len(x) for row in labels for x in row] + [len(str(hi)), 2]) + 2
    head = "step".ljust(ROW_HEAD) + "".join(str(s).center(cell) for s in range(lo, hi))
    lines = [head.rstrip() + (" ..." if hi < longest else "")]
    for r, row in enumerate(labels):
        cells = []
        for i, label in enumerate(row):
            step = lo + i
            cells.append((f">{label}<" if marks.get(r) == step else label).center(cell))
        lines.append((f"rank {r}".ljust(ROW_HEAD) + "".join(cells)).rstrip())
    return "\n".join(lines)
