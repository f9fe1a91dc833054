"""Anchors for uneven models: an even split and the DP min-max split, under 1F1B, interleaved 1F1B and interleaved
zero-bubble, each judged by `ppdsl check` (makespan and peak activations).

For each layer profile (the shared ones in `../shared/data/profiles/`, or `--profiles FILE ...`), pp 4 and 8 and
m = 2 pp and 4 pp, each schedule is checked twice: with the layers split evenly (the first stages one more, as
Megatron and torchtitan do) and with the split that minimises the busiest virtual stage's work (forward +
backward_b + backward_w: `ppdsl.analysis.layers.min_max_partition`, the DP torchtitan's auto-partition and torch's
`_partition.py` compute, written here from the formula). 1F1B runs one stage a rank; the interleaved schedules
two (vpp 2), so their split has pp x 2 entries. Memory is in layer activations (no memory fields: one unit a layer
a micro-batch in flight).

These are the anchors issue 28's synth targets compare against: `best` is the lowest makespan of the six per
(profile, pp, m), with its peak. With `--synth`, `ppdsl synth --layers` (the partition free) runs at each anchor's
peak memory (`--time-limit` seconds each, for one chunk a rank and for two, looped and V-shaped, the fastest
kept) and its makespan is set against that anchor's: the target is synth <=
anchor in every case. Run `python benchmarks/bench_partition.py` (`--quick`: pp 4 only). A table goes to stdout;
the last line of stdout is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from ppdsl.analysis.check import check  # noqa: E402  (after the path: the repository's ppdsl, not an installed one)
from ppdsl.analysis.layers import even_partition, min_max_partition, read_profile  # noqa: E402
from ppdsl.analysis.scenario import Scenario  # noqa: E402

# what synth is tried with at each peak (`--synth`): one chunk a rank, two looped, two V-shaped
SYNTH_SHAPES = ((1, "looped"), (2, "looped"), (2, "vshape"))
SCHEDULES = (("1F1B", "1f1b", 1), ("Interleaved1F1B", "interleaved1f1b", 2), ("InterleavedZB", "interleavedzb", 2))


def _shared_profiles() -> list[Path]:
    for base in (ROOT.parent / "shared", ROOT.parents[1] / "shared"):  # beside the repository, or its work trees
        folder = base / "data" / "profiles"
        if folder.is_dir():
            return sorted(folder.glob("*.json"))
    return []


def anchor(profile, name: str, schedule: str, vpp: int, pp: int, m: int, split: str) -> dict:
    """One checked anchor: the schedule with the even or the DP split of the profile's layers."""
    stages = pp * vpp
    partition = even_partition(len(profile.layers), stages) if split == "even" else min_max_partition(profile, stages)
    start = time.perf_counter()
    result = check(Scenario(schedule, pp, m, vpp=vpp, layers=profile, partition=partition))
    seconds = time.perf_counter() - start
    row = {"schedule": name, "vpp": vpp, "split": split, "partition": partition.text(), "valid": result.valid}
    if result.valid:
        row.update(
            makespan=round(result.makespan, 4),
            peak=max(result.peak_activations),
            bubble=round(result.bubble_ratio, 4),
            critical_stage=next(s.stage for s in result.stages if s.critical),
            check_seconds=round(seconds, 3),
        )
    else:
        row["reason"] = f"{result.diagnostics[0].code}: {result.diagnostics[0].message}"
    return row


def synth_at_peaks(profile, path: str, pp: int, m: int, anchors: list[dict], seconds: float) -> list[dict]:
    """`ppdsl synth --layers` with the partition free, at each anchor's peak (one search per distinct peak), against
    the best anchor within that peak."""
    from ppdsl.common.diagnostics import DiagnosticError
    from ppdsl.synth import SynthRequest, synthesize_file

    runs = []
    for peak in sorted({a["peak"] for a in anchors}):
        within = [a for a in anchors if a["peak"] <= peak + 1e-9]
        anchor = min(within, key=lambda a: a["makespan"])
        start = time.perf_counter()
        makespan, partition, shape = None, "S114", ""
        for vpp, placement in SYNTH_SHAPES:  # one chunk, two looped, two V-shaped: the fastest within the peak
            request = SynthRequest(
                pp=pp,
                microbatches=m,
                vpp=vpp,
                placement=placement,
                memory_limit=peak,
                time_limit=seconds,
                layers=profile,  # the partition free: chosen with the order
            )
            try:
                found = synthesize_file(request)
            except DiagnosticError:
                continue
            if makespan is None or found.check.makespan < makespan - 1e-9:
                makespan, partition = found.check.makespan, found.partition.text()
                shape = f"vpp {vpp} {placement}"
        run = {
            "memory_limit": peak,
            "makespan": makespan,
            "partition": partition,
            "shape": shape,
            "anchor": f"{anchor['schedule']} {anchor['split']}",
            "anchor_makespan": anchor["makespan"],
            "seconds": round(time.perf_counter() - start, 2),
        }
        runs.append(run)
        shown = "-" if makespan is None else f"{makespan:.2f} ({1 - makespan / anchor['makespan']:+.1%})"
        print(
            f"{'':<16} {pp:>3} {m:>3}  synth at peak {peak:g}: {shown} vs {run['anchor']} "
            f"{anchor['makespan']:.2f}; {shape}, partition {partition}"
        )
    return runs


