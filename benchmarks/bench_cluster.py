"""One process per rank on this machine: how fast is it, where does the time go, and does the simulator predict it?

For each case (1F1B at pp=2 and pp=4, VPP with vpp=2 at pp=2; one node, ``--nproc-per-node pp``):

1. **Emulated**: the single-process pipeline (``PipelineTrainer``: every rank's jobs in one process, Paddle's
   standalone executor with the plan), same schedule, model, batch, optimizer and initial state.  Its last
   ``--profile-steps`` steps run under Paddle's host profiler (``train(..., profile_steps=)``) and give every job's
   measured cost; its other steps give the step time (median, first step skipped).
2. **Processes**: ``python -m ppdsl.cli run FILE --nproc-per-node pp --resume INIT`` (paddle.distributed.launch,
   gloo between processes), from the emulation's initial checkpoint.  Step time = the slowest rank per step
   (``rank<r>.json`` ``step_seconds``), median over the steps after the first.  The worker's instrumentation
   (``timing`` in ``rank<r>.json``) splits each rank's step into compute (``Executor.run``), waiting for inputs and
   the rest, and times every tensor on every link: the sender's gloo send call, and hand-off -> arrival (the
   sender's main thread hands the tensor to its sender thread; the receiver's gloo recv returns), counted only when
   the receiver was already waiting (its recv was posted before the hand-off), so it is the link, not the receiver.
   Bytes per tensor; ``comm_seconds`` / tensors sent (the sender threads' time per tensor).  Check: the processes'
   losses equal the emulation's.
3. **Prediction** (the 25% target): the simulator fed the costs measured in the multi-process run (each job's mean
   duration per stage and type inside its process, the link latency as the median hand-off -> arrival time)
   predicts that run's step (``expand`` with its costs + ``simulate_expansion``): the schedule, the waiting and the
   links are the simulator's. Reported beside it, without a target: the same prediction from the single-process
   emulation's profile (``calibrate``), i.e. costs carried over from another runtime (one plan in one executor
   against one ``Executor.run`` per job here); with more processes than cores (pp=4 on 2 cores) those costs are
   also shown scaled by processes / cores (time slicing) and unscaled (pp devices).

Model: the built-in tiny_mlp at a size where compute matters (``--hidden 64 --seq-len 32 --layers 8``, batch 64 =
8 micro-batches of 8; the CLI's built-in config is smaller, so the processes get it as ``--model`` from a module
written to a temporary directory on PYTHONPATH).  The processes import ppdsl from this checkout (PYTHONPATH).

Run ``python benchmarks/bench_cluster.py`` (``--quick`` for a shorter run).  A table goes to stdout, and the last
line of stdout is one JSON object with every figure.  Progress notes go to stderr.  Exit code 0 only if every
target and check passes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEDULES = ROOT / "schedules"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ppdsl.analysis.costs import CostSpec  # noqa: E402
from ppdsl.analysis.expand import expand  # noqa: E402
from ppdsl.language.resolve import load  # noqa: E402
from ppdsl.reports.calibrate import calibrate  # noqa: E402
from ppdsl.reports.simulate import simulate_expansion  # noqa: E402
from ppdsl.reports.trace import Profile  # noqa: E402

TARGET_ERROR = 0.25  # |simulated makespan - measured step| / measured step, like-for-like prediction
LOSS_TOLERANCE = 1e-4  # processes vs emulation, every step's per-micro-batch losses (Adam, float32)
MODEL_MODULE = "ppdsl_bench_cluster_model"
# (schedule, pp, vpp); microbatches from -m
CASES = [("1f1b", 2, 1), ("1f1b", 4, 1), ("vpp", 2, 2)]
QUICK_CASES = [("1f1b", 2, 1), ("1f1b", 4, 1)]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _write_model_module(directory: Path, args) -> None:
    """The built-in tiny_mlp at the benchmark's size, importable as MODEL_MODULE:build (with make_batch)."""
    text = f'''"""tiny_mlp at bench_cluster's size (written by benchmarks/bench_cluster.py)."""

from ppdsl.runtime.builtin_models import MLPConfig, synthetic_text, tiny_mlp

CONFIG = MLPConfig(vocab={args.vocab}, seq_len={args.seq_len}, hidden={args.hidden}, layers={args.layers})


def build(ctx):
    return tiny_mlp(ctx, CONFIG)


def make_batch(step, batch_size, seed):
    return synthetic_text(step, batch_size, seed, CONFIG.vocab, CONFIG.seq_len)
'''
    (directory / f"{MODEL_MODULE}.py").write_text(text)


