"""Pictures: a schedule's timeline (Gantt chart + in-flight activations) and a size sweep, with matplotlib.

matplotlib is imported inside the functions, with the Agg backend, so `ppdsl check` and friends never pay for
it. The timeline takes job records from either source, a simulation (`Simulation.jobs()`) or a measured profile
(`ppdsl.reports.trace.read_trace`), so the two pictures of one schedule look alike.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ppdsl.analysis.execution import bubble_ratio
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import memory_curve
from ppdsl.analysis.records import JobRecord
from ppdsl.plan.kinds import KINDS, USER_COLOURS, Memory, copies, is_collective, memory_of, per_step

# One colour per built-in job type (`ppdsl show`'s hues); a schedule's own job types get greys.
PALETTE = KINDS  # a built-in kind's colour is its row's (`Kind.colour`)
COPY_LANE = 0.3  # of a rank's row: where its copies (offload / reload) run, beside its compute above them
COLLECTIVE_LANE = 0.3  # of a rank's row: its collective stream (reduce_grads, sync_shared), beside its compute


def beside(job_type: str) -> bool:
    """Does a job of this kind run beside the rank's compute (a copy, a collective), in a lane of its own?"""
    return copies(job_type) or is_collective(job_type)


IDLE_HATCH = "////"


@dataclass
class Timeline:
    """What one timeline picture shows: the jobs, the per-rank memory curves and the words around them."""

    jobs: Sequence[JobRecord]
    ranks: int
    vpp: int
    title: str
    time_label: str
    memory: list[list[tuple[float, float]]]  # [rank] -> (time, in-flight activations) steps
    memory_limit: list[float | None]
    memory_label: str = "in-flight\nactivations"  # the memory axis: units, or bytes scaled to KiB / MiB


def colour_of(job_type: str, order: Sequence[str]) -> str:
    """A job type's colour: the palette's, else a grey picked by its place among the auxiliary types."""
    if job_type in PALETTE:
        return PALETTE[job_type].colour
    aux = [t for t in order if t not in PALETTE]
    return USER_COLOURS[aux.index(job_type) % len(USER_COLOURS)] if job_type in aux else USER_COLOURS[0]


def _shade(colour: str, chunk: int, vpp: int) -> tuple[float, float, float]:
    """Later chunks lighter: mixed with white, up to 45% for the last chunk."""
    from matplotlib.colors import to_rgb

    rgb = to_rgb(colour)
    mix = 0.45 * chunk / (vpp - 1) if vpp > 1 else 0.0
    return tuple(c + (1.0 - c) * mix for c in rgb)  # type: ignore[return-value]


def _luminance(rgb: tuple[float, float, float]) -> float:
    r, g, b = rgb
    return 0.299 * r + 0.587 * g + 0.114 * b


def memory_timelines(jobs: Sequence[JobRecord], exp: Expansion, ranks: int) -> list[list[tuple[float, float]]]:
    """Per rank, in-flight activations after each job ends (the simulator's accounting: a forward allocates,
    a backward frees, in the schedule's `memory` units), from job records of either source."""
    index = {name: t for t, name in enumerate(exp.type_names)}
    per_rank: list[list[JobRecord]] = [[] for _ in range(ranks)]
    for job in jobs:
        per_rank[job.rank].append(job)
    out = []
    for r, rows in enumerate(per_rank):
        rows.sort(key=lambda j: (j.step, j.start))
        # a job the schedule does not know (or a rank it does not have) allocates nothing we can account for
        known = [
            (index[j.type], j.chunk, j.microbatch, j.start, j.end)
            for j in rows
            if j.type in index and 0 <= j.chunk < exp.vpp
        ]
        out.append(memory_curve(exp, r, known) if r < exp.pp else [(0.0, 0.0)])
    return out


def _span(jobs: Sequence[JobRecord]) -> tuple[float, float]:
    if not jobs:
        return 0.0, 0.0
    return min(j.start for j in jobs), max(j.end for j in jobs)


