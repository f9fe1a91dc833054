"""Data-parallel pipelines (issue 29): the exposed collective time the checker predicts, and measured 2 x 2 runs.

1. **Simulated** (the checker's execution model, `check(Scenario(..., dp=D))`): for 1F1B, ZB-H1 and interleaved
   1F1B (vpp 2) with every chunk's `reduce_grads` at the end of the order (right before the optimizer, where a
   schedule that only adds them puts them), and as the library file itself places them (right after each chunk's last
   backward, where Paddle's VPP pass and PyTorch's REDUCE_GRAD put them), at pp 4 and 8, dp 2 and 4 (micro-batches 2
   x pp; a reduction costs the ring all-reduce's share of a chunk's gradients, `reduce_cost`: 3 at dp 2, 4.5 at dp
   4): the makespan and each rank's exposed (not overlapped) collective time, max over the ranks
   (`RankStats.exposed_collective`); and beside them
   synth's schedules (`ppdsl.synthesize(..., dp=D)`, the same costs, looped at 1 and 2 chunks and the V at 2),
   which place each chunk's reduction right after its last gradient job and search orders by the makespan with
   them, so that the orders finish a chunk's gradients early and its reduction runs under the other chunks'
   backwards. `targets` in the JSON: synth's exposed time at most the library's with reductions at the end at the
   same pp, dp and chunks (1F1B and ZB-H1 at 1 chunk, interleaved 1F1B at 2), and 30% less at pp 8 dp 4 with 2
   chunks (with one chunk no schedule can hide any: its one reduction follows the rank's last job).
2. **Measured** (`ppdsl run --pp 2 --dp 2 -m 4 --nproc-per-node 4`, gloo on this CPU machine): the step time (the
   slowest rank per step, median over the steps after the first) and each rank's time blocked in the replicas'
   all-reduce per step (`rank<r>.json` `collectives`: on CPU a rank runs one job at a time, so all of it is
   exposed), beside the same global batch on one replica (`--dp 1 -m 8`, 2 processes) and a check that the two
   trained the same parameters (1e-5 relative).

Run `python benchmarks/bench_dp.py` (`--quick`: 1F1B only measured, fewer steps; `--no-measure`: the simulated
half alone; `--synth-seconds S`: each synth search's time limit, default 4). A table goes to stdout, the last
line of stdout is one JSON object with every figure; progress notes go to stderr. Exit code 0 only if every
measured pair trained the same parameters.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppdsl.analysis.check import check  # noqa: E402
from ppdsl.analysis.scenario import Scenario  # noqa: E402
from ppdsl.language.library import library_dir  # noqa: E402

SCHEDULES = (("1f1b", 1), ("zbh1", 1), ("interleaved1f1b", 2))
SYNTH = ((1, "looped"), (2, "looped"), (2, "vshape"))  # (chunks, placement) synth searches
SIZES = ((4, 2), (4, 4), (8, 2), (8, 4))  # (pp, dp); micro-batches 2 x pp
# a chunk's gradients, in units of bandwidth x time: a reduction costs the ring all-reduce's share of them,
# 2 (D - 1) / D * size (`comm reduce size` over `comm reduce bandwidth` 1): 3 at dp 2, 4.5 at dp 4, so longer
# than the backward (2) that follows a chunk's last one: hiding it takes more than the next job
REDUCE_SIZE = 3.0


def reduce_cost(dp: int) -> dict[str, float]:
    return {"reduce_grads": 2 * (dp - 1) / dp * REDUCE_SIZE}


def with_reductions(stem: str, directory: Path) -> Path:
    """The library schedule with its own `reduce_grads` taken out and each chunk's put right before its
    optimizer."""
    text = (library_dir() / f"{stem}.sched").read_text()
    text = re.sub(r"^\s*reduce_grads\b.*\n", "", text, flags=re.MULTILINE)  # an `if` left empty is valid
    text = text.replace("\n    optimizer\n", "\n    for c in 0 .. vpp { reduce_grads(chunk = c) }\n    optimizer\n")
    path = directory / f"{stem}_reduce.sched"
    path.write_text(text)
    return path


def simulated(directory: Path) -> list[dict]:
    """Each schedule with its reductions at the end, and as the library file places them (each chunk's right
    after its last backward); every reduction costs `reduce_cost(dp)`."""
    rows = []
    placements = []
    for stem, vpp in SCHEDULES:
        placements.append((stem, vpp, "end", with_reductions(stem, directory)))
        placements.append((stem, vpp, "after last backward", library_dir() / f"{stem}.sched"))
    for stem, vpp, placement, path in placements:
        for pp, dp in SIZES:
            rows.append(_checked_row(path, stem, placement, pp, vpp, dp))
    return rows


def _checked_row(path: Path, stem: str, placement: str, pp: int, vpp: int, dp: int) -> dict:
    """`check --dp` of one file: its makespan and collective time, exposed and all, max over the ranks."""
    result = check(Scenario(str(path), pp, 2 * pp, vpp, costs=reduce_cost(dp), dp=dp))
    if not result.valid:
        return {"schedule": stem, "placement": placement, "pp": pp, "dp": dp, "error": result.diagnostics[0].message}
    ranks = result.execution.ranks
    return {
        "schedule": stem,
        "vpp": vpp,
        "pp": pp,
        "dp": dp,
        "microbatches": 2 * pp,
        "makespan": result.execution.makespan,
        "collective": max(r.collective or 0.0 for r in ranks),
        "exposed_collective": max(r.exposed_collective or 0.0 for r in ranks),
        "placement": placement,
    }


def synthesized(directory: Path, seconds: float) -> list[dict]:
    """synth's schedule at each size (`ppdsl.synthesize(..., dp=D)`), its written file checked with `--dp D`."""
    from ppdsl import synthesize

    rows = []
    for vpp, placement in SYNTH:
        for pp, dp in SIZES:
            print(f"synth: pp {pp} dp {dp} vpp {vpp} {placement}", file=sys.stderr, flush=True)
            outcome = synthesize(
                pp=pp,
                microbatches=2 * pp,
                vpp=vpp,
                placement=placement,
                dp=dp,
                costs=reduce_cost(dp),
                time_limit=seconds,
            )
            path = directory / f"synth-pp{pp}-dp{dp}-v{vpp}-{placement}.sched"
            path.write_text(outcome.text)
            rows.append(_checked_row(path, f"synth {placement}", "synth", pp, vpp, dp))
    return rows


