"""`ppdsl synth --memory-actions recompute,offload` against the best anchor that fits, over a ladder of limits.

    python benchmarks/bench_memory_synth.py [--zb-repo PATH] [--time-limit S] [--steps N] [--quick]
        [--pp 4 8 16] [--m-factors 2 4] [--large-m-max-pp 16] [--copies 0.5 1] [--no-speed]

Grid (issue 18): pp 4, 8, 16; microbatches 2pp and 4pp (`--large-m-max-pp 8` leaves out pp=16 m=64, about a
quarter of the run);
F:B:W 1:1:1 (latency 0) and 1:1.5:0.7 (latency 0.1); a recompute costs a forward, a copy (offload or reload) 0.5x
or 1x a forward; a recomputed forward keeps 0.1 of its activations (the library's `stage_input`). The costs go in
the cost file the script writes (`"costs": {"recompute": ..., "offload": ..., "reload": ...}`), the one source both
synth and the checker read.
Shapes: one chunk (looped), two chunks in a V, two chunks looped. At each limit of a ladder from one micro-batch's
activations on a rank to 1F1B's peak (the shape's 1F1B: 1F1B, ZB-V, Interleaved 1F1B; in the checker's units),
synth with both actions runs at that limit. The anchors, each measured by the checker's execution at its own peak:
- every library schedule of the shape, with 1f1b_selective at every `recomputed` and interleaved1f1b_offload at
  every `offloaded`;
- rebuilt from the library's orders with recompute jobs inserted (`ActionEngine.materialize`, recompute right
  before its backward, as 1f1b_recompute.sched): 1F1B, ZB-H1, ZB-V and Interleaved 1F1B with full recompute and
  with selective recompute of k micro-batches for every k (1f1b_selective.sched's rule: of a stage's w
  micro-batches in flight at once in the order, micro-batch j is recomputed when j % w < k);
- a PipeOffload-style pattern on the 1F1B, ZB-V and interleaved orders: a (stage, micro-batch) is offloaded right
  after its forward when the gap from its forward's end to its backward's start covers both copies (the paper's
  rule; also their code's stricter one, `offloading.py:add_send_recv`: the gap less one backward over three round
  trips), the rest kept; the reload is issued early enough before the backward for its copy;
- with `--zb-repo` (a clone of sail-sg/zero-bubble-pipeline-parallelism): their zb.py search (one chunk) at limits
  pp/2, pp, 2pp, and on the V their V-Min, V-Half (zbv_greedy.py), ZB-V (zbv.py) and v_auto at several limits.
Targets, each printed with its verdict:
(a) at every ladder limit of every cell synth <= the best anchor that fits (losses counted); median gain
    (anchor / synth - 1) >= 5% over the limits where the best anchor recomputes or offloads;
(b) at V-Min's memory ((pp + 4) / 3 micro-batches, the authors' closed form: 2(pp + 4) / 3 chunk activations in the
    checker's units) with copies at 0.5x, on the V: synth <= V-Half (measured at its own, higher, peak) in >= 90% of
    the cells;
(c) speed: synth with both actions at pp=16 m=64 (< 30 s) and pp=64 m=512 (< 120 s), and `--exact` with actions
    at pp=4 m=8 (< 120 s; "not measured" with the refusal's code where synth refuses it).
`--quick` runs a small subset (pp 4, m = 2pp, one profile, copies 0.5x, 2 limits, no speed runs). The last line
is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_synth  # noqa: E402
import zero_bubble_reference as zbr  # noqa: E402

from ppdsl.analysis.check import check  # noqa: E402
from ppdsl.analysis.costs import CostSpec  # noqa: E402
from ppdsl.analysis.memory import MemoryActions  # noqa: E402
from ppdsl.analysis.scenario import Scenario  # noqa: E402
from ppdsl.common.diagnostics import DiagnosticError  # noqa: E402
from ppdsl.language.library import library_dir, library_files  # noqa: E402
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, FORWARD  # noqa: E402
from ppdsl.synth import SynthRequest, build, synthesize_file  # noqa: E402
from ppdsl.synth.actions import OFFLOAD, RECOMPUTE, ActionEngine, Placement  # noqa: E402
from ppdsl.synth.bounds import lower_bound  # noqa: E402
from ppdsl.synth.problem import Problem, build_problem  # noqa: E402
from ppdsl.synth.schedule import Evaluator, Order  # noqa: E402
from ppdsl.synth.seeds import library_seeds  # noqa: E402

EPS = 1e-6
BOTH = ("recompute", "offload")
# bench_synth's first two cost profiles (costs and latency), under this benchmark's labels
_SYNTH_PROFILES = {p.name: p for p in bench_synth.PROFILES}
PROFILES = {
    "F:B:W 1:1:1": _SYNTH_PROFILES["uniform"],
    "F:B:W 1:1.5:0.7 lat 0.1": _SYNTH_PROFILES["I1.5-W0.7-lat0.1"],
}
SHAPES = [(1, "looped"), (2, "vshape"), (2, "looped")]
# the shape's 1F1B (its peak tops the ladder) and the library orders the recompute / offload anchors are built on
BASES = {
    (1, "looped"): ("1f1b", ["1f1b", "zbh1"]),
    (2, "vshape"): ("zbv", ["zbv"]),
    (2, "looped"): ("interleaved1f1b", ["interleaved1f1b"]),
}
OFFLOAD_BASES = {"1f1b", "zbv", "interleaved1f1b"}  # PipeOffload's pattern goes on these orders
LIBRARY_ACTION_SCHEDULES = {"1f1b_selective", "1f1b_recompute", "interleaved1f1b_offload"}
SPEED_TARGETS = ((16, 64, 30.0), (64, 512, 120.0))
EXACT_TARGET = 120.0
VHALF_SHARE_TARGET = 0.9
GAIN_TARGET = 0.05


@dataclass
class Anchor:
    name: str
    makespan: float
    peak: float
    actions: bool  # it recomputes or offloads


@dataclass
class Cell:
    profile: str
    pp: int
    m: int
    copy: float  # a copy's time, in forwards
    shape: str
    limit: float
    synth: float | None
    synth_origin: str
    anchor: str | None
    anchor_makespan: float | None
    anchor_peak: float | None
    anchor_actions: bool
    seconds: float
    bound: float  # synth's lower bound on any schedule of the cell (memory aside): no gain is possible at it

    @property
    def gain(self) -> float | None:
        if self.synth is None or self.anchor_makespan is None:
            return None
        return self.anchor_makespan / self.synth - 1.0

    @property
    def lost(self) -> bool:
        """Slower than an anchor that fits, or nothing found where an anchor fits."""
        if self.anchor_makespan is None:
            return False
        return self.synth is None or self.synth > self.anchor_makespan + EPS * max(1.0, self.anchor_makespan)


# -- costs --------------------------------------------------------------------------------------------------------
class LenientCosts(CostSpec):
    """The cost file with the memory-action costs left out where a schedule has no such job type. Used only when
    synth refuses the file as it is (see `probe_costs`): the checker is right to refuse a cost naming no job type
    of a schedule, but synth builds order problems without the action types from the same file."""

    def check_known(self, names: Sequence[str]) -> None:
        known = set(names)
        file = dict(self.file or {})
        if "costs" in file:
            file["costs"] = {k: v for k, v in file["costs"].items() if k in known}
        CostSpec(self.pairs, file or None).check_known(names)


def write_costs(folder: Path, profile: str, copy: float) -> Path:
    costs, latency = PROFILES[profile].costs, PROFILES[profile].latency
    given = {
        **costs,
        "recompute": costs["forward"],
        "offload": copy * costs["forward"],
        "reload": copy * costs["forward"],
    }
    path = folder / f"costs-{abs(hash(profile))}-{copy:g}.json"
    path.write_text(json.dumps({"unit": "s", "costs": given, "latency": latency}))
    return path


def action_costs(problem: Problem) -> dict[str, float]:
    """What the problem's expansion says a recompute, offload and reload cost (stage 0)."""
    exp = problem.expansion
    a = MemoryActions.of(exp)
    return {n: exp.cost[t][0][0] for n, t in (("recompute", a.recompute), ("offload", a.offload), ("reload", a.reload))}


