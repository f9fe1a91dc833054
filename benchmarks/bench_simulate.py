"""How fast is ppdsl's simulator?  Two measurements, each against a target, and the pictures' wall times.

1. Side by side with PyTorch pipelining on interleaved 1F1B, pp=16, vpp=2, m = 64, 128, 256 (same process,
   alternating runs, best of N).  torch's simulator has unit-time steps only; ppdsl's runs with costs
   (forward 1, backward 2) and links (latency 0.05, bandwidth 20, one send stream per rank) and logs every
   transfer, so it does more.
   * simulate alone: torch ``_simulate_comms_compute`` on the lowered schedule (built beforehand) against
     ppdsl ``execute(exp, record_comms=True)`` on the expansion (built beforehand).  Target: 10x.
   * with build: torch ``get_schedule_ops(with_comms=True)`` + simulate against ppdsl ``load`` (parser built
     afresh) + ``expand`` + costs + ``simulate_expansion`` (the full check: completeness, order, deadlock, and
     the timing, in one execution), as ``ppdsl trace`` / ``plot`` run.  Target: 10x.  Also shown with the
     grammar's parser already built (a once-per-process cost, like torch's import).
2. Scale: the same schedule at pp=64, vpp=2, m=1024 (262,144 compute jobs) with costs and links: load + expand +
   check + simulate in a fresh subprocess.  Targets: under 2 s, and under 1 GB peak memory (``ru_maxrss`` over
   a subprocess that only imports ppdsl).
3. Wall time of ``ppdsl trace`` and ``ppdsl plot`` on interleaved 1F1B pp=8 vpp=2 m=32 (for information).

Run ``python benchmarks/bench_simulate.py`` (``--quick`` for fewer repeats).  A table goes to stdout, and the last
line of stdout is one JSON object with every figure.  Progress notes go to stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from ppdsl.analysis.check import check_expansion  # noqa: E402
from ppdsl.analysis.costs import CostSpec  # noqa: E402
from ppdsl.analysis.execution import execute  # noqa: E402
from ppdsl.analysis.expand import expand  # noqa: E402
from ppdsl.language.resolve import load  # noqa: E402
from ppdsl.reports.simulate import simulate_expansion  # noqa: E402

INTERLEAVED = ROOT / "schedules" / "interleaved1f1b.sched"
COSTS = {"forward": 1.0, "backward": 2.0}
LINKS = {"latency": 0.05, "bandwidth": 20.0}

TARGET_RATIO = 10.0  # torch seconds / ppdsl seconds, at least (both comparisons)
TARGET_SCALE_SECONDS = 2.0
TARGET_SCALE_BYTES = 1 << 30
MiB = 1 << 20


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _clear_parser_cache() -> None:
    """Forget the in-process lark parser so the next ``load`` builds it again, as a fresh process would."""
    from ppdsl.language import parser

    clear = getattr(getattr(parser, "_parser", None), "cache_clear", None)
    if clear is not None:
        clear()


def _ppdsl_build_and_simulate(pp: int, vpp: int, m: int, cold: bool = True) -> tuple[float, Any]:
    """load + expand + costs + check and simulate (one execution, with the transfer log), as `ppdsl trace` and
    `ppdsl plot` do. `cold`: the grammar's parser is built afresh, as in a new process."""
    gc.collect()
    t0 = time.perf_counter()
    if cold:
        _clear_parser_cache()
    exp = expand(load(INTERLEAVED), pp, m, vpp, costs=CostSpec(file={"costs": COSTS, **LINKS}))
    sim = simulate_expansion(exp)  # raises if the schedule is not valid
    return time.perf_counter() - t0, sim.execution


def _ppdsl_simulate_only(exp) -> tuple[float, Any]:
    gc.collect()
    t0 = time.perf_counter()
    ex = execute(exp, record_comms=True)
    return time.perf_counter() - t0, ex


# --------------------------------------------------------------------------------------------------------------
# 1. side by side with torch
# --------------------------------------------------------------------------------------------------------------


def _torch_available() -> str | None:
    try:
        import torch.distributed.pipelining._schedule_visualizer
        import torch.distributed.pipelining.schedules  # noqa: F401
    except Exception as err:  # ImportError, or a broken install
        return f"{type(err).__name__}: {err}"
    return None


