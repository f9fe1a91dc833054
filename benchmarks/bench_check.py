"""How fast and how lean is `ppdsl check`?  Four measurements, each against a target.

1. Side by side with PyTorch pipelining (same process, alternating runs): interleaved 1F1B at pp=16, vpp=2,
   microbatches=256.  ppdsl: ``load`` + ``expand`` + ``check_expansion``; torch:
   ``get_schedule_ops(..., with_comms=True)`` + ``_simulate_comms_compute`` (via ``torch_reference``).
   Target: ppdsl (load included) at least 20x faster.  Also checks that both give the same compute order.
2. Scale: pp=64, vpp=2, microbatches=1024 (262,144 compute jobs), expand + full check in a fresh subprocess.
   Targets: under 2 s, and under 1 GB peak memory (``ru_maxrss`` over a subprocess that only imports ppdsl).
3. Growth: time of expand + check against job count; the log-log slope must stay near 1 (linear).
4. Start-up: wall time of ``ppdsl check schedules/1f1b.sched --pp 4 -m 8``.  Target: under 0.5 s.
5. A long file: ``ppdsl check`` and ``ppdsl compile`` of 10,000 and 40,000 ``let`` statements, each in a fresh
   process.  Targets at 40,000: check under 2 s, compile under 4 s (wall; CPU time too, which other load on the
   machine does not inflate), and 40,000 / 10,000 near 4 (linear; at most 5).
6. Refusals: ``trace``, ``expand``, ``show``, ``plot``, ``sweep`` and ``synth`` at sizes over their budgets
   (E068, exit 2).  Target: each answers in under 1 s.

Run ``python benchmarks/bench_check.py`` (``--quick`` for a smaller run).  A table goes to stdout, and the last
line of stdout is one JSON object with every figure.  Progress notes go to stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEDULES = ROOT / "schedules"
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from ppdsl.analysis.check import check_expansion  # noqa: E402
from ppdsl.analysis.expand import expand  # noqa: E402
from ppdsl.language.resolve import load  # noqa: E402
from ppdsl.plan.kinds import COMPUTE_TYPES  # noqa: E402
from ppdsl.reports.formats import torch_actions  # noqa: E402

INTERLEAVED = SCHEDULES / "interleaved1f1b.sched"

TARGET_RATIO = 20.0  # torch seconds / ppdsl seconds (load included), at least
TARGET_SCALE_SECONDS = 2.0  # expand + check at pp=64 vpp=2 m=1024, under
TARGET_SCALE_BYTES = 1 << 30  # peak memory increase, under
TARGET_SLOPE = 1.15  # log-log slope of time against jobs, at most
TARGET_STARTUP_SECONDS = 0.5  # `ppdsl check` wall time (best of runs), under
LONG_STATEMENTS = (10_000, 40_000)
TARGET_LONG_CHECK_SECONDS = 2.0  # `ppdsl check` of 40,000 statements, under
TARGET_LONG_COMPILE_SECONDS = 4.0  # `ppdsl compile` of 40,000 statements, under
TARGET_LONG_RATIO = 5.0  # time at 40,000 / time at 10,000, at most (4 is linear)
TARGET_REFUSAL_SECONDS = 1.0  # each refused-up-front answer, under
REFUSALS = (
    ("trace", "fthenb", "--pp", "64", "-m", "16384", "-o", "{tmp}/big.json"),
    ("expand", "fthenb", "--pp", "64", "-m", "16384", "-o", "{tmp}/big.json"),
    ("show", "fthenb", "--pp", "64", "-m", "16384"),
    ("plot", "fthenb", "--pp", "64", "-m", "16384", "-o", "{tmp}/big.png"),
    ("sweep", "1f1b", "--pp", "2..1024", "-m", "8..65536"),
    ("synth", "--pp", "512", "-m", "512", "--time-limit", "1", "-o", "{tmp}/big.sched"),
)

MiB = 1 << 20


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _clear_parser_cache() -> None:
    """Forget the in-process lark parser so the next ``load`` builds it again, as a fresh process would."""
    from ppdsl.language import parser

    clear = getattr(getattr(parser, "_parser", None), "cache_clear", None)
    if clear is not None:
        clear()


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def _compute_jobs(exp) -> int:
    names = exp.type_names
    compute = {t for t, name in enumerate(names) if name in COMPUTE_TYPES}
    return sum(1 for jobs in exp.jobs for t in exp.codec.types_of(jobs) if t in compute)


def _ppdsl_run(path: Path, pp: int, vpp: int, m: int, with_load: bool, defn=None) -> dict[str, Any]:
    """One load (optional) + expand + check_expansion, timed part by part; asserts the schedule is valid."""
    gc.collect()
    t0 = time.perf_counter()
    if with_load:
        _clear_parser_cache()
        defn = load(path)
    t1 = time.perf_counter()
    exp = expand(defn, pp, m, vpp)
    t2 = time.perf_counter()
    result = check_expansion(exp)
    t3 = time.perf_counter()
    assert result.valid, [d.message for d in result.diagnostics]
    return {
        "total": t3 - t0,
        "load": t1 - t0,
        "expand": t2 - t1,
        "check": t3 - t2,
        "defn": defn,
        "exp": exp,
        "result": result,
    }


# --------------------------------------------------------------------------------------------------------------
# 1. side by side with torch
# --------------------------------------------------------------------------------------------------------------


def _torch_available() -> str | None:
    """Why torch pipelining cannot be used, or None if it can."""
    try:
        import torch
        import torch.distributed.pipelining._schedule_visualizer
        import torch.distributed.pipelining.schedules  # noqa: F401
    except Exception as err:  # ImportError, or a broken install
        return f"{type(err).__name__}: {err}"
    return None


def bench_torch(pp: int, vpp: int, m: int, torch_repeats: int, ppdsl_repeats: int) -> dict[str, Any]:
    import torch
    import torch_reference as tr

    def torch_run() -> dict[str, Any]:
        gc.collect()
        t0 = time.perf_counter()
        ops = tr.torch_interleaved_ops(pp, vpp, m, with_comms=True)
        t1 = time.perf_counter()
        simulated = tr.torch_simulate(ops)
        t2 = time.perf_counter()
        return {"total": t2 - t0, "ops": t1 - t0, "simulate": t2 - t1, "ops_list": ops, "simulated": simulated}

    torch_runs: list[dict[str, Any]] = []
    cold_runs: list[dict[str, Any]] = []
    warm_runs: list[dict[str, Any]] = []
    defn = load(INTERLEAVED)
    # Alternate the two sides so that machine noise falls on both.
    for i in range(max(torch_repeats, ppdsl_repeats)):
        if i < ppdsl_repeats:
            _progress(f"  [1] ppdsl run {i + 1}/{ppdsl_repeats}")
            cold_runs.append(_ppdsl_run(INTERLEAVED, pp, vpp, m, with_load=True))
            warm_runs.append(_ppdsl_run(INTERLEAVED, pp, vpp, m, with_load=False, defn=defn))
        if i < torch_repeats:
            _progress(f"  [1] torch run {i + 1}/{torch_repeats}")
            torch_runs.append(torch_run())

    # Compute orders: ppdsl's torch-named actions against torch's compute-only order with idle steps dropped,
    # and against the compute actions of the lowered (with comms) schedule that was timed.
    ours = torch_actions(cold_runs[-1]["exp"])
    plain = tr.torch_interleaved_ops(pp, vpp, m, with_comms=False)
    theirs = [[str(a) for a in actions if a is not None] for actions in plain]
    lowered = [[str(a) for a in actions if a is not None and a.is_compute_op] for actions in torch_runs[-1]["ops_list"]]
    first_diff = None
    if ours != theirs:
        for rank, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            if a != b:
                step = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
                first_diff = {"rank": rank, "step": step, "ppdsl": a[step : step + 3], "torch": b[step : step + 3]}
                break
        else:
            first_diff = {"ranks": [len(ours), len(theirs)]}

    best_torch = min(torch_runs, key=lambda r: r["total"])
    t_torch = best_torch["total"]
    t_cold = min(r["total"] for r in cold_runs)
    t_warm = min(r["total"] for r in warm_runs)
    last_ops = torch_runs[-1]["ops_list"]
    return {
        "torch_version": torch.__version__,
        "schedule": "Interleaved1F1B",
        "pp": pp,
        "vpp": vpp,
        "microbatches": m,
        "torch_repeats": torch_repeats,
        "ppdsl_repeats": ppdsl_repeats,
        "torch_seconds": t_torch,
        "torch_ops_seconds": best_torch["ops"],
        "torch_simulate_seconds": best_torch["simulate"],
        "torch_all_seconds": [r["total"] for r in torch_runs],
        "torch_compute_actions": tr.count_compute_actions(last_ops),
        "torch_lowered_actions": sum(len(a) for a in last_ops),
        "torch_simulated_steps": tr.simulated_steps(torch_runs[-1]["simulated"]),
        "ppdsl_with_load_seconds": t_cold,
        "ppdsl_without_load_seconds": t_warm,
        "ppdsl_load_seconds": min(r["load"] for r in cold_runs),
        "ppdsl_expand_seconds": min(r["expand"] for r in warm_runs),
        "ppdsl_check_seconds": min(r["check"] for r in warm_runs),
        "ppdsl_with_load_all_seconds": [r["total"] for r in cold_runs],
        "ppdsl_compute_jobs": _compute_jobs(cold_runs[-1]["exp"]),
        "ppdsl_valid": all(r["result"].valid for r in cold_runs + warm_runs),
        "ppdsl_makespan": cold_runs[-1]["result"].execution.makespan,
        "ratio": t_torch / t_cold,
        "ratio_without_load": t_torch / t_warm,
        "ratio_target": TARGET_RATIO,
        "ratio_pass": t_torch / t_cold >= TARGET_RATIO,
        "compute_order_match": ours == theirs,
        "lowered_compute_order_match": ours == lowered,
        "compute_order_first_difference": first_diff,
    }


# --------------------------------------------------------------------------------------------------------------
# 2. scale, in a fresh subprocess
# --------------------------------------------------------------------------------------------------------------

# Runs in a fresh interpreter: imports only ppdsl (and the standard library), so that ru_maxrss is ppdsl's own.
_CHILD = r"""
import gc, json, resource, sys, time
from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.plan.kinds import COMPUTE_TYPES
from ppdsl.language.resolve import load