def summary(jobs: Sequence[JobRecord], ranks: int) -> tuple[float, float]:
    """(makespan, bubble ratio) of job records: idle is what each rank does not spend in its jobs, measured as the
    simulator measures it (recomputes are neither work nor bubble: `execution.bubble_ratio`)."""
    lo, hi = _span(jobs)
    makespan = hi - lo
    if makespan <= 0 or ranks == 0:
        return makespan, 0.0
    busy = sum(j.end - j.start for j in jobs if not beside(j.type))  # copies and collectives run beside the compute
    recompute = sum(j.end - j.start for j in jobs if memory_of(j.type) is Memory.REBUILDS)
    return makespan, bubble_ratio(ranks * makespan - busy, recompute, ranks * makespan)


def plot_timeline(timeline: Timeline, path: str | Path | BinaryIO, dpi: int = 100, fmt: str | None = None) -> None:
    """Write the Gantt chart (ranks as rows) above the in-flight activations per rank. `fmt`: png, svg or pdf
    (default: the path's suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    jobs, ranks = timeline.jobs, timeline.ranks
    lo, hi = _span(jobs)
    # Wide enough that a typical job gets about 16 pixels at 100 dpi (room for its micro-batch number), within
    # what a screen or a page can show.
    durations = sorted(j.end - j.start for j in jobs if j.end > j.start)
    typical = durations[len(durations) // 2] if durations else 1.0
    width = min(24.0, max(12.0, 2.5 + 0.16 * (hi - lo) / typical))
    gantt_h = min(14.0, max(1.6, 0.42 * ranks + 0.6))  # 64 ranks still fit a page
    fig, (ax, mem_ax) = plt.subplots(
        2,
        1,
        figsize=(width, gantt_h + 2.6),
        sharex=True,
        gridspec_kw={"height_ratios": [gantt_h, 2.0], "hspace": 0.12},
        layout="constrained",
    )
    order = sorted(
        {j.type for j in jobs}, key=lambda t: (t not in PALETTE, list(PALETTE).index(t) if t in PALETTE else t)
    )
    lanes = _Lanes(any(copies(j.type) for j in jobs), any(is_collective(j.type) for j in jobs))
    boxes = _draw_gantt(ax, timeline, order, lanes, lo, hi)
    _draw_in_flight(fig, mem_ax, timeline, hi)
    # Sizes in pixels need the final layout: box outlines only while they do not swamp the colours, and
    # micro-batch numbers only in boxes wider than their digits.
    fig.canvas.draw()
    x_px = ax.transData.transform((hi, 0))[0] - ax.transData.transform((lo, 0))[0]
    px_per_unit = x_px / (hi - lo) if hi > lo else 0.0
    for collection in boxes:
        collection.set_linewidth(0.6 if typical * px_per_unit >= 6 else 0.0)
    _label_micro_batches(fig, ax, timeline, order, lanes, px_per_unit)
    fig.savefig(path, dpi=dpi, format=fmt)
    plt.close(fig)


class _Lanes:
    """Where a rank's jobs go in its row: compute on top, and beneath it a lane per stream that runs beside it (they
    overlap in time): the collective stream, then the copy stream."""

    row_h = 0.8

    def __init__(self, with_copies: bool, with_collectives: bool = False) -> None:
        self.copy_h = self.row_h * COPY_LANE if with_copies else 0.0
        self.collective_h = self.row_h * COLLECTIVE_LANE if with_collectives else 0.0
        self.compute_h = self.row_h - self.copy_h - self.collective_h

    def lane(self, r: int, job_type: str) -> tuple[float, float]:
        """(bottom, height) of a job of `job_type` on rank `r`."""
        if copies(job_type):
            return (r + self.row_h / 2 - self.copy_h, self.copy_h)
        if is_collective(job_type):
            return (r + self.row_h / 2 - self.copy_h - self.collective_h, self.collective_h)
        return (r - self.row_h / 2, self.compute_h)


def _draw_gantt(ax, timeline: Timeline, order: list[str], lanes: _Lanes, lo: float, hi: float) -> list:
    """Each rank's row, idle time hatched beneath its job boxes, with the legend of job types; the box
    collections (their outlines are set once the layout is known)."""
    from matplotlib.patches import Patch

    jobs, ranks, row_h = timeline.jobs, timeline.ranks, lanes.row_h
    # Idle time: each rank's row hatched from the first start to the last end; the jobs cover the busy part.
    for r in range(ranks):
        ax.broken_barh(
            [(lo, hi - lo)],
            (r - row_h / 2, row_h),
            facecolors="white",
            edgecolors="#c8c8c8",
            hatch=IDLE_HATCH,
            linewidth=0.0,
            zorder=1,
        )

    # Job boxes: one collection per (type, chunk, rank) keeps 10^5 jobs fast.
    groups: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
    for job in jobs:
        if job.end > job.start:
            groups.setdefault((job.type, job.chunk, job.rank), []).append((job.start, job.end - job.start))
    boxes = []
    for (job_type, chunk, r), bars in groups.items():
        face = _shade(colour_of(job_type, order), chunk, timeline.vpp)
        boxes.append(ax.broken_barh(bars, lanes.lane(r, job_type), facecolors=[face], edgecolors="white", zorder=2))

    ax.set_ylim(ranks - 0.5, -0.5)  # rank 0 on top, as in the papers' figures
    step = max(1, ranks // 16)
    ax.set_yticks(range(0, ranks, step), [f"rank {r}" for r in range(0, ranks, step)])
    ax.set_xlim(lo, hi if hi > lo else lo + 1)
    ax.set_title(timeline.title, loc="left", fontsize=11)
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    drawn = {t for t, _, _ in groups}  # zero-cost jobs (an optimizer of cost 0) have no box to explain
    handles = [Patch(facecolor=colour_of(t, order), label=t) for t in order if t in drawn]
    handles.append(Patch(facecolor="white", edgecolor="#9a9a9a", hatch=IDLE_HATCH, label="idle"))
    if timeline.vpp > 1:
        light = _shade(PALETTE["forward"].colour, timeline.vpp - 1, timeline.vpp)
        handles.append(Patch(facecolor=light, label=f"lighter: later chunk (of {timeline.vpp})"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, frameon=False)
    return boxes


def _draw_in_flight(fig, mem_ax, timeline: Timeline, hi: float) -> None:
    """In-flight activations: one step curve per rank, coloured along a sequential map from rank 0 to the last,
    with each rank's memory limit dotted."""
    import matplotlib.pyplot as plt

    ranks = timeline.ranks
    cmap = plt.get_cmap("viridis")
    limits_drawn = set()
    for r, points in enumerate(timeline.memory):
        if not points:
            continue
        xs = [p[0] for p in points] + [hi]
        ys = [p[1] for p in points] + [points[-1][1]]
        colour = cmap(r / max(1, ranks - 1) * 0.9)
        mem_ax.step(xs, ys, where="post", color=colour, linewidth=1.2, label=f"rank {r}")
        limit = timeline.memory_limit[r] if r < len(timeline.memory_limit) else None
        if limit is not None and limit not in limits_drawn:
            limits_drawn.add(limit)
            mem_ax.axhline(limit, color=colour, linestyle=":", linewidth=0.9)
    mem_ax.set_ylabel(timeline.memory_label)
    mem_ax.set_xlabel(timeline.time_label)
    mem_ax.set_ylim(bottom=0)
    mem_ax.grid(axis="y", color="#e6e6e6", linewidth=0.6)
    for side in ("top", "right"):
        mem_ax.spines[side].set_visible(False)
    if ranks <= 16:
        mem_ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=7, frameon=False, ncol=1 + ranks // 9)
    else:
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        sm = ScalarMappable(norm=Normalize(0, (ranks - 1) / 0.9), cmap=cmap)
        fig.colorbar(sm, ax=mem_ax, label="rank", fraction=0.02, pad=0.01)