def bench_torch(pp: int, vpp: int, m: int, repeats: int) -> dict[str, Any]:
    import torch
    import torch_reference as tr

    exp = expand(load(INTERLEAVED), pp, m, vpp, costs=CostSpec(file={"costs": COSTS, **LINKS}))
    assert check_expansion(exp).valid
    ops = tr.torch_interleaved_ops(pp, vpp, m, with_comms=True)
    t_sim, p_sim, t_build, p_build, p_warm = [], [], [], [], []
    simulated = ex = None
    # Alternate the two sides so that machine noise falls on both.
    for i in range(repeats):
        _progress(f"  [1] m={m} run {i + 1}/{repeats}")
        gc.collect()
        t0 = time.perf_counter()
        simulated = tr.torch_simulate(ops)
        t_sim.append(time.perf_counter() - t0)
        seconds, ex = _ppdsl_simulate_only(exp)
        p_sim.append(seconds)
        gc.collect()
        t0 = time.perf_counter()
        built = tr.torch_interleaved_ops(pp, vpp, m, with_comms=True)
        tr.torch_simulate(built)
        t_build.append(time.perf_counter() - t0)
        p_build.append(_ppdsl_build_and_simulate(pp, vpp, m)[0])
        p_warm.append(_ppdsl_build_and_simulate(pp, vpp, m, cold=False)[0])
    ratio_sim = min(t_sim) / min(p_sim)
    ratio_build = min(t_build) / min(p_build)
    return {
        "torch_version": torch.__version__,
        "pp": pp,
        "vpp": vpp,
        "microbatches": m,
        "repeats": repeats,
        "compute_jobs": tr.count_compute_actions(ops),
        "torch_lowered_actions": sum(len(a) for a in ops),
        "torch_simulated_steps": tr.simulated_steps(simulated),
        "ppdsl_jobs": sum(len(j) for j in exp.jobs),
        "ppdsl_transfers": len(ex.transfers),
        "ppdsl_makespan": ex.makespan,
        "ppdsl_bubble_ratio": ex.bubble_ratio,
        "torch_simulate_seconds": min(t_sim),
        "ppdsl_simulate_seconds": min(p_sim),
        "torch_build_and_simulate_seconds": min(t_build),
        "ppdsl_build_and_simulate_seconds": min(p_build),
        "ppdsl_build_and_simulate_warm_parser_seconds": min(p_warm),
        "ratio_build_and_simulate_warm_parser": min(t_build) / min(p_warm),
        "torch_simulate_all_seconds": t_sim,
        "ppdsl_simulate_all_seconds": p_sim,
        "ratio_simulate": ratio_sim,
        "ratio_build_and_simulate": ratio_build,
        "ratio_target": TARGET_RATIO,
        "ratio_simulate_pass": ratio_sim >= TARGET_RATIO,
        "ratio_build_and_simulate_pass": ratio_build >= TARGET_RATIO,
    }


# --------------------------------------------------------------------------------------------------------------
# 2. scale, in a fresh subprocess
# --------------------------------------------------------------------------------------------------------------

# Runs in a fresh interpreter that imports only ppdsl (and the standard library): ru_maxrss is ppdsl's own.
_CHILD = r"""
import json, resource, sys, time
from ppdsl.analysis.expand import expand
from ppdsl.language.resolve import load
from ppdsl.analysis.costs import CostSpec  # noqa: E402
from ppdsl.reports.simulate import simulate_expansion

def maxrss():
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024

def hwm():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return None

mode, path, pp, vpp, m = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
costs, links = json.loads(sys.argv[6]), json.loads(sys.argv[7])
out = {"mode": mode, "imported_maxrss_bytes": maxrss(), "imported_vmhwm_bytes": hwm()}
if mode != "baseline":
    t0 = time.perf_counter()
    defn = load(path)
    t1 = time.perf_counter()
    exp = expand(defn, pp, m, vpp, costs=CostSpec(file={"costs": costs, **links}))
    t2 = time.perf_counter()
    sim = simulate_expansion(exp)  # completeness, order, deadlock and timing in one execution; raises if invalid
    t3 = time.perf_counter()
    ex = sim.execution
    out.update(
        maxrss_bytes=maxrss(), vmhwm_bytes=hwm(), valid=sim.check.valid,
        diagnostics=[d.message for d in sim.check.diagnostics],
        load_seconds=t1 - t0, expand_seconds=t2 - t1, simulate_seconds=t3 - t2,
        seconds=t3 - t0, jobs=sum(len(j) for j in exp.jobs), transfers=len(ex.transfers),
        makespan=ex.makespan, bubble_ratio=ex.bubble_ratio,
    )
print(json.dumps(out))
"""