def targets(rows: list[dict]) -> dict:
    """Synth's exposed reduction time against the library's with the reductions at the end, at each size: at most
    it everywhere (at the same chunks), and 30% less at pp 8 dp 4 with 2 chunks."""
    end = [r for r in rows if r.get("placement") == "end" and "error" not in r]
    cases, worst_pp8_dp4 = [], None
    for row in rows:
        if row.get("placement") != "synth" or "error" in row:
            continue
        for lib in end:
            if (lib["pp"], lib["dp"], lib["vpp"]) != (row["pp"], row["dp"], row["vpp"]):
                continue
            cut = 1 - row["exposed_collective"] / lib["exposed_collective"] if lib["exposed_collective"] else 0.0
            case = {"synth": row["schedule"], "library": lib["schedule"], "pp": row["pp"], "dp": row["dp"]}
            case |= {"vpp": row["vpp"], "synth_exposed": row["exposed_collective"]}
            case |= {"library_exposed": lib["exposed_collective"], "less": cut}
            cases.append(case)
            if (row["pp"], row["dp"], row["vpp"]) == (8, 4, 2):
                worst_pp8_dp4 = cut if worst_pp8_dp4 is None else min(worst_pp8_dp4, cut)
    at_most = all(c["synth_exposed"] <= c["library_exposed"] + 1e-9 for c in cases)
    return {
        "cases": cases,
        "synth_at_most_library_end": bool(cases) and at_most,
        "least_cut_pp8_dp4_vpp2": worst_pp8_dp4,
        "cut_30pct_pp8_dp4": worst_pp8_dp4 is not None and worst_pp8_dp4 >= 0.3,
    }