def maxrss():
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024

def hwm():  # Linux: peak RSS of this process's own address space, from /proc
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None

mode, path, pp, vpp, m, repeats = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
out = {"mode": mode, "imported_maxrss_bytes": maxrss(), "imported_vmhwm_bytes": hwm()}
if mode == "tracemalloc":
    import tracemalloc
    tracemalloc.start()
if mode != "baseline":
    t0 = time.perf_counter()
    defn = load(path)
    t1 = time.perf_counter()
    exp = expand(defn, pp, m, vpp)
    t2 = time.perf_counter()
    result = check_expansion(exp)
    t3 = time.perf_counter()
    if mode == "tracemalloc":
        out["tracemalloc_peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    out["maxrss_bytes"] = maxrss()
    out["vmhwm_bytes"] = hwm()
    out["valid"] = result.valid
    out["diagnostics"] = [d.message for d in result.diagnostics]
    out["load_seconds"] = t1 - t0
    out["expand_seconds"] = t2 - t1
    out["check_seconds"] = t3 - t2
    out["first_seconds"] = t3 - t1
    names = exp.type_names
    compute = {t for t, name in enumerate(names) if name in COMPUTE_TYPES}
    out["jobs"] = sum(len(j) for j in exp.jobs)
    out["compute_jobs"] = sum(1 for j in exp.jobs for t in exp.codec.types_of(j) if t in compute)
    times = [t3 - t1]
    for _ in range(repeats - 1):
        del exp, result
        gc.collect()
        t1 = time.perf_counter()
        exp = expand(defn, pp, m, vpp)
        result = check_expansion(exp)
        times.append(time.perf_counter() - t1)
        assert result.valid
    out["all_seconds"] = times
    out["best_seconds"] = min(times)
    out["maxrss_after_repeats_bytes"] = maxrss()
print(json.dumps(out))
"""


_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def _child(mode: str, pp: int, vpp: int, m: int, repeats: int = 1) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    # Not started directly: on Linux a child's ru_maxrss starts at its parent's peak RSS (it is kept across
    # fork/vfork + exec), and this process holds torch.  A small launcher process in between resets it to the
    # launcher's own few MiB, below what the child reaches by importing ppdsl.
    sizes = [str(pp), str(vpp), str(m), str(repeats)]
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, sys.executable, "-c", _CHILD, mode, str(INTERLEAVED), *sizes],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} subprocess failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_scale(pp: int, vpp: int, m: int, repeats: int, with_tracemalloc: bool) -> dict[str, Any]:
    _progress("  [2] baseline subprocess (imports ppdsl only)")
    base = _child("baseline", pp, vpp, m)
    _progress(f"  [2] pp={pp} vpp={vpp} m={m} subprocess ({repeats} run(s))")
    run = _child("measure", pp, vpp, m, repeats)
    if not run["valid"]:
        raise AssertionError(f"pp={pp} vpp={vpp} m={m} is not valid: {run['diagnostics']}")
    peak = None
    if with_tracemalloc:
        _progress("  [2] same under tracemalloc (separate subprocess, not timed)")
        peak = _child("tracemalloc", pp, vpp, m)["tracemalloc_peak_bytes"]
    increase = run["maxrss_bytes"] - base["imported_maxrss_bytes"]
    seconds = run["first_seconds"]
    return {
        "pp": pp,
        "vpp": vpp,
        "microbatches": m,
        "jobs": run["jobs"],
        "compute_jobs": run["compute_jobs"],
        "valid": run["valid"],
        "seconds": seconds,
        "best_seconds": run["best_seconds"],
        "all_seconds": run["all_seconds"],
        "load_seconds": run["load_seconds"],
        "expand_seconds": run["expand_seconds"],
        "check_seconds": run["check_seconds"],
        "seconds_target": TARGET_SCALE_SECONDS,
        "seconds_pass": seconds < TARGET_SCALE_SECONDS,
        "baseline_maxrss_bytes": base["imported_maxrss_bytes"],
        "maxrss_bytes": run["maxrss_bytes"],
        "maxrss_increase_bytes": increase,
        "maxrss_in_process_increase_bytes": run["maxrss_bytes"] - run["imported_maxrss_bytes"],
        "maxrss_after_repeats_bytes": run["maxrss_after_repeats_bytes"],
        "baseline_vmhwm_bytes": base["imported_vmhwm_bytes"],
        "vmhwm_bytes": run["vmhwm_bytes"],
        "vmhwm_increase_bytes": None
        if run["vmhwm_bytes"] is None or base["imported_vmhwm_bytes"] is None
        else run["vmhwm_bytes"] - base["imported_vmhwm_bytes"],
        "tracemalloc_peak_bytes": peak,
        "memory_target_bytes": TARGET_SCALE_BYTES,
        "memory_pass": increase < TARGET_SCALE_BYTES,
    }


# --------------------------------------------------------------------------------------------------------------
# 3. growth
# --------------------------------------------------------------------------------------------------------------


def _loglog_slope(xs: list[float], ys: list[float]) -> float:
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def bench_growth(pp: int, vpp: int, sizes: list[int], repeats: int) -> dict[str, Any]:
    defn = load(INTERLEAVED)
    rows = []
    for m in sizes:
        _progress(f"  [3] pp={pp} vpp={vpp} m={m}")
        runs = [_ppdsl_run(INTERLEAVED, pp, vpp, m, with_load=False, defn=defn) for _ in range(repeats)]
        jobs = _compute_jobs(runs[0]["exp"])
        seconds = min(r["total"] for r in runs)
        rows.append({"microbatches": m, "compute_jobs": jobs, "seconds": seconds, "seconds_per_job": seconds / jobs})
        del runs
    slope = _loglog_slope([r["compute_jobs"] for r in rows], [r["seconds"] for r in rows])
    per_job = [r["seconds_per_job"] for r in rows]
    return {
        "pp": pp,
        "vpp": vpp,
        "repeats": repeats,
        "rows": rows,
        "total_seconds": sum(r["seconds"] for r in rows),
        "slope": slope,
        "slope_target": TARGET_SLOPE,
        "slope_pass": slope <= TARGET_SLOPE,
        "seconds_per_job_max_over_min": max(per_job) / min(per_job),
    }


# --------------------------------------------------------------------------------------------------------------
# 4. start-up
# --------------------------------------------------------------------------------------------------------------


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return seconds


def bench_startup(runs: int) -> dict[str, Any]:
    exe = shutil.which("ppdsl")
    args = ["check", "schedules/1f1b.sched", "--pp", "4", "-m", "8"]
    cmd = [exe, *args] if exe else [sys.executable, "-m", "ppdsl.cli", *args]
    times = []
    for i in range(runs):
        _progress(f"  [4] {' '.join(cmd)}  ({i + 1}/{runs})")
        times.append(_wall(cmd))
    python_times = [_wall([sys.executable, "-c", "pass"]) for _ in range(runs)]
    best = min(times)
    return {
        "command": " ".join(["ppdsl" if exe else f"{sys.executable} -m ppdsl.cli", *args]),
        "executable": exe or sys.executable,
        "runs": runs,
        "all_seconds": times,
        "best_seconds": best,
        "median_seconds": statistics.median(times),
        "python_startup_best_seconds": min(python_times),
        "target_seconds": TARGET_STARTUP_SECONDS,
        "pass": best < TARGET_STARTUP_SECONDS,
    }


def _ppdsl_cmd(*args: str) -> list[str]:
    exe = shutil.which("ppdsl")
    return [exe, *args] if exe else [sys.executable, "-m", "ppdsl.cli", *args]


def _timed_process(cmd: list[str], expect: int = 0) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of a fresh process running `cmd`; it must exit `expect`."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != expect:
        raise RuntimeError(f"`{' '.join(cmd)}` exited {proc.returncode}, not {expect}:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def long_file(statements: int) -> str:
    """A valid schedule whose order is `statements` `let`s, each using the one before (issue 15's probe)."""
    lets = ["    let a0 = 1", *(f"    let a{i} = a{i - 1} + 1" for i in range(1, statements))]
    return "\n".join(
        [
            "param n = 1",
            "order {",
            *lets,
            "    forward * microbatches",
            "    backward * microbatches",
            "    optimizer",
            "}",
            "",
        ]
    )


def bench_long(runs: int) -> dict[str, Any]:
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in LONG_STATEMENTS:
            path = Path(tmp) / f"long{n}.sched"
            path.write_text(long_file(n), encoding="utf-8")
            row: dict[str, Any] = {"statements": n, "bytes": path.stat().st_size}
            for what, args in (
                ("check", ["check", str(path), "--pp", "2", "-m", "4"]),
                ("compile", ["compile", str(path), "-o", str(Path(tmp) / f"plan{n}.py")]),
            ):
                _progress(f"  [5] {what} of {n:,} statements ({runs} runs)")
                times = [_timed_process(_ppdsl_cmd(*args)) for _ in range(runs)]
                row[f"{what}_seconds"] = min(w for w, _ in times)
                row[f"{what}_cpu_seconds"] = min(c for _, c in times)
            rows.append(row)
    small, large = rows[0], rows[-1]
    ratio = {w: large[f"{w}_cpu_seconds"] / small[f"{w}_cpu_seconds"] for w in ("check", "compile")}
    return {
        "rows": rows,
        "ratio_cpu": ratio,
        "check_pass": large["check_seconds"] < TARGET_LONG_CHECK_SECONDS,
        "compile_pass": large["compile_seconds"] < TARGET_LONG_COMPILE_SECONDS,
        "ratio_pass": max(ratio.values()) <= TARGET_LONG_RATIO,
    }


def bench_refusals() -> dict[str, Any]:
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for args in REFUSALS:
            args = tuple(a.format(tmp=tmp) for a in args)
            _progress(f"  [6] ppdsl {' '.join(args)}")
            wall, cpu = _timed_process(_ppdsl_cmd(*args), expect=2)
            rows.append({"command": "ppdsl " + " ".join(args), "seconds": wall, "cpu_seconds": cpu})
    return {"rows": rows, "pass": all(r["seconds"] < TARGET_REFUSAL_SECONDS for r in rows)}


# --------------------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "[bold green]PASS[/]" if ok else "[bold red]FAIL[/]"


def _s(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.3f} s"


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / MiB:.1f} MiB"


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
    table = Table(title="ppdsl check benchmark", title_justify="left", show_lines=False)
    for name, justify in (("part", "left"), ("measure", "left"), ("value", "right"), ("target", "right")):
        table.add_column(name, justify=justify)
    table.add_column("", justify="center")

    t = report["torch"]
    if t is None:
        table.add_row("1 vs torch", f"skipped: {report['torch_skipped']}", "", "", "")
    else:
        part = f"1 vs torch pp={t['pp']} vpp={t['vpp']} m={t['microbatches']}"
        table.add_row(
            part, f"torch get_schedule_ops+simulate (best of {t['torch_repeats']})", _s(t["torch_seconds"]), "", ""
        )
        table.add_row("", "  of which get_schedule_ops(with_comms)", _s(t["torch_ops_seconds"]), "", "")
        table.add_row("", "  of which _simulate_comms_compute", _s(t["torch_simulate_seconds"]), "", "")
        table.add_row(
            "", f"ppdsl load+expand+check (best of {t['ppdsl_repeats']})", _s(t["ppdsl_with_load_seconds"]), "", ""
        )
        table.add_row("", "  load (parser built afresh)", _s(t["ppdsl_load_seconds"]), "", "")
        table.add_row("", "ppdsl expand+check (no load)", _s(t["ppdsl_without_load_seconds"]), "", "")
        table.add_row(
            "", "  expand / check", f"{_s(t['ppdsl_expand_seconds'])} / {_s(t['ppdsl_check_seconds'])}", "", ""
        )
        table.add_row(
            "",
            "speed-up torch / ppdsl (with load)",
            f"{t['ratio']:.1f}x",
            f">= {TARGET_RATIO:g}x",
            _verdict(t["ratio_pass"]),
        )
        table.add_row("", "speed-up torch / ppdsl (without load)", f"{t['ratio_without_load']:.1f}x", "", "")
        table.add_row(
            "",
            f"compute order == torch's ({t['ppdsl_compute_jobs']:,} jobs)",
            str(t["compute_order_match"] and t["lowered_compute_order_match"]),
            "True",
            _verdict(t["compute_order_match"] and t["lowered_compute_order_match"]),
        )
    table.add_section()

    s = report["scale"]
    part = f"2 scale pp={s['pp']} vpp={s['vpp']} m={s['microbatches']}"
    table.add_row(
        part,
        f"expand+check, {s['compute_jobs']:,} compute jobs (fresh process)",
        _s(s["seconds"]),
        f"< {_s(TARGET_SCALE_SECONDS)}",
        _verdict(s["seconds_pass"]),
    )
    if len(s["all_seconds"]) > 1:
        table.add_row("", f"  best of {len(s['all_seconds'])} in that process", _s(s["best_seconds"]), "", "")
    table.add_row("", "  expand / check", f"{_s(s['expand_seconds'])} / {_s(s['check_seconds'])}", "", "")
    table.add_row(
        "",
        "peak RSS increase over import-only process",
        _mib(s["maxrss_increase_bytes"]),
        f"< {_mib(TARGET_SCALE_BYTES)}",
        _verdict(s["memory_pass"]),
    )
    table.add_row(
        "",
        "peak RSS absolute / import-only baseline",
        f"{_mib(s['maxrss_bytes'])} / {_mib(s['baseline_maxrss_bytes'])}",
        "",
        "",
    )
    if s["vmhwm_increase_bytes"] is not None:
        table.add_row("", "  same from /proc VmHWM (increase)", _mib(s["vmhwm_increase_bytes"]), "", "")
    table.add_row("", "tracemalloc peak (load+expand+check)", _mib(s["tracemalloc_peak_bytes"]), "", "")
    table.add_section()

    g = report["growth"]
    part = f"3 growth pp={g['pp']} vpp={g['vpp']}"
    for i, row in enumerate(g["rows"]):
        table.add_row(
            part if i == 0 else "",
            f"m={row['microbatches']:>5}  {row['compute_jobs']:>9,} jobs",
            f"{_s(row['seconds'])}  {row['seconds_per_job'] * 1e6:.2f} µs/job",
            "",
            "",
        )
    table.add_row(
        "", "log-log slope of time vs jobs", f"{g['slope']:.3f}", f"<= {TARGET_SLOPE:g}", _verdict(g["slope_pass"])
    )
    table.add_section()

    u = report["startup"]
    table.add_row(
        f"4 start-up ({u['runs']} runs)",
        f"`{u['command']}` best",
        _s(u["best_seconds"]),
        f"< {_s(TARGET_STARTUP_SECONDS)}",
        _verdict(u["pass"]),
    )
    table.add_row("", "  median", _s(u["median_seconds"]), "", "")
    table.add_row("", "  bare `python -c pass` best, for scale", _s(u["python_startup_best_seconds"]), "", "")
    table.add_section()

    lf = report["long"]
    for i, row in enumerate(lf["rows"]):
        last = i == len(lf["rows"]) - 1
        for what, target in (("check", TARGET_LONG_CHECK_SECONDS), ("compile", TARGET_LONG_COMPILE_SECONDS)):
            table.add_row(
                "5 long file" if i == 0 and what == "check" else "",
                f"{what} {row['statements']:,} statements ({row['bytes'] // 1024} KiB), wall / CPU",
                f"{_s(row[f'{what}_seconds'])} / {_s(row[f'{what}_cpu_seconds'])}",
                f"< {_s(target)}" if last else "",
                _verdict(lf[f"{what}_pass"]) if last else "",
            )
    for what, value in lf["ratio_cpu"].items():
        table.add_row(
            "",
            f"{what} CPU 40k / 10k",
            f"{value:.2f}x",
            f"<= {TARGET_LONG_RATIO:g}x",
            _verdict(value <= TARGET_LONG_RATIO),
        )
    table.add_section()

    rf = report["refusals"]
    for i, row in enumerate(rf["rows"]):
        table.add_row(
            "6 refusals (E068)" if i == 0 else "",
            row["command"].replace(str(ROOT), "."),
            _s(row["seconds"]),
            f"< {_s(TARGET_REFUSAL_SECONDS)}",
            _verdict(row["seconds"] < TARGET_REFUSAL_SECONDS),
        )

    console.print(table)
    verdict = (
        "all targets met"
        if report["all_pass"]
        else "some targets missed: " + ", ".join(k for k, v in report["targets"].items() if v is False)
    )
    console.print(verdict, style="bold green" if report["all_pass"] else "bold red")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a smaller growth series")
    parser.add_argument("--no-torch", action="store_true", help="skip part 1 (the torch comparison)")
    parser.add_argument("--no-tracemalloc", action="store_true", help="skip the tracemalloc run of part 2")
    parser.add_argument("--torch-repeats", type=int, help="torch runs in part 1 (default 3, quick 1)")
    parser.add_argument("--ppdsl-repeats", type=int, help="ppdsl runs in part 1 (default 5, quick 2)")
    parser.add_argument("--growth-pp", type=int, help="pp of the growth series (default 64, quick 16)")
    args = parser.parse_args(argv)

    quick = args.quick
    torch_repeats = args.torch_repeats or (1 if quick else 3)
    ppdsl_repeats = args.ppdsl_repeats or (2 if quick else 5)
    growth_pp = args.growth_pp or (16 if quick else 64)
    growth_sizes = [64, 128, 256, 512, 1024] if quick else [64, 128, 256, 512, 1024, 2048, 4096]

    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "quick": quick,
        "torch": None,
        "torch_skipped": None,
    }

    why = "--no-torch given" if args.no_torch else _torch_available()
    if why is None:
        _progress("[1] ppdsl vs torch, interleaved 1F1B pp=16 vpp=2 m=256")
        report["torch"] = bench_torch(16, 2, 256, torch_repeats, ppdsl_repeats)
    else:
        _progress(f"[1] skipped: torch pipelining unavailable ({why})")
        report["torch_skipped"] = why

    _progress("[2] scale: pp=64 vpp=2 m=1024")
    report["scale"] = bench_scale(64, 2, 1024, 1 if quick else 3, not (quick or args.no_tracemalloc))

    _progress(f"[3] growth: pp={growth_pp} vpp=2 m={growth_sizes}")
    report["growth"] = bench_growth(growth_pp, 2, growth_sizes, 1 if quick else 3)

    _progress("[4] start-up")
    report["startup"] = bench_startup(3 if quick else 5)

    _progress(f"[5] long file: {LONG_STATEMENTS} statements")
    report["long"] = bench_long(1 if quick else 3)

    _progress("[6] refusals over budget")
    report["refusals"] = bench_refusals()

    t = report["torch"]
    report["targets"] = {
        "ratio": None if t is None else t["ratio_pass"],
        "compute_order_match": None if t is None else t["compute_order_match"] and t["lowered_compute_order_match"],
        "scale_seconds": report["scale"]["seconds_pass"],
        "scale_memory": report["scale"]["memory_pass"],
        "growth_slope": report["growth"]["slope_pass"],
        "startup": report["startup"]["pass"],
        "long_check": report["long"]["check_pass"],
        "long_compile": report["long"]["compile_pass"],
        "long_linear": report["long"]["ratio_pass"],
        "refusals": report["refusals"]["pass"],
    }
    report["all_pass"] = all(v is not False for v in report["targets"].values())

    print_report(report)
    print(json.dumps(report), flush=True)
    return 0 if report["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