def _label_micro_batches(fig, ax, timeline: Timeline, order: list[str], lanes: _Lanes, px_per_unit: float) -> None:
    """Micro-batch numbers in the boxes wide enough for their digits, once the layout gives sizes in pixels."""
    jobs, ranks = timeline.jobs, timeline.ranks
    font = 6.5 if ranks <= 16 else 5.5
    digit_px = font * 0.62 * fig.dpi / 72.0
    row_px = abs(ax.transData.transform((0, lanes.compute_h))[1] - ax.transData.transform((0, 0))[1])  # y runs down
    # Numbers per job type, all or none: a type whose widest number does not fit its typical box gets none, so
    # that a row never shows micro-batches 0 to 9 and then stops.
    by_type: dict[str, list[JobRecord]] = {}
    for job in jobs:
        if job.end > job.start and not per_step(job.type) and not beside(job.type):  # a thin lane: no numbers
            by_type.setdefault(job.type, []).append(job)
    labelled = set()
    for job_type, rows in by_type.items():
        widths = sorted(j.end - j.start for j in rows)
        digits = max(len(str(j.microbatch)) for j in rows)
        if widths[len(widths) // 2] * px_per_unit >= digit_px * digits + 2:
            labelled.add(job_type)
    if row_px < font * 1.3 * fig.dpi / 72.0:
        return
    for job in jobs:
        if job.type not in labelled:
            continue
        text = str(job.microbatch)
        if (job.end - job.start) * px_per_unit < digit_px * len(text) + 2:
            continue
        rgb = _shade(colour_of(job.type, order), job.chunk, timeline.vpp)
        ax.text(
            (job.start + job.end) / 2,
            job.rank - lanes.row_h / 2 + lanes.compute_h / 2,
            text,
            ha="center",
            va="center",
            fontsize=font,
            color="white" if _luminance(rgb) < 0.55 else "black",
            zorder=3,
            clip_on=True,
        )


def plot_sweep(
    rows: Sequence[dict[str, Any]], title: str, path: str | Path | BinaryIO, dpi: int = 100, fmt: str | None = None
) -> None:
    """Bubble ratio and peak in-flight activations against micro-batches, one line per pipeline degree."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [row for row in rows if row.get("status") == "ok"]
    fig, (bubble_ax, mem_ax) = plt.subplots(1, 2, figsize=(12, 4.4), layout="constrained")
    pps = sorted({row["pp"] for row in ok})
    # distinct hues while there are few lines; a sequential map once there are too many to tell apart
    few = len(pps) <= 10
    cmap = plt.get_cmap("tab10" if few else "viridis")
    for i, pp in enumerate(pps):
        series = sorted(((row["microbatches"], row) for row in ok if row["pp"] == pp), key=lambda x: x[0])
        xs = [m for m, _ in series]
        colour = cmap(i) if few else cmap(i / max(1, len(pps) - 1) * 0.9)
        bubble_ax.plot(xs, [row["bubble_ratio"] * 100 for _, row in series], "o-", color=colour, label=f"pp={pp}")
        mem_ax.plot(xs, [row["peak_activations"] for _, row in series], "o-", color=colour, label=f"pp={pp}")
    ms = sorted({row["microbatches"] for row in ok})
    doubling = len(ms) > 2 and all(b == 2 * a for a, b in itertools.pairwise(ms))
    for ax in (bubble_ax, mem_ax):
        if doubling:
            ax.set_xscale("log", base=2)
        if ms:
            ax.set_xticks(ms, [str(m) for m in ms])
        ax.set_xlabel("micro-batches")
        ax.grid(color="#e6e6e6", linewidth=0.6)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if pps:
            ax.legend(fontsize=8, frameon=False)
    bubble_ax.set_ylabel("bubble (% of makespan x ranks)")
    bubble_ax.set_ylim(bottom=0)
    mem_ax.set_ylabel("peak in-flight activations (max over ranks)")
    mem_ax.set_ylim(bottom=0)
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    fig.savefig(path, dpi=dpi, format=fmt)
    plt.close(fig)