def _run(schedule: Path, pp: int, dp: int, m: int, vpp: int, steps: int, run_dir: Path) -> tuple[Path, dict]:
    args = [sys.executable, "-m", "ppdsl.cli", "run", str(schedule), "--pp", str(pp), "--dp", str(dp)]
    args += ["-m", str(m), "--vpp", str(vpp), "--steps", str(steps), "--batch-size", str(2 * m * dp)]
    args += ["--optimizer", "sgd", "--lr", "0.05", "--seed", "3", "--nproc-per-node", str(pp * dp)]
    args += ["--run-dir", str(run_dir)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    launch = run_dir / "launch-1"
    reports = [json.loads((launch / f"rank{g}.json").read_text()) for g in range(pp * dp)]
    return launch, {"reports": reports}


def _parameters(launch: Path, ranks: range) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for g in ranks:
        with np.load(launch / f"rank{g}.npz") as data:
            out.update({k: data[k] for k in data.files})
    return out


def _step_ms(reports: list[dict]) -> float:
    steps = min(len(r["step_seconds"]) for r in reports)
    slowest = [max(r["step_seconds"][i] for r in reports) for i in range(1, steps)]
    return 1e3 * statistics.median(slowest)


def measured(directory: Path, steps: int, quick: bool) -> list[dict]:
    rows = []
    for stem, vpp in SCHEDULES[:1] if quick else SCHEDULES:
        schedule = with_reductions(stem, directory)
        pp, dp, m = 2, 2, 4
        print(f"measuring {stem}: pp {pp} dp {dp} -m {m}, and dp 1 -m {dp * m}", file=sys.stderr, flush=True)
        launch, two = _run(schedule, pp, dp, m, vpp, steps, directory / f"{stem}-dp2")
        one_launch, one = _run(schedule, pp, 1, dp * m, vpp, steps, directory / f"{stem}-dp1")
        got, want = _parameters(launch, range(pp)), _parameters(one_launch, range(pp))
        diff = max(float(np.abs(got[k] - want[k]).max() / max(np.abs(want[k]).max(), 1e-30)) for k in want)
        per_rank = []
        for rep in two["reports"]:
            calls = rep["collectives"]["reduce_grads"]
            n = len(rep["step_seconds"])
            per_rank.append(1e3 * sum(end - start for start, end, _ in calls) / max(n, 1))
        rows.append(
            {
                "schedule": stem,
                "vpp": vpp,
                "pp": pp,
                "dp": dp,
                "microbatches": m,
                "step_ms": _step_ms(two["reports"]),
                "step_ms_dp1_same_batch": _step_ms(one["reports"]),
                "reduce_ms_per_step": per_rank,  # per process: blocked in the all-reduce (all exposed on CPU)
                "reduce_bytes": two["reports"][0]["collectives"]["reduce_grads"][0][2],
                "max_relative_difference_vs_dp1": diff,
                "same_parameters": diff < 1e-5,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-measure", action="store_true")
    parser.add_argument("--steps", type=int, help="steps per run, the first not timed (default 8, quick 4)")
    parser.add_argument("--synth-seconds", type=float, default=4.0, help="each synth search's time limit")
    args = parser.parse_args(argv)
    steps = args.steps or (4 if args.quick else 8)
    with tempfile.TemporaryDirectory(prefix="bench_dp-") as tmp:
        directory = Path(tmp)
        sim = simulated(directory) + synthesized(directory, args.synth_seconds)
        meas = [] if args.no_measure else measured(directory, steps, args.quick)
    print(
        f"{'schedule':16} {'reductions':20} {'vpp':>3} {'pp':>3} {'dp':>3} {'makespan':>9} {'collective':>10} "
        f"{'exposed':>8}"
    )
    for row in sim:
        if "error" in row:
            print(f"{row['schedule']:16} {row['placement']:20} {row['pp']:>3} {row['dp']:>3}  refused: {row['error']}")
            continue
        print(
            f"{row['schedule']:16} {row['placement']:20} {row['vpp']:>3} {row['pp']:>3} {row['dp']:>3} "
            f"{row['makespan']:>9.2f} "
            f"{row['collective']:>10.2f} {row['exposed_collective']:>8.2f}"
        )
    if meas:
        print()
        print(
            f"{'schedule':16} {'step ms':>8} {'dp1 ms':>8} {'reduce ms/step per rank':>26} {'rel diff':>9}"
            "  (measured 2x2)"
        )
        for row in meas:
            reduce = ", ".join(f"{x:.1f}" for x in row["reduce_ms_per_step"])
            print(
                f"{row['schedule']:16} {row['step_ms']:>8.1f} {row['step_ms_dp1_same_batch']:>8.1f} {reduce:>26} "
                f"{row['max_relative_difference_vs_dp1']:>9.1e}"
            )
    goals = targets(sim)
    print()
    for case in goals["cases"]:
        print(
            f"{case['synth']:16} vs {case['library']:16} pp {case['pp']} dp {case['dp']} vpp {case['vpp']}: exposed "
            f"{case['synth_exposed']:.2f} vs {case['library_exposed']:.2f} ({case['less']:.0%} less)"
        )
    ok = all(row["same_parameters"] for row in meas)
    print(json.dumps({"simulated": sim, "measured": meas, "targets": goals, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