def probe_costs(folder: Path) -> tuple[dict, bool]:
    """Do synth's problem, synth's whole path and the checker see the copy cost of the cost file? Returns the
    findings and whether synth takes the file as it is (else the run uses LenientCosts, and says so)."""
    copy = 1.0
    path = write_costs(folder, "F:B:W 1:1:1", copy)
    strict = CostSpec.read(None, path)
    out: dict = {"copy_given": copy}
    request = SynthRequest(4, 8, 1, "looped", strict, 2.0, time_limit=1.0, memory_actions=BOTH)
    try:
        out["synth_problem_sees"] = action_costs(build(request))
    except DiagnosticError as err:
        out["synth_problem_sees"] = f"refused: {err.diagnostics[0].code} {err.diagnostics[0].message}"
    offload_file = library_dir() / "interleaved1f1b_offload.sched"
    try:
        exp = Scenario(offload_file, 4, 8, 2, costs=strict).expansion()
        a = MemoryActions.of(exp)
        out["checker_sees (interleaved1f1b_offload declares 0.5)"] = exp.cost[a.offload][0][0]
    except DiagnosticError as err:
        out["checker_sees (interleaved1f1b_offload declares 0.5)"] = f"refused: {err.diagnostics[0].message}"
    try:
        plain = check(Scenario(library_dir() / "1f1b.sched", 4, 8, 1, costs=strict))
        found = plain.diagnostics[0] if plain.diagnostics else None
        out["checker_on_1f1b"] = "accepted" if found is None else f"refused: {found.code} {found.message}"
    except DiagnosticError as err:
        out["checker_on_1f1b"] = f"refused: {err.diagnostics[0].code} {err.diagnostics[0].message}"
    try:
        outcome = synthesize_file(request)
        out["synth_whole_path"] = "accepted"
        strict_ok = True
    except DiagnosticError as err:
        out["synth_whole_path"] = "refused: " + "; ".join(f"{d.code} {d.message}" for d in err.diagnostics)
        strict_ok = False
        request.costs = LenientCosts(strict.pairs, strict.file)
        outcome = synthesize_file(request)
    # the written file: does it carry the copy cost, and does the checker, given the file, time it as synth did?
    out["synth_makespan"] = outcome.result.makespan
    out["file_cost_lines"] = [line.strip() for line in outcome.text.splitlines() if line.strip().startswith("cost ")]
    with tempfile.TemporaryDirectory() as tmp:
        sched = Path(tmp) / "s.sched"
        sched.write_text(outcome.text)
        plain = check(Scenario(sched, 4, 8, 1))
        given = check(Scenario(sched, 4, 8, 1, costs=strict))
        a = MemoryActions.of(given.expansion)
        out["checker_on_synth_file"] = {
            "makespan_without_costs": plain.makespan if plain.valid else "invalid",
            "makespan_with_costs": given.makespan if given.valid else "invalid",
            "offload_cost_seen": given.expansion.cost[a.offload][0][0],
        }
    return out, strict_ok