def _synth_summary(cases: list[dict]) -> dict:
    """Per profile: the median gain of synth over the best anchor within each peak (1 - synth / anchor), and the
    seconds of its slowest run (every shape searched at one peak), per (pp, m) too."""
    summary: dict[str, dict] = {}
    for case in cases:
        figures = summary.setdefault(case["profile"], {"gains": [], "seconds": {}})
        for run in case["synth"]:
            if run["makespan"] is not None:
                figures["gains"].append(1 - run["makespan"] / run["anchor_makespan"])
            key = f"pp{case['pp']}_m{case['microbatches']}"
            figures["seconds"][key] = max(figures["seconds"].get(key, 0.0), run["seconds"])
    return {
        name: {
            "median_gain": round(statistics.median(f["gains"]), 4) if f["gains"] else None,
            "min_gain": round(min(f["gains"]), 4) if f["gains"] else None,
            "max_seconds": max(f["seconds"].values(), default=0.0),
            "max_seconds_by_size": f["seconds"],
        }
        for name, f in summary.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", nargs="*", type=Path, help="layer profiles (default: the shared ones)")
    parser.add_argument("--quick", action="store_true", help="pp 4 only")
    parser.add_argument("--synth", action="store_true", help="synth with the partition free at each anchor's peak")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds of each synth search")
    args = parser.parse_args()
    paths = args.profiles or _shared_profiles()
    if not paths:
        sys.exit("no layer profiles: pass --profiles FILE ... (the shared ones are in ../shared/data/profiles/)")
    pps = (4,) if args.quick else (4, 8)
    cases = []
    header = (
        f"{'profile':<16} {'pp':>3} {'m':>3}  {'schedule':<16} {'split':<5} {'makespan':>10} {'peak':>5}  partition"
    )
    print(header)
    for path in paths:
        profile = read_profile(path)
        for pp in pps:
            for m in (2 * pp, 4 * pp):
                rows = [
                    anchor(profile, name, schedule, vpp, pp, m, split)
                    for name, schedule, vpp in SCHEDULES
                    for split in ("even", "dp")
                ]
                for row in rows:
                    figure = f"{row['makespan']:>10.2f} {row['peak']:>5g}" if row["valid"] else f"{'-':>10} {'-':>5}"
                    print(
                        f"{path.stem:<16} {pp:>3} {m:>3}  {row['schedule']:<16} {row['split']:<5} {figure}  "
                        f"{row['partition'] if row['valid'] else row['reason']}"
                    )
                valid = [r for r in rows if r["valid"]]
                best = min(valid, key=lambda r: (r["makespan"], r["peak"]))
                gains = {
                    name: round(1 - dp["makespan"] / even["makespan"], 4)
                    for name, _, _ in SCHEDULES
                    for even in valid
                    for dp in valid
                    if even["schedule"] == dp["schedule"] == name and even["split"] == "even" and dp["split"] == "dp"
                }
                case = {
                    "profile": path.stem,
                    "pp": pp,
                    "microbatches": m,
                    "anchors": rows,
                    "best": best,
                    "dp_gain_over_even": gains,
                }
                print(
                    f"{'':<16} {'':>3} {'':>3}  best: {best['schedule']} {best['split']} {best['makespan']:.2f} "
                    f"(peak {best['peak']:g}); DP over even: " + ", ".join(f"{k} {v:+.1%}" for k, v in gains.items())
                )
                if args.synth:
                    case["synth"] = synth_at_peaks(profile, str(path), pp, m, valid, args.time_limit)
                cases.append(case)
    all_gains = [g for case in cases for g in case["dp_gain_over_even"].values()]
    if args.synth:
        runs = [run for case in cases for run in case["synth"]]
        beaten = [
            run for run in runs if run["makespan"] is not None and run["makespan"] <= run["anchor_makespan"] + 1e-6
        ]
        print(f"synth <= the anchor at its peak in {len(beaten)} of {len(runs)} runs")
        synth_summary = _synth_summary(cases)
        for name, figures in synth_summary.items():
            print(
                f"{name}: median gain of synth over the best anchor within its peak {figures['median_gain']:+.1%}, "
                f"slowest run {figures['max_seconds']:g} s"
            )
    summary = {
        "benchmark": "partition",
        "profiles": [p.stem for p in paths],
        "pp": list(pps),
        "cases": cases,
        "median_dp_gain_over_even": statistics.median(all_gains) if all_gains else None,
    }
    if args.synth:
        summary["synth_wins"] = len(beaten)
        summary["synth_runs"] = len(runs)
        summary["synth_by_profile"] = synth_summary
    print(f"median makespan gain of the DP split over the even split: {summary['median_dp_gain_over_even']:.1%}")
    print(json.dumps(summary, separators=(",", ":")))


if __name__ == "__main__":
    main()