_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def _child(mode: str, pp: int, vpp: int, m: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    # Not started directly: a child's ru_maxrss starts at its parent's peak (kept across fork + exec), and this
    # process holds torch; a small launcher in between resets it to the launcher's own few MiB.
    args = [str(pp), str(vpp), str(m), json.dumps(COSTS), json.dumps(LINKS)]
    proc = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, sys.executable, "-c", _CHILD, mode, str(INTERLEAVED), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} subprocess failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_scale(pp: int, vpp: int, m: int, repeats: int) -> dict[str, Any]:
    _progress("  [2] baseline subprocess (imports ppdsl only)")
    base = _child("baseline", pp, vpp, m)
    runs = []
    for i in range(repeats):
        _progress(f"  [2] pp={pp} vpp={vpp} m={m} fresh subprocess {i + 1}/{repeats}")
        run = _child("measure", pp, vpp, m)
        if not run["valid"]:
            raise AssertionError(f"pp={pp} vpp={vpp} m={m} is not valid: {run['diagnostics']}")
        runs.append(run)
    best = min(runs, key=lambda r: r["seconds"])
    increase = max(r["maxrss_bytes"] for r in runs) - base["imported_maxrss_bytes"]
    return {
        "pp": pp,
        "vpp": vpp,
        "microbatches": m,
        "costs": COSTS,
        "links": LINKS,
        "jobs": best["jobs"],
        "transfers": best["transfers"],
        "makespan": best["makespan"],
        "bubble_ratio": best["bubble_ratio"],
        "seconds": best["seconds"],
        "all_seconds": [r["seconds"] for r in runs],
        "load_seconds": best["load_seconds"],
        "expand_seconds": best["expand_seconds"],
        "simulate_seconds": best["simulate_seconds"],
        "seconds_target": TARGET_SCALE_SECONDS,
        "seconds_pass": best["seconds"] < TARGET_SCALE_SECONDS,
        "baseline_maxrss_bytes": base["imported_maxrss_bytes"],
        "maxrss_bytes": max(r["maxrss_bytes"] for r in runs),
        "maxrss_increase_bytes": increase,
        "vmhwm_increase_bytes": None
        if best["vmhwm_bytes"] is None or base["imported_vmhwm_bytes"] is None
        else best["vmhwm_bytes"] - base["imported_vmhwm_bytes"],
        "memory_target_bytes": TARGET_SCALE_BYTES,
        "memory_pass": increase < TARGET_SCALE_BYTES,
    }


# --------------------------------------------------------------------------------------------------------------
# 3. the commands' wall time
# --------------------------------------------------------------------------------------------------------------