# -- anchors ------------------------------------------------------------------------------------------------------
def library_anchors(pp: int, m: int, vpp: int, placement: str, spec: CostSpec) -> Iterator[Anchor]:
    """Every library schedule of this shape, the memory-action ones at each setting of their parameter."""
    for path in library_files():
        settings: list[dict] = [{}]
        if path.stem == "1f1b_selective":
            settings = [{"recomputed": k} for k in range(1, pp)]
        elif path.stem == "interleaved1f1b_offload":
            settings = [{"offloaded": k} for k in range(1, vpp + 1)]
        for params in settings:
            result = bench_synth.checked_library_file(path, pp, m, vpp, placement, spec, params)
            if result is not None:
                label = "library " + result.defn.name + "".join(f" {k}={v}" for k, v in params.items())
                peak = max(r.peak_activations for r in result.ranks)
                yield Anchor(label, result.makespan, peak, path.stem in LIBRARY_ACTION_SCHEDULES)


def base_orders(problem: Problem, stem: str) -> list[Order] | None:
    for _, orders in library_seeds(problem, [library_dir() / f"{stem}.sched"]):
        return orders
    return None


def windows(order: Order) -> dict[int, int]:
    """[stage] -> how many of its micro-batches are in flight at once in this rank's order (forward to backward)."""
    live: dict[int, int] = {}
    most: dict[int, int] = {}
    for t, s, _ in order:
        if t == FORWARD:
            live[s] = live.get(s, 0) + 1
            most[s] = max(most.get(s, 0), live[s])
        elif t in (BACKWARD, BACKWARD_B):
            live[s] -= 1
    return most


