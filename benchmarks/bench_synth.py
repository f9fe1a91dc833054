"""`ppdsl synth` against every hand-written schedule and the zero-bubble authors' own searches, at equal memory.

    python benchmarks/bench_synth.py [--zb-repo PATH] [--time-limit S] [--quick]
        [--pp N ...] [--counts pp 2pp 3pp 4pp pp+1 2pp+1] [--references all|library|zero-bubble]

1. Pareto dominance. For pp in 2, 3, 4, 6, 8, microbatches in pp, 2pp, 3pp, 4pp and the odd pp + 1, 2pp + 1,
   three cost profiles (uniform F = I = W; I 1.5x and W 0.7x with link latency 0.1; the last stage 1.5x) and
   two shapes (one chunk, looped; two chunks in a V): every library schedule of that shape that runs at those
   sizes, and, with `--zb-repo`
   (a local clone of sail-sg/zero-bubble-pipeline-parallelism), the zero-bubble authors' automatic schedules
   (one chunk: zb.py's search at memory limits pp, 2pp, pp/2; V: v_auto_schedule's search at pp and 1.5pp,
   V-Min, V-Half, ZB-V). Each is measured by ppdsl's checker (makespan, peak activations); then `synth` runs
   with `--memory-limit` equal to that peak. The table says how often synth is strictly faster, as fast, or
   slower, and by how much.
2. Optimality: `synth --exact` at pp = 4, microbatches = 8, each cost profile, 1F1B's memory (4), with the
   time it took to prove (target: 120 s).
3. Speed: the heuristic (default settings) at pp = 16, microbatches = 64 (target 10 s) and pp = 64,
   microbatches = 512 (target 2 minutes), with makespan / lower bound.

The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import zero_bubble_reference as zbr  # noqa: E402

from ppdsl.analysis.check import CheckResult, check  # noqa: E402
from ppdsl.analysis.costs import CostSpec  # noqa: E402
from ppdsl.analysis.scenario import Scenario  # noqa: E402
from ppdsl.common.diagnostics import DiagnosticError  # noqa: E402
from ppdsl.language.library import library_files  # noqa: E402
from ppdsl.plan.kinds import BACKWARD_B, BACKWARD_W, FORWARD  # noqa: E402
from ppdsl.synth import SynthRequest, synthesize_file  # noqa: E402
from ppdsl.synth.problem import Problem, build_problem  # noqa: E402
from ppdsl.synth.schedule import Evaluator, complete  # noqa: E402

UNIFORM = {"forward": 1.0, "backward": 2.0, "backward_b": 1.0, "backward_w": 1.0}
SKEWED = {"forward": 1.0, "backward": 2.2, "backward_b": 1.5, "backward_w": 0.7}
EPS = 1e-6


@dataclass
class Profile:
    name: str
    costs: dict[str, float]
    latency: float = 0.0
    last_stage: float = 1.0  # the last global stage's costs, times this

    def spec(self, nstages: int, folder: Path) -> CostSpec:
        """The profile as `--costs FILE` would give it (per-stage when the last stage is heavier)."""
        data = {"unit": "s", "costs": self.costs, "latency": self.latency}
        if self.last_stage != 1.0:
            data["stages"] = {str(nstages - 1): {k: v * self.last_stage for k, v in self.costs.items()}}
        path = folder / f"{self.name}-{nstages}.json"
        path.write_text(json.dumps(data))
        return CostSpec.read(None, path)

    def zb_costs(self, nstages: int, per_stage: bool):
        f, b, w = (self.costs[k] for k in ("forward", "backward_b", "backward_w"))
        if not per_stage or self.last_stage == 1.0:
            return f, b, w
        heavy = [1.0] * (nstages - 1) + [self.last_stage]
        return [f * x for x in heavy], [b * x for x in heavy], [w * x for x in heavy]


# the grid's micro-batch counts, by name (`--counts`)
COUNTS: dict[str, Callable[[int], int]] = {
    "pp": lambda pp: pp,
    "2pp": lambda pp: 2 * pp,
    "3pp": lambda pp: 3 * pp,
    "4pp": lambda pp: 4 * pp,
    "pp+1": lambda pp: pp + 1,
    "2pp+1": lambda pp: 2 * pp + 1,
}

PROFILES = [
    Profile("uniform", UNIFORM),
    Profile("I1.5-W0.7-lat0.1", SKEWED, latency=0.1),
    Profile("last-stage-1.5x", UNIFORM, last_stage=1.5),
]


@dataclass
class Row:
    profile: str
    pp: int
    m: int
    shape: str
    reference: str
    makespan: float
    peak: float
    synth: float | None = None
    seconds: float = 0.0
    optimal: bool = False

    @property
    def verdict(self) -> str:
        if self.synth is None:
            return "none"
        if self.synth < self.makespan - EPS:
            return "better"
        return "equal" if self.synth <= self.makespan + EPS else "worse"


def checked_library_file(
    path: Path, pp: int, m: int, vpp: int, placement: str, spec: CostSpec, params: dict | None = None
) -> CheckResult | None:
    """The checker's result for a library file at these sizes (and `params`), or None where the file is of another
    placement, refused, or not valid there. bench_memory_synth measures its library anchors through it too."""
    try:
        scenario = Scenario(path, pp, m, vpp, params or None, costs=spec)
        if scenario.definition().placement_kind != placement:
            return None
        result = check(scenario)
    except DiagnosticError:
        return None
    return result if result.valid else None


def library_references(pp: int, m: int, vpp: int, placement: str, spec: CostSpec):
    for path in library_files():
        result = checked_library_file(path, pp, m, vpp, placement, spec)
        if result is not None:
            yield result.defn.name, result.makespan, max(r.peak_activations for r in result.ranks)


def zb_auto_runs(repo, profile: Profile, pp: int, m: int) -> list[tuple[str, Callable[[], list]]]:
    """zb.py's search (one chunk) at limits pp/2, pp and 2pp (their units: pp is ZB-H1's memory), each as a name
    and a call that runs it."""
    f, b, w = profile.zb_costs(pp, per_stage=True)
    return [(f"zb auto (limit {x})", lambda x=x: zbr.zb_auto(repo, pp, m, f, b, w, profile.latency, x))
            for x in sorted({pp, 2 * pp, max(1, pp // 2)})]  # fmt: skip


def zero_bubble_orders(problem: Problem, runs: list[tuple[str, Callable[[], list]]]) -> Iterator[tuple[str, list]]:
    """Each run's schedule as orders of `problem` (their F, B, W as ppdsl's forward, I and W), the runs whose search
    finds nothing at this size or limit, or whose schedule is not complete, left out."""
    kinds = {"F": FORWARD, "B": BACKWARD_B, "W": BACKWARD_W}
    for name, run in runs:
        try:
            theirs = run()
        except (ValueError, AssertionError, TypeError, IndexError, KeyError):
            continue  # their search finds nothing at this size or limit
        orders = [[(kinds[k], problem.stage_of(r, c), mb) for k, c, mb in rank] for r, rank in enumerate(theirs)]
        if complete(problem, orders):
            yield name, orders


def zero_bubble_references(repo, profile: Profile, pp: int, m: int, vpp: int, placement: str, spec: CostSpec):
    """Their schedules at these sizes, measured by ppdsl's checker engine (as orders of the same problem)."""
    problem = build_problem(pp, m, vpp, placement, spec, split="yes")
    evaluator = Evaluator(problem)
    if vpp == 1:
        runs = zb_auto_runs(repo, profile, pp, m)
    else:
        f, b, w = profile.zb_costs(2 * pp, per_stage=False)
        variants = [pp, (3 * pp) // 2, "vmin", "vhalf", "vzb"]
        runs = [(f"v auto ({v})", lambda v=v: zbr.v_auto(repo, pp, m, f, b, w, profile.latency, v)) for v in variants]
    for name, orders in zero_bubble_orders(problem, runs):
        ev = evaluator.evaluate(orders)
        if ev.feasible:
            yield name, ev.makespan, max(ev.peaks)


def pareto(args, folder: Path) -> list[Row]:
    counts = args.counts or list(COUNTS)
    sizes = (
        [(2, 2), (2, 4), (4, 4), (4, 8)]
        if args.quick
        else [(pp, m) for pp in (2, 3, 4, 6, 8) for m in sorted({COUNTS[c](pp) for c in counts})]
    )  # fmt: skip (m = 3pp and odd m too: the zero-bubble searches are not only compared on the easy counts)
    if args.pp:
        sizes = [(pp, m) for pp, m in sizes if pp in args.pp]
    shapes = [(1, "looped"), (2, "vshape")]
    rows: list[Row] = []
    cache: dict[tuple, tuple[float, float, bool]] = {}
    for profile in PROFILES:
        for pp, m in sizes:
            for vpp, placement in shapes:
                spec = profile.spec(pp * vpp, folder)
                refs = list(library_references(pp, m, vpp, placement, spec)) if args.references != "zero-bubble" else []
                if zbr.available(args.zb_repo) and args.references != "library":
                    refs += list(zero_bubble_references(args.zb_repo, profile, pp, m, vpp, placement, spec))
                shape = "1 chunk" if vpp == 1 else "V, 2 chunks"
                for name, makespan, peak in refs:
                    row = Row(profile.name, pp, m, shape, name, makespan, peak)
                    key = (profile.name, pp, m, vpp, round(peak, 9))
                    if key not in cache:
                        request = SynthRequest(pp, m, vpp, placement, spec, peak, time_limit=args.time_limit)
                        t0 = time.perf_counter()
                        try:
                            outcome = synthesize_file(request)
                            cache[key] = (outcome.result.makespan, time.perf_counter() - t0, outcome.result.optimal)
                        except DiagnosticError as err:
                            print(f"  synth failed: {err.diagnostics[0].message}", flush=True)
                            cache[key] = (None, time.perf_counter() - t0, False)
                    row.synth, row.seconds, row.optimal = cache[key]
                    rows.append(row)
                    ratio = f"{row.synth / row.makespan:.3f}" if row.synth else "-"
                    print(
                        f"{profile.name:17s} pp={pp:<2d} m={m:<3d} {shape:11s} {name:22s} peak {peak:6.3g} "
                        f"makespan {makespan:8.4g} synth {row.synth or float('nan'):8.4g} ratio {ratio} "
                        f"{row.verdict}",
                        flush=True,
                    )
    return rows


def optimality(folder: Path) -> list[dict]:
    out = []
    for profile in PROFILES:
        spec = profile.spec(4, folder)
        request = SynthRequest(4, 8, 1, "looped", spec, 4.0, exact=True, time_limit=120.0)
        t0 = time.perf_counter()
        outcome = synthesize_file(request)
        seconds = time.perf_counter() - t0
        r = outcome.result
        out.append(
            {
                "profile": profile.name,
                "makespan": r.makespan,
                "lower_bound": r.lower_bound,
                "optimal": r.optimal,
                "seconds": round(seconds, 2),
            }
        )
        print(
            f"exact pp=4 m=8 limit 4 {profile.name:17s}: makespan {r.makespan:g}, bound {r.lower_bound:g}, "
            f"{'proven optimal' if r.optimal else 'not proven'} in {seconds:.1f} s (target 120 s)",
            flush=True,
        )
    return out


def speed(folder: Path) -> list[dict]:
    out = []
    profile = PROFILES[1]
    for pp, m, target in ((16, 64, 10.0), (64, 512, 120.0)):
        spec = profile.spec(pp, folder)
        request = SynthRequest(pp, m, 1, "looped", spec, float(pp))
        t0 = time.perf_counter()
        outcome = synthesize_file(request)
        seconds = time.perf_counter() - t0
        r = outcome.result
        ratio = r.makespan / r.lower_bound
        figures = {"makespan": r.makespan, "lower_bound": r.lower_bound, "ratio_to_bound": round(ratio, 4)}
        out.append({"pp": pp, "m": m, "seconds": round(seconds, 2), "target_seconds": target, **figures})
        print(
            f"speed pp={pp} m={m} ({profile.name}, limit {pp}): {seconds:.1f} s (target {target:g} s), "
            f"makespan {r.makespan:g}, lower bound {r.lower_bound:g}, ratio {ratio:.3f}",
            flush=True,
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zb-repo", default=os.environ.get("ZB_REPO"), help="clone of the zero-bubble repository")
    parser.add_argument("--time-limit", type=float, default=10.0, help="synth's --time-limit per search")
    parser.add_argument("--quick", action="store_true", help="a few sizes only")
    parser.add_argument("--pp", type=int, nargs="*", help="only these pipeline degrees of the grid")
    parser.add_argument("--counts", nargs="*", choices=list(COUNTS), help="only these micro-batch counts")
    parser.add_argument(
        "--references", choices=("all", "library", "zero-bubble"), default="all", help="which schedules to compare with"
    )
    parser.add_argument("--skip-exact", action="store_true")
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args()
    if not zbr.available(args.zb_repo):
        print("zero-bubble searches skipped: give --zb-repo (or ZB_REPO) a clone of "
              "sail-sg/zero-bubble-pipeline-parallelism", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        rows = pareto(args, Path(folder))
        exact = [] if args.skip_exact else optimality(Path(folder))
        fast = [] if args.skip_speed else speed(Path(folder))
    counted = {v: sum(r.verdict == v for r in rows) for v in ("better", "equal", "worse", "none")}
    gains = [1 - r.synth / r.makespan for r in rows if r.verdict == "better"]
    losses = [r.synth / r.makespan - 1 for r in rows if r.verdict == "worse"]
    by_source = {}
    for source in ("library", "zero-bubble"):
        mine = [r for r in rows if (r.reference.startswith(("zb ", "v ")) == (source == "zero-bubble"))]
        by_source[source] = {v: sum(r.verdict == v for r in mine) for v in ("better", "equal", "worse")}
    print(
        f"\nPareto: {len(rows)} comparisons: synth strictly faster in {counted['better']}, as fast in "
        f"{counted['equal']}, slower in {counted['worse']}; mean gain where faster "
        f"{statistics.fmean(gains) if gains else 0:.1%}, worst loss {max(losses, default=0):.1%}",
        flush=True,
    )
    for source, counts in by_source.items():
        print(f"  against {source}: {counts}")
    worst = sorted((r for r in rows if r.verdict == "worse"), key=lambda r: r.synth / r.makespan, reverse=True)[:10]
    for r in worst:
        print(f"  slower: {r.profile} pp={r.pp} m={r.m} {r.shape} {r.reference}: {r.synth:g} vs {r.makespan:g}")
    print(
        json.dumps(
            {
                "comparisons": len(rows),
                "better": counted["better"],
                "equal": counted["equal"],
                "worse": counted["worse"],
                "mean_gain_where_better": round(statistics.fmean(gains), 4) if gains else 0.0,
                "worst_loss": round(max(losses, default=0.0), 4),
                "by_source": by_source,
                "zero_bubble_compared": zbr.available(args.zb_repo),
                "exact": exact,
                "speed": fast,
                "synth_seconds_median": round(statistics.median(r.seconds for r in rows), 2) if rows else None,
            }
        )
    )


if __name__ == "__main__":
    main()
