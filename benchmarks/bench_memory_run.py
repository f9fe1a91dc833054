"""Memory jobs run by the Paddle runtime (issue 17): 1F1B, ZB-H1 and ZB-V on the built-in GPT with none / full
recompute / selective recompute / offload, measured.

For each variant, the library's 1F1B and ZB-H1 at pp=4 and ZB-V at pp=2, vpp=2, m=8, batch 32 (`ppdsl run`'s
default model size), with memory jobs put
into its orders (`ppdsl.runtime.memory_jobs.with_memory_jobs`: full = every (chunk, micro-batch) recomputes,
selective = the even micro-batches, offload = every forward offloaded and reloaded before its backward), in the
single-process emulation (every rank's jobs in one plan):
- peak bytes each rank holds at job boundaries, on the device and in the host store (profiler, the least of
  `--memory-steps` measured steps), against `runtime/memory.py:predicted_peaks`; target: within 10% per rank;
- the median step time over `--steps` timed steps (after `--warmup`);
- the largest parameter difference from the run without memory jobs after the same steps; target: 1e-6.
On CPU the host store is an emulation (one allocator): the copies are real, the split of the bytes is counted.

Run `python benchmarks/bench_memory_run.py` (`--quick`: fewer steps). A table goes to stdout; the last line of
stdout is one JSON object with every figure. Exit code 0 only if every target passes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ppdsl.analysis.expand import expand  # noqa: E402
from ppdsl.language.library import library_dir  # noqa: E402
from ppdsl.language.resolve import load  # noqa: E402
from ppdsl.runtime.builtin_models import load_model  # noqa: E402
from ppdsl.runtime.env import import_paddle  # noqa: E402
from ppdsl.runtime.memory import predicted_peaks  # noqa: E402
from ppdsl.runtime.memory_jobs import with_memory_jobs  # noqa: E402
from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train  # noqa: E402

TARGET_MEMORY_ERROR = 0.10
TARGET_PARAMETER_DIFFERENCE = 1e-6
CASES = {"1f1b": (4, 1), "zbh1": (4, 1), "zbv": (2, 2)}  # schedule -> (pp, vpp)
VARIANTS = {
    "none": {},
    "full recompute": {"recompute": lambda r, c, mb: True},
    "selective recompute": {"recompute": lambda r, c, mb: mb % 2 == 0},
    "offload": {"offload": lambda r, c, mb: True},
}


def measure(base, variant: str, args) -> dict[str, Any]:
    exp = with_memory_jobs(base, **VARIANTS[variant])
    trainer = PipelineTrainer(exp, load_model(None), TrainConfig(batch_size=args.batch_size, seed=args.seed))
    run = train(trainer, args.warmup + args.steps)
    parameters = trainer.parameters()
    device, host = None, None
    for k in range(args.memory_steps):  # the profiler's attribution can only overcount: the least of a few steps
        memory = train(trainer, args.warmup + args.steps + k + 1, memory=True).memory
        device = memory.peak if device is None else [min(a, b) for a, b in zip(device, memory.peak, strict=True)]
        host = memory.host_peak if host is None else [min(a, b) for a, b in zip(host, memory.host_peak, strict=True)]
    built = trainer.built
    predicted = predicted_peaks(built.programs, built.job_names, exp.stage_of, built.memory_jobs)
    errors = [g / w - 1 for g, w in zip(device + host, predicted.device + predicted.host, strict=True) if w]
    return {
        "variant": variant,
        "jobs_per_step": len(built.job_names),
        "step_seconds": statistics.median(run.step_seconds[args.warmup :]),
        "peak_bytes": device,
        "host_peak_bytes": host,
        "predicted_peak_bytes": predicted.device,
        "predicted_host_peak_bytes": predicted.host,
        "max_abs_memory_error": max(abs(e) for e in errors),
        "parameters": parameters,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed steps")
    parser.add_argument("--schedules", default=",".join(CASES), help=f"some of {', '.join(CASES)}")
    parser.add_argument("-m", "--microbatches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, help="timed steps (default 20, quick 6)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--memory-steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.steps = args.steps or (6 if args.quick else 20)

    paddle = import_paddle()
    started, load_before = time.perf_counter(), os.getloadavg()
    rows = []
    for stem in args.schedules.split(","):
        pp, vpp = CASES[stem]
        base = expand(load(library_dir() / f"{stem}.sched"), pp, args.microbatches, vpp)
        case = []
        for variant in VARIANTS:
            print(f"measuring {stem} {variant} ...", file=sys.stderr, flush=True)
            case.append({"schedule": base.defn.name, "pp": pp, "vpp": vpp, **measure(base, variant, args)})
        reference = case[0]["parameters"]
        for row in case:
            params = row.pop("parameters")
            row["max_parameter_difference"] = max(float(np.max(np.abs(params[k] - reference[k]))) for k in reference)
            row["peak_ratio_rank0"] = row["peak_bytes"][0] / case[0]["peak_bytes"][0]
            row["step_ratio"] = row["step_seconds"] / case[0]["step_seconds"]
            row["pass"] = (
                row["max_abs_memory_error"] <= TARGET_MEMORY_ERROR
                and row["max_parameter_difference"] <= TARGET_PARAMETER_DIFFERENCE
            )
        rows += case

    print(f"built-in GPT, m={args.microbatches}, batch {args.batch_size}, one process (CPU)")
    header = ("schedule", "variant", "step ms", "x none", "peak KiB per rank (device)", "host KiB", "err")
    print(
        f"{header[0]:<12} {header[1]:<20} {header[2]:>8} {header[3]:>7} {header[4]:>30} {header[5]:>24} {header[6]:>6}"
    )
    for row in rows:
        device = ", ".join(f"{b / 1024:.0f}" for b in row["peak_bytes"])
        host = ", ".join(f"{b / 1024:.0f}" for b in row["host_peak_bytes"])
        where = f"{row['schedule']} pp{row['pp']}" + (f"v{row['vpp']}" if row["vpp"] > 1 else "")
        print(
            f"{where:<12} {row['variant']:<20} {row['step_seconds'] * 1e3:>8.1f} {row['step_ratio']:>7.2f} "
            f"{device:>30} {host:>24} {row['max_abs_memory_error']:>6.1%}"
        )
    print("host KiB: the offloads' host store; on CPU one allocator, so the device / host split is an emulation")
    ok = all(row["pass"] for row in rows)
    report = {
        "python": platform.python_version(),
        "paddle": paddle.__version__,
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "seconds": time.perf_counter() - started,
        "microbatches": args.microbatches,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "host_store": "emulated on CPU (one allocator; bytes counted by the job that allocated them)",
        "targets": {"memory_error": TARGET_MEMORY_ERROR, "parameter_difference": TARGET_PARAMETER_DIFFERENCE},
        "rows": rows,
        "pass": ok,
    }
    print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