def recompute_anchors(engine: ActionEngine, label: str, base: list[Order]) -> Iterator[Anchor]:
    """`base` with full recompute and with selective recompute of k micro-batches for every k (1f1b_selective's
    rule per stage: micro-batch j of a stage with w in flight is recomputed when j % w < k)."""
    m = engine.problem.microbatches
    wins = {s: w for order in base for s, w in windows(order).items()}
    plans = [(f"{label} + recompute (all)", Placement({(s, mb): RECOMPUTE for s in wins for mb in range(m)}))]
    for k in range(1, max(wins.values())):
        chosen = {(s, mb): RECOMPUTE for s, w in wins.items() for mb in range(m) if mb % w < k}
        plans.append((f"{label} + selective k={k}", Placement(chosen)))
    for name, plan in plans:
        _, ev = engine.evaluate(base, plan)
        if not ev.deadlock:
            yield Anchor(name, ev.makespan, max(ev.peaks), True)


def offload_anchors(engine: ActionEngine, label: str, base: list[Order]) -> Iterator[Anchor]:
    """PipeOffload's pattern on `base`: offload a (stage, micro-batch) when its forward-to-backward gap covers
    the round trip (`gap`: the paper's rule; `code`: their add_send_recv's, gap - backward > 3 round trips), the
    reload issued the fewest compute jobs before the backward that leave it time for its copy."""
    problem = engine.problem
    ev0 = engine.evaluator.evaluate(base)
    exp, a = problem.expansion, engine.types
    for rule in ("gap", "code"):
        plan = Placement()
        for r, order in enumerate(base):
            fwd = {}
            for i, (t, s, mb) in enumerate(order):
                if t == FORWARD:
                    fwd[(s, mb)] = i
                elif t in (BACKWARD, BACKWARD_B):
                    c = problem.chunk_of[s]
                    off, rel = exp.cost[a.offload][r][c], exp.cost[a.reload][r][c]
                    f_end, b_start = ev0.end[r][fwd[(s, mb)]], ev0.start[r][i]
                    b_len = ev0.end[r][i] - b_start
                    if rule == "gap":
                        fits, need = b_start - f_end >= off + rel - EPS, b_start - rel
                    else:
                        fits, need = b_start - b_len - f_end > 3 * (off + rel), b_start - b_len - rel
                    if not fits:
                        continue
                    lead, j = 0, i - 1
                    while j > fwd[(s, mb)]:
                        lead += 1
                        if ev0.start[r][j] <= need + EPS:
                            break
                        j -= 1
                    plan.action[(s, mb)] = OFFLOAD
                    plan.lead[(s, mb)] = lead
        if plan.action:
            _, ev = engine.evaluate(base, plan)
            if not ev.deadlock:
                yield Anchor(f"{label} + PipeOffload ({rule} rule, {len(plan.action)} offloaded)", ev.makespan,
                             max(ev.peaks), True)  # fmt: skip


def rebuilt_anchors(problem: Problem, vpp: int, placement: str) -> tuple[list[Anchor], float | None]:
    """The recompute and offload anchors on the shape's library orders, and the peak of the shape's 1F1B."""
    engine = ActionEngine(problem, BOTH, float("inf"))
    top_stem, stems = BASES[(vpp, placement)]
    anchors: list[Anchor] = []
    top = None
    for stem in stems:
        base = base_orders(problem, stem)
        if base is None:
            continue
        label = f"rebuilt {stem}"
        ev = engine.evaluator.evaluate(base)
        if stem == top_stem:
            top = max(ev.peaks)
        anchors.append(Anchor(f"{label} (no action)", ev.makespan, max(ev.peaks), False))
        anchors += recompute_anchors(engine, label, base)
        if stem in OFFLOAD_BASES:
            anchors += offload_anchors(engine, label, base)
    return anchors, top


