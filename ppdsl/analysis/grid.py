"""The rank x step grid: a schedule as people draw it, one row per rank, one column per step."""

from __future__ import annotations

from ppdsl.analysis.expansion import Expansion

MAX_COLUMNS = 16


def text_grid(
    exp: Expansion, marks: dict[int, int] | None = None, width: int = MAX_COLUMNS, start: int | None = None
) -> str:
    """Plain-text grid of `width` steps. With `marks` (rank -> step), a window around the marked steps, marking
    each; else from step `start` (0 by default)."""
    marks = marks or {}
    longest = max((len(j) for j in exp.jobs), default=0)
    if start is not None:
        lo = start
    elif marks:
        lo = max(0, min(marks.values()) - width // 2)
    else:
        lo = 0
    hi = min(longest, lo + width)
    labels = [[_short(exp.label(code)) for code in jobs[lo:hi]] for jobs in exp.jobs]
    cell = max([len(x) for row in labels for x in row] + [len(str(hi)), 2]) + 2
    head = "step".ljust(8) + "".join(str(s).center(cell) for s in range(lo, hi))
    lines = [head + (" ..." if hi < longest else "")]
    for r, row in enumerate(labels):
        cells = []
        for i, label in enumerate(row):
            step = lo + i
            cells.append((f">{label}<" if marks.get(r) == step else label).center(cell))
        lines.append(f"rank {r}".ljust(8) + "".join(cells))
    return "\n".join(lines)


def _short(label: str) -> str:
    return "opt" if label == "optimizer" else label
