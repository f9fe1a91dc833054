"""`ppdsl synth --memory-actions recompute,offload` against the best anchor that fits, over a ladder of limits.

    python benchmarks/bench_memory_synth.py [--zb-repo PATH] [--time-limit S] [--pp 4 8] [--steps N]

Grid: pp 4 and 8, microbatches 2pp; F:B:W 1:1:1 (latency 0) and 1:1.5:0.7 (latency 0.1); a recompute costs a
forward, a copy (offload or reload) half a forward; a recomputed forward keeps 0.1 of its activations (the
library's `stage_input`). Shapes: one chunk (looped), two chunks in a V, two chunks looped. At each limit of a
ladder from one micro-batch's activations on a rank to 1F1B's peak (in the shape's units, as `ppdsl check` counts
them), synth with both actions runs at that limit; the anchors, each measured by the checker at its own peak:
every library schedule of the shape, with 1f1b_selective at every k (`recomputed`), 1f1b_recompute and
interleaved1f1b_offload (`offloaded` 1 and 2); with `--zb-repo` the zero-bubble authors' V-Min and V-Half
(`zbv_greedy.py`). The table gives, per (cell, limit), synth's makespan, the best anchor that fits and the gain
(anchor / synth - 1); the median gain over all limits and over those where the best anchor recomputes or
offloads. The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import zero_bubble_reference as zbr  # noqa: E402

from ppdsl.analysis.check import check  # noqa: E402
from ppdsl.analysis.costs import CostSpec  # noqa: E402
from ppdsl.analysis.scenario import Scenario  # noqa: E402
from ppdsl.common.diagnostics import DiagnosticError  # noqa: E402
from ppdsl.language.jobtypes import BACKWARD_B, BACKWARD_W, FORWARD  # noqa: E402
from ppdsl.language.library import library_files  # noqa: E402
from ppdsl.synth import SynthRequest, build, synthesize_file  # noqa: E402
from ppdsl.synth.problem import build_problem  # noqa: E402
from ppdsl.synth.schedule import Evaluator, complete  # noqa: E402

EPS = 1e-6
PROFILES = {
    "F:B:W 1:1:1": ({"forward": 1.0, "backward": 2.0, "backward_b": 1.0, "backward_w": 1.0}, 0.0),
    "F:B:W 1:1.5:0.7 lat 0.1": ({"forward": 1.0, "backward": 2.2, "backward_b": 1.5, "backward_w": 0.7}, 0.1),
}
SHAPES = [(1, "looped"), (2, "vshape"), (2, "looped")]
ACTION_WORDS = ("Recompute", "Selective", "Offload")  # anchors that recompute or offload


@dataclass
class Cell:
    profile: str
    pp: int
    m: int
    shape: str
    limit: float
    synth: float | None
    synth_actions: str
    anchor: str | None
    anchor_makespan: float | None
    anchor_peak: float | None
    seconds: float

    @property
    def gain(self) -> float | None:
        if self.synth is None or self.anchor_makespan is None:
            return None
        return self.anchor_makespan / self.synth - 1.0


def spec_of(profile: str, folder: Path) -> CostSpec:
    costs, latency = PROFILES[profile]
    path = folder / f"{abs(hash(profile))}.json"
    path.write_text(json.dumps({"unit": "s", "costs": costs, "latency": latency}))
    return CostSpec.read(None, path)


def library_anchors(pp: int, m: int, vpp: int, placement: str, spec: CostSpec):
    """(name, makespan, peak) of every library schedule of this shape, with the memory-action schedules at each
    setting of their parameter."""
    for path in library_files():
        settings: list[dict] = [{}]
        if path.stem == "1f1b_selective":
            settings = [{"recomputed": k} for k in range(1, pp)]
        elif path.stem == "interleaved1f1b_offload":
            settings = [{"offloaded": k} for k in range(1, vpp + 1)]
        for params in settings:
            try:
                scenario = Scenario(path, pp, m, vpp, params or None, costs=spec)
                if scenario.definition().placement_kind != placement:
                    break
                result = check(scenario)
            except DiagnosticError:
                continue
            if result.valid:
                label = result.defn.name + "".join(f" {k}={v}" for k, v in params.items())
                yield label, result.makespan, max(r.peak_activations for r in result.ranks)


def zero_bubble_anchors(repo, profile: str, pp: int, m: int, spec: CostSpec):
    """V-Min and V-Half (the zero-bubble authors' zbv_greedy), measured by ppdsl's checker engine."""
    costs, latency = PROFILES[profile]
    f, b, w = costs["forward"], costs["backward_b"], costs["backward_w"]
    problem = build_problem(pp, m, 2, "vshape", spec, split="yes")
    evaluator = Evaluator(problem)
    kinds = {"F": FORWARD, "B": BACKWARD_B, "W": BACKWARD_W}
    for variant, name in (("vmin", "V-Min"), ("vhalf", "V-Half")):
        try:
            theirs = zbr.v_auto(repo, pp, m, f, b, w, latency, variant)
        except (ValueError, AssertionError, TypeError, IndexError, KeyError):
            continue
        orders = [[(kinds[k], problem.stage_of(r, c), mb) for k, c, mb in rank] for r, rank in enumerate(theirs)]
        if complete(problem, orders):
            ev = evaluator.evaluate(orders)
            if ev.feasible:
                yield name, ev.makespan, max(ev.peaks)


def ladder(low: float, high: float, steps: int) -> list[float]:
    if high <= low or steps <= 1:
        return [low]
    return sorted({round(low + (high - low) * k / (steps - 1), 3) for k in range(steps)})


def run(args, folder: Path) -> list[Cell]:
    cells: list[Cell] = []
    for profile in PROFILES:
        spec = spec_of(profile, folder)
        for pp in args.pp:
            m = 2 * pp
            for vpp, placement in SHAPES:
                shape = "1 chunk" if vpp == 1 else f"{vpp} chunks, {'V' if placement == 'vshape' else 'looped'}"
                anchors = list(library_anchors(pp, m, vpp, placement, spec))
                if placement == "vshape" and zbr.available(args.zb_repo):
                    anchors += list(zero_bubble_anchors(args.zb_repo, profile, pp, m, spec))
                if not anchors:
                    continue
                probe = build(SynthRequest(pp, m, vpp, placement, spec))
                low = max(probe.minimum_memory())
                one_f_one_b = [peak for name, _, peak in anchors if name in ("1F1B", "Interleaved1F1B", "ZBV")]
                high = min(one_f_one_b) if one_f_one_b else max(peak for _, _, peak in anchors)
                for limit in ladder(low, high, args.steps):
                    fits = [a for a in anchors if a[2] <= limit + EPS]
                    best = min(fits, key=lambda a: (a[1], a[2])) if fits else None
                    request = SynthRequest(
                        pp, m, vpp, placement, spec, limit, time_limit=args.time_limit,
                        memory_actions=("recompute", "offload"),
                    )  # fmt: skip
                    t0 = time.perf_counter()
                    try:
                        outcome = synthesize_file(request)
                        makespan, how = outcome.result.makespan, outcome.result.origin
                    except DiagnosticError as err:
                        makespan, how = None, err.diagnostics[0].message
                    cell = Cell(
                        profile, pp, m, shape, limit, makespan, how,
                        best[0] if best else None, best[1] if best else None, best[2] if best else None,
                        time.perf_counter() - t0,
                    )  # fmt: skip
                    cells.append(cell)
                    gain = f"{cell.gain:+7.1%}" if cell.gain is not None else "      -"
                    print(
                        f"{profile:24s} pp={pp:<2d} m={m:<3d} {shape:17s} limit {limit:6.3g}  synth "
                        f"{makespan if makespan is not None else float('nan'):7.4g}  best anchor "
                        f"{(best[0] if best else '-'):30s} {best[1] if best else float('nan'):7.4g}  gain {gain}",
                        flush=True,
                    )
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zb-repo", default=os.environ.get("ZB_REPO"), help="clone of the zero-bubble repository")
    parser.add_argument("--time-limit", type=float, default=3.0, help="synth's --time-limit per limit")
    parser.add_argument("--pp", type=int, nargs="*", default=[4, 8], help="pipeline degrees (m = 2pp)")
    parser.add_argument("--steps", type=int, default=5, help="limits on each ladder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        cells = run(args, Path(folder))
    compared = [c for c in cells if c.gain is not None]
    needing = [c for c in compared if any(w in (c.anchor or "") for w in ACTION_WORDS)]
    losses = [c for c in compared if c.gain < -EPS]
    figures = {
        "cells": len(cells),
        "compared": len(compared),
        "median_gain": statistics.median(c.gain for c in compared) if compared else None,
        "median_gain_where_anchors_need_actions": statistics.median(c.gain for c in needing) if needing else None,
        "cells_where_anchors_need_actions": len(needing),
        "losses": len(losses),
        "worst": min((c.gain for c in compared), default=None),
        "no_anchor_fits": sum(1 for c in cells if c.anchor is None and c.synth is not None),
        "seconds": round(time.perf_counter() - t0, 1),
        "loss_cells": [asdict(c) for c in losses],
    }
    print(f"{len(compared)} limits with an anchor; median gain {figures['median_gain']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
