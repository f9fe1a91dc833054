"""Memory actions run by the Paddle runtime (issue 17): 1F1B, ZB-H1 and ZB-V on the built-in GPT with none / full
recompute / selective recompute / offload, measured, and simulated with costs calibrated from the measured run.

Every variant is a schedule written in the language (no order is edited in Python):

    schedule   none           full recompute                  selective recompute                 offload
    1F1B pp=4  1f1b           1f1b_recompute                  1f1b_selective (recomputed = 2:     schedules/1f1b_offload
                                                              2 micro-batches of each window)
    ZB-H1 pp=4 zbh1           schedules/zbh1_recompute        zbh1_recompute with `memory         schedules/zbh1_offload
                                                              recompute fraction = 0.5`
    ZB-V pp=2  zbv            schedules/zbv_recompute         zbv_recompute, fraction 0.5         schedules/zbv_offload

(`schedules/` is benchmarks/schedules; ZB-H1 / ZB-V have no per-micro-batch selection, so their selective recompute
is Megatron's kind: the largest half of each micro-batch's activations), plus the library's interleaved 1F1B with
offload in PipeOffload's pattern against interleaved 1F1B (pp=4, vpp=2) for the offload target. m=8, batch 32
(`ppdsl run`'s default model size), in the single-process emulation (every rank's jobs in one plan). Per row:
- peak bytes each rank holds at job boundaries, on the device and in the host store (what `ppdsl run` reports: the
  account of the named variables the plan keeps between jobs, `ppdsl/runtime/held.py`, the same every run however
  loaded the machine), against what `ppdsl check --model builtin` predicts (bytes per rank; target: within 10%);
- the median step time over `--steps` timed steps; the largest parameter difference from `none` (target 1e-6);
- simulated vs measured makespan: the run's jobs profiled, their mean time per (stage, job type) made into a cost
  file (`ppdsl calibrate`'s form), the schedule simulated with it. One process runs the ranks' jobs one at a time,
  so the measured step compares with the simulated ranks' busy time summed (`sim serial`); the simulated makespan
  is the prediction for pp devices (`sim makespan`), with the copies on each rank's copy stream.
Targets: 1F1B + full recompute at pp=4, m=8: peak = one micro-batch + the stage inputs in flight, in units (the
checker) and in measured bytes (within 10%); offload with copies cheaper than a forward: makespan within 2% of the
schedule without, rank-0 peak at most half (measured). On CPU the host store is an emulation (one allocator): the
copies are real, the split of the bytes is counted.

Run `python benchmarks/bench_memory.py` (`--quick`: fewer steps). A table goes to stdout; the last line of stdout
is one JSON object with every figure. Exit code 0 only if every target passes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ppdsl.analysis.check import check_expansion  # noqa: E402
from ppdsl.analysis.costs import CostSpec  # noqa: E402
from ppdsl.analysis.expand import expand  # noqa: E402
from ppdsl.analysis.plan_spec import plan_spec  # noqa: E402
from ppdsl.language.library import library_dir  # noqa: E402
from ppdsl.language.resolve import load, resolve_text  # noqa: E402
from ppdsl.reports.simulate import simulate_expansion  # noqa: E402
from ppdsl.runtime.builtin_models import load_model  # noqa: E402
from ppdsl.runtime.env import import_paddle  # noqa: E402
from ppdsl.runtime.memory import measure_stages, memory_model  # noqa: E402
from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train  # noqa: E402

TARGET_MEMORY_ERROR = 0.10
TARGET_PARAMETER_DIFFERENCE = 1e-6
TARGET_OFFLOAD_MAKESPAN = 0.02
HALF = "memory recompute fraction = 0.5\n"
COPIES = ("offload", "reload")
BENCH = Path(__file__).resolve().parent / "schedules"
LIB = library_dir()
# schedule -> (pp, vpp, {variant: (file, text put before it, parameters)})
CASES: dict[str, tuple[int, int, dict[str, tuple[Path, str, dict]]]] = {
    "1f1b": (
        4,
        1,
        {
            "none": (LIB / "1f1b.sched", "", {}),
            "full recompute": (LIB / "1f1b_recompute.sched", "", {}),
            "selective recompute": (LIB / "1f1b_selective.sched", "", {"recomputed": 2}),
            "offload": (BENCH / "1f1b_offload.sched", "", {}),
        },
    ),
    "zbh1": (
        4,
        1,
        {
            "none": (LIB / "zbh1.sched", "", {}),
            "full recompute": (BENCH / "zbh1_recompute.sched", "", {}),
            "selective recompute": (BENCH / "zbh1_recompute.sched", HALF, {}),
            "offload": (BENCH / "zbh1_offload.sched", "", {}),
        },
    ),
    "zbv": (
        2,
        2,
        {
            "none": (LIB / "zbv.sched", "", {}),
            "full recompute": (BENCH / "zbv_recompute.sched", "", {}),
            "selective recompute": (BENCH / "zbv_recompute.sched", HALF, {}),
            "offload": (BENCH / "zbv_offload.sched", "", {}),
        },
    ),
    "interleaved1f1b": (
        4,
        2,
        {
            "none": (LIB / "interleaved1f1b.sched", "", {}),
            "offload": (LIB / "interleaved1f1b_offload.sched", "", {}),
        },
    ),
}


def schedule(path: Path, before: str):
    return resolve_text(before + path.read_text(), str(path)) if before else load(path)


def calibrated_costs(records, microbatches: int) -> dict:
    """`ppdsl calibrate`'s cost file from a run's profiled jobs: the mean seconds per (stage, job type)."""
    by_stage: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    by_type: dict[str, list[float]] = defaultdict(list)
    for job in records:
        by_stage[job.stage][job.type].append(job.end - job.start)
        by_type[job.type].append(job.end - job.start)
    return {
        "unit": "s",
        "costs": {t: statistics.fmean(v) for t, v in sorted(by_type.items())},
        "stages": {str(s): {t: statistics.fmean(v) for t, v in types.items()} for s, types in sorted(by_stage.items())},
        "latency": 0.0,
    }


def with_copies(compute: dict, measured: dict) -> dict:
    """`compute`'s cost file with the copy jobs' times (offload, reload) of `measured`: a schedule with copies
    simulated on the same compute costs as the one without, so that its makespan differs only by the copies."""

    def pick(reference: dict, own: dict) -> dict:  # the job types the schedule has: `none`'s time, else its own
        return {t: reference.get(t, v) if t not in COPIES else v for t, v in own.items()}

    stages = {s: pick(compute["stages"].get(s, {}), types) for s, types in measured["stages"].items()}
    return {**compute, "costs": pick(compute["costs"], measured["costs"]), "stages": stages}


def measure(defn, pp: int, vpp: int, params: dict, args) -> dict[str, Any]:
    m = args.microbatches
    exp = expand(defn, pp, m, vpp, params=params or None)
    result = check_expansion(exp, record_visits=True)
    units = result.peak_activations  # the checker's peaks in the schedule's own units
    unit_makespan = result.execution.makespan
    model = memory_model(measure_stages(exp, None, args.batch_size))  # what `check --model builtin` measures
    measured_model = check_expansion(expand(defn, pp, m, vpp, params=params or None, memory=model))
    trainer = PipelineTrainer(
        exp, load_model(None), TrainConfig(batch_size=args.batch_size, seed=args.seed), spec=plan_spec(result)
    )
    run = train(trainer, args.warmup + args.steps, profile_steps=args.profile_steps, memory=True)
    parameters = trainer.parameters()
    device, host = run.memory.peak, run.memory.host_peak  # `ppdsl run`'s figures (an account: no least-of-N needed)
    costs = calibrated_costs(run.profile, m)
    simulated = simulate_expansion(expand(defn, pp, m, vpp, params=params or None, costs=CostSpec(file=costs)))
    profiled = run.profiled_seconds / max(1, min(args.profile_steps, args.warmup + args.steps))
    predicted = [round(p) for p in measured_model.peak_activations]
    errors = [g / w - 1 for g, w in zip(device, predicted, strict=True) if w]
    serial = sum(r.busy for r in simulated.execution.ranks)
    return {
        "jobs_per_step": len(trainer.built.job_names),
        "step_seconds": statistics.median(run.step_seconds[args.warmup :]),
        "profiled_step_seconds": profiled,
        "simulated_serial_seconds": serial,
        "serial_ratio": serial / profiled,
        "simulated_makespan_seconds": simulated.makespan,
        "unit_makespan": unit_makespan,
        "peak_units": units,
        "peak_bytes": device,
        "host_peak_bytes": host,
        "checker_peak_bytes": predicted,
        "checker_host_peak_bytes": measured_model.host_peak,
        "max_abs_memory_error": max(abs(e) for e in errors),
        "stage_bytes": {s: dict(d) for s, d in model.delta.items()},
        "costs": costs["costs"],
        "cost_file": costs,
        "parameters": parameters,
        "_expand": (defn, pp, m, vpp, params),
    }


def full_recompute_target(row: dict, pp: int, m: int) -> dict[str, Any]:
    """1F1B + full recompute: rank r holds one micro-batch's activations plus the stage inputs of the min(pp - r, m) - 1
    others in flight; in units (stage_input = 0.1) and in bytes (a stage's forward bytes, and what a recomputed
    forward keeps: the forward's minus the recompute's)."""
    in_flight = [min(pp - r, m) for r in range(pp)]
    units = [1 + (w - 1) * 0.1 for w in in_flight]
    stage = row["stage_bytes"]
    formula = [
        stage[r]["forward"] + (w - 1) * (stage[r]["forward"] - stage[r]["recompute"]) for r, w in enumerate(in_flight)
    ]
    unit_ok = all(abs(a - b) <= 1e-9 for a, b in zip(row["peak_units"], units, strict=True))
    byte_errors = [g / w - 1 for g, w in zip(row["peak_bytes"], formula, strict=True)]
    return {
        "formula_units": units,
        "formula_bytes": formula,
        "units_pass": unit_ok,
        "max_abs_byte_error": max(abs(e) for e in byte_errors),
        "pass": unit_ok and max(abs(e) for e in byte_errors) <= TARGET_MEMORY_ERROR,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed steps")
    parser.add_argument("--schedules", default=",".join(CASES), help=f"some of {', '.join(CASES)}")
    parser.add_argument("-m", "--microbatches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, help="timed steps (default 20, quick 5)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--profile-steps", type=int, help="steps profiled for the costs (default 5, quick 2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.steps = args.steps or (5 if args.quick else 20)
    args.profile_steps = args.profile_steps or (2 if args.quick else 5)

    paddle = import_paddle()
    started, load_before = time.perf_counter(), os.getloadavg()
    rows, targets = [], {}
    for stem in args.schedules.split(","):
        pp, vpp, variants = CASES[stem]
        case = []
        for variant, (path, before, params) in variants.items():
            print(f"measuring {stem} {variant} ...", file=sys.stderr, flush=True)
            defn = schedule(path, before)
            row = {"case": stem, "schedule": defn.name, "file": path.name, "variant": variant, "pp": pp, "vpp": vpp}
            case.append({**row, "declared": before.strip(), "params": params, **measure(defn, pp, vpp, params, args)})
        reference = case[0]
        trained = [row.pop("parameters") for row in case]
        for row, params in zip(case, trained, strict=True):
            row["max_parameter_difference"] = max(float(np.max(np.abs(params[k] - trained[0][k]))) for k in params)
            row["peak_ratio_rank0"] = row["peak_bytes"][0] / reference["peak_bytes"][0]
            row["step_ratio"] = row["step_seconds"] / reference["step_seconds"]
            row["unit_makespan_ratio"] = row["unit_makespan"] / reference["unit_makespan"]
            row["simulated_makespan_ratio"] = (
                row["simulated_makespan_seconds"] / reference["simulated_makespan_seconds"]
            )
            row["pass"] = (
                row["max_abs_memory_error"] <= TARGET_MEMORY_ERROR
                and row["max_parameter_difference"] <= TARGET_PARAMETER_DIFFERENCE
            )
        files = [row.pop("cost_file") for row in case]
        for row, file in zip(case, files, strict=True):  # the copies' cost on `none`'s compute costs (one calibration)
            defn, pp_, m_, vpp_, params_ = row.pop("_expand")
            mixed = with_copies(files[0], file)
            sim = simulate_expansion(expand(defn, pp_, m_, vpp_, params=params_ or None, costs=CostSpec(file=mixed)))
            row["makespan_on_none_costs_seconds"] = sim.makespan
        for row in case:
            row["makespan_on_none_costs_ratio"] = (
                row["makespan_on_none_costs_seconds"] / reference["makespan_on_none_costs_seconds"]
            )
        if stem == "1f1b":
            targets["1f1b_full_recompute"] = full_recompute_target(case[1], pp, args.microbatches)
        if stem == "interleaved1f1b":
            off = case[1]
            copy = max(off["costs"].get("offload", 0), off["costs"].get("reload", 0))
            targets["interleaved_offload"] = {
                "copy_seconds": copy,
                "forward_seconds": off["costs"]["forward"],
                "copies_cheaper_than_forward": copy < off["costs"]["forward"],
                "unit_makespan_ratio": off["unit_makespan_ratio"],
                "calibrated_makespan_ratio": off["simulated_makespan_ratio"],
                "makespan_on_none_costs_ratio": off["makespan_on_none_costs_ratio"],
                "peak_ratio_rank0": off["peak_ratio_rank0"],
                "pass": abs(off["unit_makespan_ratio"] - 1) <= TARGET_OFFLOAD_MAKESPAN
                and (
                    copy >= off["costs"]["forward"]
                    or abs(off["makespan_on_none_costs_ratio"] - 1) <= TARGET_OFFLOAD_MAKESPAN
                )
                and off["peak_ratio_rank0"] <= 0.5,
            }
        rows += case

    print(f"built-in GPT, m={args.microbatches}, batch {args.batch_size}, one process (CPU)")
    head = (
        "schedule",
        "variant",
        "step ms",
        "x none",
        "sim/meas",
        "makespan",
        "x none",
        "same",
        "peak KiB per rank",
        "host KiB",
        "err",
    )
    widths = (-22, -20, 8, 6, 8, 9, 6, 6, 26, 22, 6)
    print(" ".join(f"{h:<{-w}}" if w < 0 else f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for row in rows:
        device = ", ".join(f"{b / 1024:.0f}" for b in row["peak_bytes"])
        host = ", ".join(f"{b / 1024:.0f}" for b in row["host_peak_bytes"])
        where = f"{row['case']} pp{row['pp']}" + (f"v{row['vpp']}" if row["vpp"] > 1 else "")
        print(
            f"{where:<22} {row['variant']:<20} {row['step_seconds'] * 1e3:>8.1f} {row['step_ratio']:>6.2f} "
            f"{row['serial_ratio']:>8.2f} {row['simulated_makespan_seconds'] * 1e3:>7.1f}ms "
            f"{row['simulated_makespan_ratio']:>6.2f} {row['makespan_on_none_costs_ratio']:>6.2f} "
            f"{device:>26} {host:>22} {row['max_abs_memory_error']:>6.1%}"
        )
    print("sim/meas: simulated busy time (calibrated costs) over the measured step; makespan: simulated on pp devices")
    print("same: the makespan on `none`'s compute costs with this run's copy costs, over `none`'s")
    print("err: measured device peak against `check --model builtin`, worst rank")
    print("host KiB: the offloads' host store; on CPU one allocator, so the device / host split is an emulation")
    for name, target in targets.items():
        print(f"target {name}: {'pass' if target['pass'] else 'FAIL'} {json.dumps(target)}")
    ok = all(row["pass"] for row in rows) and all(t["pass"] for t in targets.values())
    report = {
        "python": platform.python_version(),
        "paddle": paddle.__version__,
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "seconds": time.perf_counter() - started,
        "microbatches": args.microbatches,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "host_store": "emulated on CPU (one allocator; the offloads' copies, `@HOST` variables, counted apart)",
        "targets": {
            "memory_error": TARGET_MEMORY_ERROR,
            "parameter_difference": TARGET_PARAMETER_DIFFERENCE,
            "offload_makespan": TARGET_OFFLOAD_MAKESPAN,
            **targets,
        },
        "rows": rows,
        "pass": ok,
    }
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