def v_limits(pp: int) -> list[int]:
    """v_auto's limits (their chunk units): about V-Min's, V-Half's and ZB-V's memory; pp=16 only the lowest two
    (its search takes over a minute per size at 1.5pp)."""
    limits = [max(2, (2 * pp + 2) // 3), pp]
    return limits + ([(3 * pp) // 2] if pp <= 8 else [])


def zero_bubble_anchors(repo, profile: str, pp: int, m: int, vpp: int, placement: str, problem: Problem):
    """The zero-bubble authors' schedules of this shape, measured by the checker's execution as orders."""
    if vpp == 2 and placement == "looped":
        return []
    chosen = PROFILES[profile]
    if vpp == 1:
        runs = bench_synth.zb_auto_runs(repo, chosen, pp, m)
    else:
        f, b, w = chosen.zb_costs(2 * pp, per_stage=False)
        latency = chosen.latency
        named = {"vmin": "V-Min", "vhalf": "V-Half", "vzb": "ZB-V (zbv.py)"}
        runs = [(named[v], lambda v=v: zbr.v_auto(repo, pp, m, f, b, w, latency, v)) for v in named]
        runs += [(f"v auto ({x})", lambda x=x: zbr.v_auto(repo, pp, m, f, b, w, latency, x)) for x in v_limits(pp)]
    evaluator = Evaluator(problem)
    out = []
    for name, orders in bench_synth.zero_bubble_orders(problem, runs):
        ev = evaluator.evaluate(orders)
        if not ev.deadlock:
            out.append(Anchor(f"zero-bubble {name}", ev.makespan, max(ev.peaks), False))
    return out


def ladder(low: float, high: float, steps: int) -> list[float]:
    if high <= low or steps <= 1:
        return [low]
    return sorted({round(low + (high - low) * k / (steps - 1), 3) for k in range(steps)})


def run_synth(request: SynthRequest) -> tuple[float | None, str, float]:
    t0 = time.perf_counter()
    try:
        outcome = synthesize_file(request)
        return outcome.result.makespan, outcome.result.origin, time.perf_counter() - t0
    except DiagnosticError as err:
        d = err.diagnostics[0]
        return None, f"{d.code}: {d.message}", time.perf_counter() - t0


# -- the grid -----------------------------------------------------------------------------------------------------
def shape_name(vpp: int, placement: str) -> str:
    return "1 chunk" if vpp == 1 else f"{vpp} chunks, {'V' if placement == 'vshape' else 'looped'}"


def run_grid(args, folder: Path, make_spec) -> tuple[list[Cell], list[dict]]:
    cells: list[Cell] = []
    vmin_rows: list[dict] = []
    zb_cache: dict[tuple, list[Anchor]] = {}
    for profile in args.profiles:
        for pp in args.pp:
            for factor in args.m_factors:
                if factor > 2 and pp > args.large_m_max_pp:
                    continue  # (said in the output: see main)
                m = factor * pp
                for copy in args.copies:
                    spec = make_spec(write_costs(folder, profile, copy))
                    for vpp, placement in SHAPES:
                        shape = shape_name(vpp, placement)
                        t0 = time.perf_counter()
                        problem = build_problem(pp, m, vpp, placement, spec, memory_actions=True)
                        anchors = list(library_anchors(pp, m, vpp, placement, spec))
                        rebuilt, top = rebuilt_anchors(problem, vpp, placement)
                        anchors += rebuilt
                        key = (profile, pp, m, vpp, placement)
                        if zbr.available(args.zb_repo) and key not in zb_cache:
                            zb_cache[key] = zero_bubble_anchors(args.zb_repo, profile, pp, m, vpp, placement, problem)
                        anchors += zb_cache.get(key, [])
                        low = max(problem.minimum_memory())
                        bound = lower_bound(problem)
                        high = top if top is not None else max(a.peak for a in anchors)
                        print(f"# {profile}, pp={pp} m={m} copy {copy:g}x, {shape}: {len(anchors)} anchors in "
                              f"{time.perf_counter() - t0:.1f} s; ladder {low:g} .. {high:g}", flush=True)  # fmt: skip
                        for limit in ladder(low, high, args.steps):
                            fits = [a for a in anchors if a.peak <= limit + EPS]
                            best = min(fits, key=lambda a: (a.makespan, a.peak)) if fits else None
                            request = SynthRequest(pp, m, vpp, placement, spec, limit, time_limit=args.time_limit,
                                                   memory_actions=BOTH)  # fmt: skip
                            makespan, origin, seconds = run_synth(request)
                            cell = Cell(
                                profile, pp, m, copy, shape, limit, makespan, origin,
                                best.name if best else None, best.makespan if best else None,
                                best.peak if best else None, bool(best and best.actions), seconds, bound,
                            )  # fmt: skip
                            cells.append(cell)
                            gain = f"{cell.gain:+7.1%}" if cell.gain is not None else "      -"
                            shown = f"{makespan:8.4g}" if makespan is not None else f"  failed ({origin})"
                            print(
                                f"{profile:24s} pp={pp:<2d} m={m:<3d} copy {copy:g}x {shape:16s} limit {limit:6.3g} "
                                f"synth {shown} ({seconds:4.1f} s) best anchor "
                                f"{(best.name if best else '-'):58s} "
                                f"{best.makespan if best else float('nan'):8.4g} gain {gain}"
                                + ("  LOSS" if cell.lost else ""),
                                flush=True,
                            )
                        if placement == "vshape" and copy == 0.5:
                            vmin_rows.append(vmin_memory_row(profile, pp, m, spec, anchors, args))
    return cells, vmin_rows


def vmin_memory_row(profile: str, pp: int, m: int, spec: CostSpec, anchors: list[Anchor], args) -> dict:
    """Target (b): synth on the V at V-Min's closed-form memory against V-Half at its own peak."""
    limit = 2 * (pp + 4) / 3  # (pp + 4) / 3 micro-batches of a whole stage: two chunk activations each
    named = {a.name: a for a in anchors}
    vhalf, vmin = named.get("zero-bubble V-Half"), named.get("zero-bubble V-Min")
    request = SynthRequest(pp, m, 2, "vshape", spec, limit, time_limit=args.time_limit, memory_actions=BOTH)
    makespan, origin, seconds = run_synth(request)
    row = {
        "profile": profile, "pp": pp, "m": m, "limit": round(limit, 4), "synth": makespan, "synth_origin": origin,
        "seconds": round(seconds, 2),
        "vhalf": vhalf.makespan if vhalf else None, "vhalf_peak": vhalf.peak if vhalf else None,
        "vmin": vmin.makespan if vmin else None, "vmin_peak": vmin.peak if vmin else None,
    }  # fmt: skip
    ok = makespan is not None and vhalf is not None and makespan <= vhalf.makespan + EPS * max(1.0, vhalf.makespan)
    row["synth_le_vhalf"] = ok if vhalf is not None else None
    print(
        f"(b) {profile:24s} pp={pp:<2d} m={m:<3d} V-Min memory {limit:.3g}: synth "
        f"{makespan if makespan is not None else float('nan'):8.4g}; V-Half {row['vhalf']} at peak {row['vhalf_peak']}"
        f"; V-Min {row['vmin']} at peak {row['vmin_peak']}: {'ok' if ok else 'NOT <= V-Half'}",
        flush=True,
    )
    return row


def speed(folder: Path, make_spec) -> list[dict]:
    """Wall time of synth with both actions (default --time-limit, 10 s) at half 1F1B's memory, one chunk."""
    out = []
    profile = "F:B:W 1:1.5:0.7 lat 0.1"
    spec = make_spec(write_costs(folder, profile, 0.5))
    for pp, m, target in SPEED_TARGETS:
        request = SynthRequest(pp, m, 1, "looped", spec, pp / 2, memory_actions=BOTH)
        makespan, origin, seconds = run_synth(request)
        ok = makespan is not None and seconds < target
        out.append({"pp": pp, "m": m, "limit": pp / 2, "seconds": round(seconds, 2), "target_seconds": target,
                    "makespan": makespan, "origin": origin, "met": ok})  # fmt: skip
        print(f"(c) speed pp={pp} m={m} ({profile}, limit {pp / 2:g}, copies 0.5x, both actions): {seconds:.1f} s "
              f"(target {target:g} s), makespan {makespan}: {'met' if ok else 'NOT met'}", flush=True)  # fmt: skip
    return out


def exact(folder: Path, make_spec) -> dict:
    spec = make_spec(write_costs(folder, "F:B:W 1:1:1", 0.5))
    request = SynthRequest(4, 8, 1, "looped", spec, 2.0, exact=True, time_limit=EXACT_TARGET, memory_actions=BOTH)
    t0 = time.perf_counter()
    try:
        outcome = synthesize_file(request)
    except DiagnosticError as err:
        d = err.diagnostics[0]
        print(f"(c) exact pp=4 m=8 limit 2 with actions: not measured: {d.code} ({d.message})", flush=True)
        return {"measured": False, "refused": f"{d.code}: {d.message}"}
    seconds = time.perf_counter() - t0
    r = outcome.result
    ok = r.optimal and seconds < EXACT_TARGET
    print(f"(c) exact pp=4 m=8 limit 2 with actions: makespan {r.makespan:g}, bound {r.lower_bound:g}, "
          f"{'proven optimal' if r.optimal else f'gap {r.gap:.1%}'} in {seconds:.1f} s "
          f"(target {EXACT_TARGET:g} s): {'met' if ok else 'NOT met'}", flush=True)  # fmt: skip
    return {"measured": True, "makespan": r.makespan, "lower_bound": r.lower_bound, "optimal": r.optimal,
            "seconds": round(seconds, 2), "met": ok}  # fmt: skip


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else "MET" if ok else "NOT MET"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zb-repo", default=os.environ.get("ZB_REPO"), help="clone of the zero-bubble repository")
    parser.add_argument("--time-limit", type=float, default=3.0, help="synth's --time-limit per limit")
    parser.add_argument("--pp", type=int, nargs="*", default=[4, 8, 16], help="pipeline degrees")
    parser.add_argument("--m-factors", type=int, nargs="*", default=[2, 4], help="microbatches = factor * pp")
    parser.add_argument(
        "--large-m-max-pp",
        type=int,
        default=16,
        help="factors above 2 only up to this pp (8 leaves out pp=16 m=64, about a quarter of the run)",
    )
    parser.add_argument("--copies", type=float, nargs="*", default=[0.5, 1.0], help="a copy's time in forwards")
    parser.add_argument("--steps", type=int, default=4, help="limits on each ladder")
    parser.add_argument("--no-speed", action="store_true", help="skip the speed and --exact runs")
    parser.add_argument("--quick", action="store_true", help="a small subset (smoke test)")
    args = parser.parse_args()
    args.profiles = list(PROFILES)
    if args.quick:
        args.pp, args.m_factors, args.copies, args.steps = [4], [2], [0.5], 2
        args.profiles, args.no_speed = args.profiles[1:], True
        args.time_limit = min(args.time_limit, 1.0)
    print("command: python " + " ".join(sys.argv), flush=True)
    skipped = [pp for pp in args.pp if pp > args.large_m_max_pp and any(f > 2 for f in args.m_factors)]
    if skipped:
        pps = ", ".join(map(str, skipped))
        print(f"# pp={pps} at m = 2pp only (--large-m-max-pp {args.large_m_max_pp})", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        seen, strict_ok = probe_costs(folder)
        print("costs: " + json.dumps(seen), flush=True)
        if not strict_ok:
            print("costs: synth refuses the cost file with offload/reload costs (above); the run goes on with the "
                  "same file less the action costs for schedules without those job types", flush=True)  # fmt: skip

        def make_spec(path: Path) -> CostSpec:
            spec = CostSpec.read(None, path)
            return spec if strict_ok else LenientCosts(spec.pairs, spec.file)

        cells, vmin_rows = run_grid(args, folder, make_spec)
        speeds = [] if args.no_speed else speed(folder, make_spec)
        exact_row = {"measured": False, "refused": "skipped"} if args.no_speed else exact(folder, make_spec)
    compared = [c for c in cells if c.anchor is not None]
    needing = [c for c in compared if c.anchor_actions and c.gain is not None]
    losses = [c for c in compared if c.lost]
    median_needing = statistics.median(c.gain for c in needing) if needing else None
    # where the best anchor is already at the lower bound nothing can gain: the limits with room to gain
    room = [c for c in needing if c.anchor_makespan > c.bound + EPS * max(1.0, c.bound)]
    median_room = statistics.median(c.gain for c in room) if room else None
    vh = [r for r in vmin_rows if r["synth_le_vhalf"] is not None]
    vh_share = sum(r["synth_le_vhalf"] for r in vh) / len(vh) if vh else None
    ok_a = not losses and median_needing is not None and median_needing >= GAIN_TARGET
    ok_b = None if vh_share is None else vh_share >= VHALF_SHARE_TARGET
    ok_speed = None if not speeds else all(s["met"] for s in speeds)
    ok_exact = exact_row.get("met") if exact_row.get("measured") else None
    gains = [c.gain for c in compared if c.gain is not None]
    print(
        f"(a) {len(compared)} limits with an anchor that fits ({len(cells)} in all): {len(losses)} losses; median "
        f"gain {statistics.median(gains) if gains else float('nan'):+.1%} overall, "
        f"{median_needing if median_needing is not None else float('nan'):+.1%} over the {len(needing)} limits "
        f"where the best anchor recomputes or offloads (target >= {GAIN_TARGET:.0%}, 0 losses): {verdict(ok_a)}"
    )
    if needing:
        print(
            f"    of those {len(needing)}, {len(room)} have a best anchor above the lower bound (the rest cannot be "
            f"beaten); median gain over them "
            f"{median_room if median_room is not None else float('nan'):+.1%}"
        )
    for c in losses:
        by = f"{-c.gain:.1%} slower" if c.gain is not None else f"nothing found ({c.synth_origin})"
        print(f"    loss: {c.profile}, pp={c.pp} m={c.m} copy {c.copy:g}x {c.shape} limit {c.limit:g}: synth "
              f"{c.synth} vs {c.anchor} {c.anchor_makespan} ({by})")  # fmt: skip
    print(
        f"(b) synth <= V-Half at V-Min's memory in {sum(r['synth_le_vhalf'] for r in vh)} of {len(vh)} cells "
        f"(target >= {VHALF_SHARE_TARGET:.0%}): {verdict(ok_b)}"
    )
    print(
        f"(c) speed: {verdict(ok_speed)}; exact with actions: "
        + (verdict(ok_exact) if exact_row.get("measured") else f"not measured: {exact_row['refused']}")
    )
    figures = {
        "cost_probe": seen,
        "cells": len(cells),
        "compared": len(compared),
        "losses": len(losses),
        "median_gain": statistics.median(gains) if gains else None,
        "median_gain_where_anchors_need_actions": median_needing,
        "limits_where_anchors_need_actions": len(needing),
        "of_them_anchor_above_bound": len(room),
        "median_gain_where_anchors_need_actions_above_bound": median_room,
        "median_headroom_where_anchors_need_actions": (
            statistics.median(c.anchor_makespan / c.bound - 1 for c in needing) if needing else None
        ),
        "worst_gain": min(gains, default=None),
        "no_anchor_fits": sum(1 for c in cells if c.anchor is None),
        "time_limit": args.time_limit,
        "synth_seconds_max": max((c.seconds for c in cells), default=None),
        "synth_seconds_median": statistics.median(c.seconds for c in cells) if cells else None,
        "synth_over_twice_time_limit": sum(1 for c in cells if c.seconds > 2 * args.time_limit),
        "synth_failed": sum(1 for c in cells if c.synth is None),
        "target_a": verdict(ok_a),
        "vmin_memory": vmin_rows,
        "vhalf_share": vh_share,
        "target_b": verdict(ok_b),
        "speed": speeds,
        "exact": exact_row,
        "target_c_speed": verdict(ok_speed),
        "seconds": round(time.perf_counter() - t0, 1),
        "loss_cells": [asdict(c) for c in losses],
        "table": [{**asdict(c), "gain": c.gain} for c in cells],
    }
    print(json.dumps(figures, default=lambda x: None if isinstance(x, float) and not math.isfinite(x) else str(x)))


if __name__ == "__main__":
    main()