# --------------------------------------------------------------------------------------------------------------
# 1. the single-process emulation: step times and a profile of every job
# --------------------------------------------------------------------------------------------------------------


def run_emulated(exp, model, args, init_dir: Path) -> dict[str, Any]:
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train

    config = TrainConfig(batch_size=args.batch_size, lr=args.lr, optimizer="adam", seed=args.seed)
    t0 = time.perf_counter()
    trainer = PipelineTrainer(exp, model, config)
    build_seconds = time.perf_counter() - t0
    trainer.save(init_dir)
    run = train(trainer, args.steps + args.profile_steps, profile_steps=args.profile_steps)
    timed = run.step_seconds[: args.steps]  # the profiled steps carry the profiler's overhead
    profile = Profile(run.profile or [], 1e6, {})  # job records are in seconds
    costs = calibrate(profile)
    jobs_per_step = sum(j.end - j.start for j in profile.jobs) / max(args.profile_steps, 1)
    messages = None
    try:  # tensors each link carries per step, from the plan the processes build too
        from ppdsl.runtime.cluster import communication_plan

        _, channels = communication_plan(trainer.spec, trainer.built.flow)
        messages = {
            f"{s}->{d}": {"messages": len(msgs), "tensors": sum(len(m.items) for m in msgs)}
            for (s, d), msgs in sorted(channels.items())
        }
    except Exception as err:  # only for the report
        _progress(f"    (no communication plan: {type(err).__name__}: {err})")
    return {
        "build_seconds": build_seconds,
        "step_seconds": timed,
        "median_seconds": statistics.median(timed[1:] or timed),
        "profiled_step_seconds": run.profiled_seconds / max(args.profile_steps, 1),
        "profiled_jobs_seconds_per_step": jobs_per_step,
        "jobs_per_step": run.jobs_per_step,
        "costs": costs,
        "losses": [[float(x) for x in step] for step in run.losses[: args.steps]],
        "links": messages,
    }


# --------------------------------------------------------------------------------------------------------------
# 2. one process per rank
# --------------------------------------------------------------------------------------------------------------