def bench_commands() -> dict[str, Any]:
    exe = shutil.which("ppdsl")
    base = [exe] if exe else [sys.executable, "-m", "ppdsl.cli"]
    sizes = ["interleaved1f1b", "--pp", "8", "-m", "32", "--vpp", "2"]
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (
            ("trace", ["-o", str(Path(tmp) / "t.json")]),
            ("plot_png", ["-o", str(Path(tmp) / "t.png")]),
            ("plot_svg", ["-o", str(Path(tmp) / "t.svg")]),
        ):
            cmd = [*base, name.split("_")[0], *sizes, *extra]
            _progress(f"  [3] {' '.join(cmd[len(base) :])}")
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
            seconds = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
            out[name] = {"seconds": seconds, "bytes": Path(extra[-1]).stat().st_size}
    return out


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
    table = Table(title="ppdsl simulate benchmark", title_justify="left")
    for name, justify in (("part", "left"), ("measure", "left"), ("value", "right"), ("target", "right")):
        table.add_column(name, justify=justify)
    table.add_column("", justify="center")

    if not report["torch"]:
        table.add_row("1 vs torch", f"skipped: {report['torch_skipped']}", "", "", "")
    for t in report["torch"]:
        part = f"1 vs torch pp={t['pp']} vpp={t['vpp']} m={t['microbatches']}"
        table.add_row(
            part, f"torch _simulate_comms_compute (best of {t['repeats']})", _s(t["torch_simulate_seconds"]), "", ""
        )
        table.add_row("", "ppdsl execute(record_comms), costs + links", _s(t["ppdsl_simulate_seconds"]), "", "")
        table.add_row(
            "",
            "speed-up, simulate alone",
            f"{t['ratio_simulate']:.1f}x",
            f">= {TARGET_RATIO:g}x",
            _verdict(t["ratio_simulate_pass"]),
        )
        table.add_row("", "torch get_schedule_ops + simulate", _s(t["torch_build_and_simulate_seconds"]), "", "")
        table.add_row("", "ppdsl load + expand + check&simulate", _s(t["ppdsl_build_and_simulate_seconds"]), "", "")
        table.add_row(
            "",
            "speed-up, with build",
            f"{t['ratio_build_and_simulate']:.1f}x",
            f">= {TARGET_RATIO:g}x",
            _verdict(t["ratio_build_and_simulate_pass"]),
        )
        table.add_row(
            "",
            "  same with the grammar's parser already built",
            f"{_s(t['ppdsl_build_and_simulate_warm_parser_seconds'])}  "
            f"{t['ratio_build_and_simulate_warm_parser']:.1f}x",
            "",
            "",
        )
        table.add_row(
            "",
            "ppdsl jobs / transfers / makespan",
            f"{t['ppdsl_jobs']:,} / {t['ppdsl_transfers']:,} / {t['ppdsl_makespan']:g}",
            "",
            "",
        )
        table.add_section()

    s = report["scale"]
    part = f"2 scale pp={s['pp']} vpp={s['vpp']} m={s['microbatches']}"
    table.add_row(
        part,
        f"load+expand+check+simulate, {s['jobs']:,} jobs (fresh process, best of {len(s['all_seconds'])})",
        _s(s["seconds"]),
        f"< {_s(TARGET_SCALE_SECONDS)}",
        _verdict(s["seconds_pass"]),
    )
    table.add_row(
        "",
        "  load / expand / check and simulate",
        " / ".join(_s(s[k]) for k in ("load_seconds", "expand_seconds", "simulate_seconds")),
        "",
        "",
    )
    table.add_row("", "  transfers logged / makespan", f"{s['transfers']:,} / {s['makespan']:g}", "", "")
    table.add_row(
        "",
        "peak RSS increase over import-only process",
        _mib(s["maxrss_increase_bytes"]),
        f"< {_mib(TARGET_SCALE_BYTES)}",
        _verdict(s["memory_pass"]),
    )
    if s["vmhwm_increase_bytes"] is not None:
        table.add_row("", "  same from /proc VmHWM", _mib(s["vmhwm_increase_bytes"]), "", "")
    table.add_section()

    for name, c in report["commands"].items():
        what = f"`ppdsl {name.replace('_', ' (')}{')' if '_' in name else ''}` wall time, pp=8 vpp=2 m=32"
        table.add_row("3 commands" if name == "trace" else "", what, _s(c["seconds"]), "", "")
    console.print(table)
    verdict = (
        "all targets met"
        if report["all_pass"]
        else "some targets missed: " + ", ".join(k for k, v in report["targets"].items() if v is False)
    )
    console.print(verdict, style="bold green" if report["all_pass"] else "bold red")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--no-torch", action="store_true", help="skip part 1 (the torch comparison)")
    parser.add_argument("--repeats", type=int, help="runs per side in part 1 (default 5, quick 2)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)

    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "quick": args.quick,
        "torch": [],
        "torch_skipped": None,
    }
    why = "--no-torch given" if args.no_torch else _torch_available()
    if why is None:
        for m in (64, 128, 256):
            _progress(f"[1] ppdsl vs torch, interleaved 1F1B pp=16 vpp=2 m={m}")
            report["torch"].append(bench_torch(16, 2, m, repeats))
    else:
        _progress(f"[1] skipped: torch pipelining unavailable ({why})")
        report["torch_skipped"] = why

    _progress("[2] scale: pp=64 vpp=2 m=1024")
    report["scale"] = bench_scale(64, 2, 1024, 1 if args.quick else 3)
    _progress("[3] commands")
    report["commands"] = bench_commands()

    targets: dict[str, bool | None] = {}
    for t in report["torch"]:
        targets[f"ratio_simulate_m{t['microbatches']}"] = t["ratio_simulate_pass"]
        targets[f"ratio_build_m{t['microbatches']}"] = t["ratio_build_and_simulate_pass"]
    targets["scale_seconds"] = report["scale"]["seconds_pass"]
    targets["scale_memory"] = report["scale"]["memory_pass"]
    report["targets"] = targets
    report["all_pass"] = all(v is not False for v in targets.values())

    print_report(report)
    print(json.dumps(report), flush=True)
    return 0 if report["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
