"""The Pareto frontier of makespan against memory (`ppdsl frontier`): what each unit of memory buys.

Over a ladder of per-rank limits, from one micro-batch's activations on a rank (the least an order alone can
hold) to 1F1B's peak, `ppdsl synth` is run with the order alone and with memory actions; each library schedule
is an anchor at its own peak. Every figure is a checked schedule's makespan (synth checks what it writes; the
anchors are measured by `compare`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_files
from ppdsl.reports.compare import compare
from ppdsl.synth import SynthRequest, build, synthesize_file
from ppdsl.synth.actions import ACTION_NAMES

ONE_F_ONE_B = "1F1B"


@dataclass
class FrontierPoint:
    limit: float
    order_only: float | None  # synth's makespan with the order alone (None: no order fits)
    with_actions: float | None  # with memory actions (None: nothing fits)
    actions: str = ""  # what the schedule with actions does (synth's origin)


@dataclass
class Anchor:
    name: str
    makespan: float
    peak: float


@dataclass
class Frontier:
    pp: int
    microbatches: int
    vpp: int
    points: list[FrontierPoint] = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)
    unit: str = "activations"

    def best_anchor(self, limit: float) -> Anchor | None:
        """The fastest anchor whose peak fits `limit`."""
        fits = [a for a in self.anchors if a.peak <= limit + 1e-9]
        return min(fits, key=lambda a: (a.makespan, a.peak)) if fits else None


def ladder(low: float, high: float, steps: int) -> list[float]:
    """`steps` limits from `low` to `high`, evenly spaced (rounded to 1/1000 so they read well)."""
    if steps <= 1 or high <= low:
        return [low]
    return [round(low + (high - low) * k / (steps - 1), 3) for k in range(steps)]


def anchors(base: Scenario, files: Sequence[str | Path] | None = None) -> list[Anchor]:
    rows = compare(list(files) if files is not None else library_files(), base, skip_broken=True)
    return [
        Anchor(r.schedule, r.makespan, r.peak_activations)
        for r in rows
        if r.status == "ok" and r.makespan is not None and r.peak_activations is not None
    ]


def frontier(
    pp: int,
    microbatches: int,
    vpp: int = 1,
    costs: CostSpec | None = None,
    actions: Sequence[str] = ACTION_NAMES,
    steps: int = 6,
    time_limit: float = 2.0,
    limits: Sequence[float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Frontier:
    """Synth with and without `actions` at each limit of the ladder, and the library's anchors."""
    base = Scenario("", pp, microbatches, vpp, None, costs)
    out = Frontier(pp, microbatches, vpp, anchors=anchors(base))
    if limits is None:
        low = max(build(SynthRequest(pp=pp, microbatches=microbatches, vpp=vpp, costs=costs)).minimum_memory())
        top = next((a.peak for a in out.anchors if a.name == ONE_F_ONE_B), None)
        top = top if top is not None else max((a.peak for a in out.anchors), default=low)
        limits = ladder(low, top, steps)
    # monotone by construction: a schedule found under a limit fits every looser one, so a point is never slower
    # than a tighter point (the limits in rising order; `tighter` holds the best so far of each curve)
    tighter: dict[str, tuple[float, str, float] | None] = {"order": None, "actions": None}
    for limit in sorted(limits):
        point = FrontierPoint(limit, None, None)
        for acts in ((), tuple(actions)):
            request = SynthRequest(
                pp=pp,
                microbatches=microbatches,
                vpp=vpp,
                costs=costs,
                memory_limit=limit,
                time_limit=time_limit,
                memory_actions=acts,
            )
            try:
                found = synthesize_file(request)
            except DiagnosticError as err:  # no schedule fits this limit (S114); any other problem is the input's
                if any(d.code != "S114" for d in err.diagnostics):
                    raise
                continue
            if acts:
                point.with_actions, point.actions = found.result.makespan, found.result.origin
            else:
                point.order_only = found.result.makespan
        if point.with_actions is None or (point.order_only is not None and point.order_only < point.with_actions):
            point.with_actions = point.order_only  # (actions are a choice: never worse than the order alone)
        point.order_only, _ = _no_slower(tighter, "order", limit, point.order_only, "")
        point.with_actions, point.actions = _no_slower(tighter, "actions", limit, point.with_actions, point.actions)
        out.points.append(point)
        if progress is not None:
            progress(f"limit {limit:g}: order {point.order_only}, with actions {point.with_actions}")
    return out


def _no_slower(
    tighter: dict[str, tuple[float, str, float] | None], curve: str, limit: float, makespan: float | None, how: str
) -> tuple[float | None, str]:
    """`makespan` at `limit` (and what found it), or the curve's best at a tighter limit where that is faster: its
    schedule fits this limit too. Keeps the point's own as the curve's best when it is the faster."""
    best = tighter[curve]
    if best is not None and (makespan is None or best[0] < makespan - 1e-9):
        return best[0], (f"{best[1]} (found at limit {best[2]:g}, which it fits)" if best[1] else "")
    if makespan is not None:
        tighter[curve] = (makespan, how, limit)
    return makespan, how


def draw_frontier(fr: Frontier, path: str | Path | BinaryIO, fmt: str | None = None) -> None:
    """Makespan against memory limit: synth's two curves as steps, the anchors as labelled points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [p.limit for p in fr.points]
    for label, values, style in (
        ("synth, order only", [p.order_only for p in fr.points], "o-"),
        ("synth with memory actions", [p.with_actions for p in fr.points], "s-"),
    ):
        pts = [(x, y) for x, y in zip(xs, values, strict=True) if y is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), style, label=label, drawstyle="steps-post")
    for a in fr.anchors:
        ax.plot([a.peak], [a.makespan], "k^", markersize=5)
        ax.annotate(a.name, (a.peak, a.makespan), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(f"memory limit per rank ({fr.unit})")
    ax.set_ylabel("makespan")
    ax.set_title(f"makespan against memory, pp={fr.pp} m={fr.microbatches} vpp={fr.vpp}")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120, format=fmt)
    plt.close(fig)