def run_processes(stem: str, exp, args, init_dir: Path, run_dir: Path, model_dir: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "ppdsl.cli",
        "run",
        str(SCHEDULES / f"{stem}.sched"),
        "--pp",
        str(exp.pp),
        "-m",
        str(exp.microbatches),
        "--vpp",
        str(exp.vpp),
        "--steps",
        str(args.steps),
        "--model",
        f"{MODEL_MODULE}:build",
        "--batch-size",
        str(args.batch_size),
        "--lr",
        str(args.lr),
        "--optimizer",
        "adam",
        "--seed",
        str(args.seed),
        "--nproc-per-node",
        str(exp.pp),
        "--run-dir",
        str(run_dir),
        "--comm-timeout",
        "120",
        "--resume",
        str(init_dir),
    ]
    path = os.pathsep.join([str(ROOT), str(model_dir), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "GLOG_minloglevel": "2"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        _progress(f"    the processes failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return {"ok": False, "exit_code": proc.returncode, "wall_seconds": wall, "stderr": proc.stderr[-2000:]}
    launch = max(run_dir.glob("launch-*"), key=lambda p: int(p.name.split("-")[1]))  # this launch's directory
    ranks = [json.loads((launch / f"rank{r}.json").read_text()) for r in range(exp.pp)]
    return {"ok": True, "wall_seconds": wall, "ranks": ranks}


def _decode(exp, rank: int, i: int) -> tuple[str, int]:
    """(job type, stage) of job i of `rank`."""
    t, c, _ = exp.decode(exp.jobs[rank][i])
    return exp.type_names[t], exp.stage_of[rank][c]


def analyse_processes(exp, ranks: list[dict], steps: int) -> dict[str, Any]:
    """Step times, per-rank compute / wait / other, per-job costs inside the processes, and every link's tensors."""
    slowest = [max(rep["step_seconds"][i] for rep in ranks) for i in range(steps)]
    steady = slowest[1:] or slowest
    # per step: the span from the first job any rank starts to the last job any rank ends
    spans = []
    for k in range(steps):
        first = min(rep["timing"]["jobs"][k][0][0] for rep in ranks)
        last = max(rep["timing"]["jobs"][k][-1][4] for rep in ranks)
        spans.append(last - first)
    per_rank = []
    job_cost: dict[tuple[int, str], list[float]] = defaultdict(list)  # (stage, type) -> end - start - wait
    run_cost: dict[str, list[float]] = defaultdict(list)  # type -> Executor.run alone
    waits_receiving: list[float] = []  # per job that waited at all for a peer's tensor
    for r, rep in enumerate(ranks):
        compute, wait, other = [], [], []
        for k, marks in enumerate(rep["timing"]["jobs"]):
            c = w = o = 0.0
            for i, (start, ready, run0, run1, end) in enumerate(marks):
                c += run1 - run0
                w += ready - start
                o += (end - start) - (ready - start) - (run1 - run0)
                if k >= 1:
                    kind, stage = _decode(exp, r, i)
                    job_cost[(stage, kind)].append(end - start - (ready - start))
                    run_cost[kind].append(run1 - run0)
                    if ready - start > 1e-4:
                        waits_receiving.append(ready - start)
            compute.append(c)
            wait.append(w)
            other.append(o)
        per_rank.append(
            {
                "rank": r,
                "median_step_seconds": statistics.median(rep["step_seconds"][1:] or rep["step_seconds"]),
                "compute_seconds": statistics.median(compute[1:] or compute),
                "wait_seconds": statistics.median(wait[1:] or wait),
                "other_seconds": statistics.median(other[1:] or other),
                "jobs": rep["jobs"],
                "bytes_sent": rep["bytes_sent"],
                "comm_seconds": rep["comm_seconds"],
            }
        )
    links = _links(ranks, steps)
    clean = [x for link in links.values() for x in link["clean_latencies"]]
    every = [x for link in links.values() for x in link["latencies"]]
    sends = [x for link in links.values() for x in link["send_calls"]]
    tensors_sent = sum(link["tensors"] for link in links.values())
    comm_total = sum(rep["comm_seconds"] for rep in ranks)
    return {
        "step_seconds": slowest,
        "median_seconds": statistics.median(steady),
        "span_seconds": spans,
        "median_span_seconds": statistics.median(spans[1:] or spans),
        "slowest_rank_per_step": [
            max(range(len(ranks)), key=lambda r, i=i: ranks[r]["step_seconds"][i]) for i in range(steps)
        ],
        "ranks": per_rank,
        "worker_costs": {
            "stages": {
                str(s): {t: statistics.fmean(v) for (s2, t), v in sorted(job_cost.items()) if s2 == s}
                for s in sorted({s for s, _ in job_cost})
            },
        },
        "worker_run_seconds_by_type": {t: statistics.mean(v) for t, v in sorted(run_cost.items())},
        "links": {k: {kk: vv for kk, vv in v.items() if not isinstance(vv, list)} for k, v in links.items()},
        "tensors_per_step": sum(link["tensors"] for link in links.values()) / steps,
        "bytes_per_tensor": _median([b for link in links.values() for b in link["bytes"]]),
        "send_call_median_seconds": _median(sends),
        "latency_median_seconds": _median(clean),
        "latency_mean_seconds": statistics.fmean(clean) if clean else None,
        "latency_clean_count": len(clean),
        "latency_all_median_seconds": _median(every),
        "comm_seconds_per_tensor": comm_total / tensors_sent if tensors_sent else None,
        "input_wait_median_seconds": _median(waits_receiving),
        "jobs_that_waited_per_step": len(waits_receiving) / max(steps - 1, 1),
    }


def _links(ranks: list[dict], steps: int) -> dict[str, dict[str, Any]]:
    """Per link `src->dst`, the tensors of the steps after the first: the sender's gloo send call, hand-off ->
    arrival, and whether the receiver was already waiting (its recv posted before the hand-off)."""
    out = {}
    for rep in ranks:
        src = rep["rank"]
        for link, handed in rep["timing"]["handed"].items():
            dst = int(link.split("->")[1])
            sent = rep["timing"]["wire"].get(link, [])
            received = ranks[dst]["timing"]["wire"].get(link, [])
            n = min(len(handed), len(sent), len(received))
            per_step = n // steps if steps else 0
            skip = per_step  # the first step's tensors
            latencies, clean, calls, sizes = [], [], [], []
            for i in range(skip, n):
                h, (s0, s1, nbytes), (r0, r1, _) = handed[i], sent[i], received[i]
                latencies.append(r1 - h)
                calls.append(s1 - s0)
                sizes.append(nbytes)
                if r0 <= h:
                    clean.append(r1 - h)
            out[link] = {
                "src": src,
                "dst": dst,
                "tensors": n,
                "tensors_per_step": per_step,
                "latencies": latencies,
                "clean_latencies": clean,
                "send_calls": calls,
                "bytes": sizes,
                "latency_median_seconds": _median(clean),
                "clean": len(clean),
                "send_call_median_seconds": _median(calls),
                "bytes_per_tensor": _median(sizes),
            }
    return out


# --------------------------------------------------------------------------------------------------------------
# 3. the simulator with measured costs
# --------------------------------------------------------------------------------------------------------------


def _scaled(costs: dict, factor: float) -> dict:
    return {
        **costs,
        "costs": {t: v * factor for t, v in costs.get("costs", {}).items()},
        "stages": {s: {t: v * factor for t, v in per.items()} for s, per in costs.get("stages", {}).items()},
    }


def simulate_with(stem: str, pp: int, m: int, vpp: int, costs: dict, latency: float) -> dict[str, Any]:
    exp = expand(load(SCHEDULES / f"{stem}.sched"), pp, m, vpp, costs=CostSpec(file={**costs, "latency": latency}))
    sim = simulate_expansion(exp)
    return {"makespan_seconds": sim.makespan, "bubble": sim.bubble_ratio}


def predictions(stem, exp, emulated, measured, cores: int) -> list[dict[str, Any]]:
    pp, m, vpp = exp.pp, exp.microbatches, exp.vpp
    latency = measured["latency_median_seconds"] or measured["latency_all_median_seconds"] or 0.0
    step = measured["median_seconds"]
    factor = max(1.0, pp / cores)
    rows = []

    def add(key: str, label: str, costs: dict, target: bool) -> None:
        sim = simulate_with(stem, pp, m, vpp, costs, latency)
        error = (sim["makespan_seconds"] - step) / step
        rows.append(
            {
                "key": key,
                "label": label,
                "makespan_seconds": sim["makespan_seconds"],
                "bubble": sim["bubble"],
                "latency_seconds": latency,
                "error": error,
                "target": target,
                "pass": abs(error) <= TARGET_ERROR if target else None,
            }
        )

    # the target: costs measured where the run happens (each job's duration in its process, the links' latency)
    add("measured", "job costs and link latency measured in the processes", measured["worker_costs"], True)
    # reported beside it: costs carried over from the single-process emulation, another runtime
    if factor == 1.0:
        add("emulated", f"emulation's job costs, {pp} processes on {cores} cores", emulated["costs"], False)
    else:
        add(
            "emulated_scaled",
            f"emulation's costs x {factor:g} ({pp} processes / {cores} cores)",
            _scaled(emulated["costs"], factor),
            False,
        )
        add(
            "emulated_unscaled",
            f"emulation's costs unscaled ({pp} devices; {cores} cores here)",
            emulated["costs"],
            False,
        )
    return rows


# --------------------------------------------------------------------------------------------------------------
# one case
# --------------------------------------------------------------------------------------------------------------


def bench_case(stem: str, pp: int, vpp: int, model, args, workdir: Path, cores: int) -> dict[str, Any]:
    exp = expand(load(SCHEDULES / f"{stem}.sched"), pp, args.microbatches, vpp)
    case_dir = workdir / f"{stem}-pp{pp}-vpp{vpp}"
    init_dir, run_dir = case_dir / "init", case_dir / "run"
    _progress(f"[{stem} pp={pp} vpp={vpp}] emulated: {args.steps} steps + {args.profile_steps} profiled")
    emulated = run_emulated(exp, model, args, init_dir)
    _progress(f"[{stem} pp={pp} vpp={vpp}] {pp} processes: {args.steps} steps")
    procs = run_processes(stem, exp, args, init_dir, run_dir, workdir)
    out: dict[str, Any] = {
        "schedule": exp.defn.name,
        "file": f"schedules/{stem}.sched",
        "pp": pp,
        "vpp": vpp,
        "microbatches": exp.microbatches,
        "processes": pp,
        "cores": cores,
        "oversubscribed": pp > cores,
        "emulated": {k: v for k, v in emulated.items() if k != "losses"},
        "processes_ok": procs["ok"],
        "launch_wall_seconds": procs["wall_seconds"],
    }
    if not procs["ok"]:
        out["error"] = procs.get("stderr")
        out["loss_pass"] = False
        out["predictions"] = []
        return out
    measured = analyse_processes(exp, procs["ranks"], args.steps)
    out["measured"] = measured
    out["speedup_vs_emulated"] = emulated["median_seconds"] / measured["median_seconds"]
    # the processes' losses (the rank holding the loss) against the emulation's, step by step
    lossy = next((rep["losses"] for rep in procs["ranks"] if rep["losses"]), None)
    diff = None
    if lossy is not None and len(lossy) == len(emulated["losses"]):
        diff = float(np.max(np.abs(np.array(lossy) - np.array(emulated["losses"]))))
    out["max_loss_diff"] = diff
    out["loss_pass"] = diff is not None and diff <= LOSS_TOLERANCE
    out["predictions"] = predictions(stem, exp, emulated, measured, cores)
    # the per-job cost inside the processes against the emulation's, by job type (forward / backward ...)
    emu = emulated["costs"]["costs"]
    out["worker_vs_emulated_job"] = {
        t: {"emulated_seconds": emu[t], "process_run_seconds": v, "ratio": v / emu[t] if emu[t] > 0 else None}
        for t, v in measured["worker_run_seconds_by_type"].items()
        if t in emu
    }
    return out


# --------------------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------------------


def _verdict(ok: bool | None) -> str:
    if ok is None:
        return ""
    return "[bold green]PASS[/]" if ok else "[bold red]FAIL[/]"


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.2f} ms" if seconds < 0.1 else f"{seconds * 1e3:.1f} ms"


def _case_rows(table, c: dict[str, Any]) -> None:
    head = f"{c['schedule']} pp={c['pp']} vpp={c['vpp']} m={c['microbatches']}"
    e = c["emulated"]
    table.add_row(head, "emulated, 1 process: median step", _ms(e["median_seconds"]), "", "")
    table.add_row(
        "",
        "  profiled step: jobs + executor gaps between them",
        f"{_ms(e['profiled_jobs_seconds_per_step'])} + "
        f"{_ms(max(0.0, e['profiled_step_seconds'] - e['profiled_jobs_seconds_per_step']))}",
    )
    if not c["processes_ok"]:
        table.add_row("", f"{c['processes']} processes", "[bold red]failed[/]", "", _verdict(False))
        table.add_section()
        return
    m = c["measured"]
    over = f" ({c['processes']} on {c['cores']} cores)" if c["oversubscribed"] else ""
    table.add_row(
        "",
        f"{c['processes']} processes{over}: median step, slowest rank",
        f"{_ms(m['median_seconds'])} ({c['speedup_vs_emulated']:.2f}x emulated)",
    )
    table.add_row("", "  span first start -> last end over ranks (median)", _ms(m["median_span_seconds"]))
    table.add_row(
        "",
        "  slowest rank, steps 1 ..",
        " ".join(str(r) for r in m["slowest_rank_per_step"][1:]),
    )
    for r in m["ranks"]:
        table.add_row(
            "",
            f"  rank {r['rank']}: compute / waiting for inputs / rest, per step",
            f"{_ms(r['compute_seconds'])} / {_ms(r['wait_seconds'])} / {_ms(r['other_seconds'])}",
        )
    for t, v in c["worker_vs_emulated_job"].items():
        if t in ("forward", "backward", "optimizer"):
            table.add_row(
                "",
                f"  {t}: Executor.run in the processes / emulated job",
                f"{_ms(v['process_run_seconds'])} / {_ms(v['emulated_seconds'])} ({v['ratio']:.1f}x)",
            )
    table.add_row(
        "",
        "  tensors per step, bytes per tensor",
        f"{m['tensors_per_step']:g}, {m['bytes_per_tensor'] / 1024:.0f} KiB" if m["bytes_per_tensor"] else "-",
    )
    table.add_row(
        "",
        "  per tensor: gloo send call / hand-off -> arrival (median)",
        f"{_ms(m['send_call_median_seconds'])} / {_ms(m['latency_median_seconds'])} (n={m['latency_clean_count']})",
    )
    table.add_row(
        "",
        "  per tensor: comm_seconds / tensors; input wait per waiting job",
        f"{_ms(m['comm_seconds_per_tensor'])}; {_ms(m['input_wait_median_seconds'])}",
    )
    table.add_row(
        "",
        "losses, processes vs emulated, max |diff|",
        "-" if c["max_loss_diff"] is None else f"{c['max_loss_diff']:.1e}",
        f"<= {LOSS_TOLERANCE:g}",
        _verdict(c["loss_pass"]),
    )
    for p in c["predictions"]:
        table.add_row(
            "",
            f"simulated: {p['label']}",
            f"{_ms(p['makespan_seconds'])} ({p['error']:+.0%})",
            f"±{TARGET_ERROR:.0%}" if p["target"] else "",
            _verdict(p["pass"]),
        )
    table.add_section()


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 150)
    table = Table(title="ppdsl cluster benchmark: one process per rank vs one process", title_justify="left")
    for name, justify in (("case", "left"), ("measure", "left"), ("value", "right"), ("target", "right")):
        table.add_column(name, justify=justify)
    table.add_column("", justify="center")
    for c in report["cases"]:
        _case_rows(table, c)
    console.print(table)
    cfg = report["config"]
    console.print(
        f"model: tiny_mlp hidden {cfg['hidden']}, layers {cfg['layers']}, seq {cfg['seq_len']}, vocab {cfg['vocab']}; "
        f"batch {cfg['batch_size']} = {cfg['microbatches']} micro-batches; Adam lr {cfg['lr']}; {cfg['steps']} steps "
        f"(first skipped), {cfg['profile_steps']} more profiled in the emulation. Errors: (simulated - measured) / "
        f"measured step. {report['cores']} cores; load average (1 min) before / after: "
        f"{report['loadavg_before'][0]:.1f} / {report['loadavg_after'][0]:.1f}; {report['total_seconds']:.0f} s"
    )
    verdict = (
        "all targets met"
        if report["all_pass"]
        else "some targets missed: " + ", ".join(k for k, v in report["targets"].items() if v is False)
    )
    console.print(verdict, style="bold green" if report["all_pass"] else "bold red")


def _json_ready(case: dict[str, Any]) -> dict[str, Any]:
    """Per-step lists rounded to the microsecond."""
    out = json.loads(json.dumps(case))
    for part in (out.get("emulated", {}), out.get("measured", {})):
        for key in ("step_seconds", "span_seconds"):
            if key in part:
                part[key] = [round(x, 6) for x in part[key]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps, and 1F1B only (no VPP case)")
    parser.add_argument("--steps", type=int, help="timed steps per run, the first skipped (default 12, quick 6)")
    parser.add_argument("--profile-steps", type=int, help="profiled emulated steps (default 3, quick 2)")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("-m", "--microbatches", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300, help="seconds per launch before giving up")
    parser.add_argument("--keep", type=Path, help="keep run directories (rank<r>.json, logs) under this directory")
    args = parser.parse_args(argv)
    args.steps = args.steps or (6 if args.quick else 12)
    args.profile_steps = args.profile_steps or (2 if args.quick else 3)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is skipped)")

    started = time.perf_counter()
    load_before = os.getloadavg()
    cores = _cores()
    workdir = Path(tempfile.mkdtemp(prefix="ppdsl-bench-cluster-"))
    try:
        _write_model_module(workdir, args)
        sys.path.insert(0, str(workdir))
        from ppdsl.runtime.builtin_models import load_model
        from ppdsl.runtime.env import import_paddle

        paddle = import_paddle()
        model = load_model(f"{MODEL_MODULE}:build")
        cases = []
        for stem, pp, vpp in QUICK_CASES if args.quick else CASES:
            cases.append(bench_case(stem, pp, vpp, model, args, workdir, cores))
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for case_dir in workdir.iterdir():
                if case_dir.is_dir() and not case_dir.name.startswith("__"):
                    shutil.copytree(case_dir, args.keep / case_dir.name, dirs_exist_ok=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    targets: dict[str, bool | None] = {}
    for c in cases:
        name = f"{c['file'].split('/')[-1].removesuffix('.sched')}_pp{c['pp']}"
        targets[f"processes_ran_{name}"] = c["processes_ok"]
        targets[f"losses_{name}"] = c["loss_pass"]
        for p in c["predictions"]:
            if p["target"]:
                targets[f"predict_{name}_{p['key']}"] = p["pass"]
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "paddle": paddle.__version__,
        "cpus": os.cpu_count(),
        "cores": cores,
        "quick": args.quick,
        "config": {
            "vocab": args.vocab,
            "hidden": args.hidden,
            "layers": args.layers,
            "seq_len": args.seq_len,
            "batch_size": args.batch_size,
            "microbatches": args.microbatches,
            "lr": args.lr,
            "seed": args.seed,
            "steps": args.steps,
            "profile_steps": args.profile_steps,
        },
        "target_error": TARGET_ERROR,
        "cases": [_json_ready(c) for c in cases],
        "targets": targets,
        "all_pass": all(v is not False for v in targets.values()),
        "total_seconds": time.perf_counter() - started,
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
    }
    print_report(report)
    print(json.dumps(report), flush=True)
    return 0 if report["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
