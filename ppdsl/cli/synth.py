"""`ppdsl synth`: the fastest schedule for these sizes and costs within a memory limit, as a checked `.sched`."""

from __future__ import annotations

import json
import shlex
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import budget
from ppdsl.cli.app import app
from ppdsl.cli.budget import MaxProblem
from ppdsl.cli.common import (
    PP,
    SEED_RANGE,
    TIME_LIMIT_RANGE,
    WORKERS_RANGE,
    BatchOption,
    Chunks,
    CostFile,
    CostPairs,
    LayersOption,
    MaxJobs,
    Micro,
    ModelOption,
    TextOrJson,
    cost_spec,
    diagnosed,
    emit,
    err,
    in_range,
    layer_profile,
    measured_memory,
    memory_size,
    out,
    partition_option,
    print_data,
    save_picture,
    styled,
    usage_error,
)
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import check_output
from ppdsl.common.text import escaped
from ppdsl.common.units import format_bytes
from ppdsl.language.library import library_files
from ppdsl.plan.kinds import DEFAULT_RECOMPUTE_FRACTION, MEMORY_NAMES


class Placement(str, Enum):
    looped = "looped"
    vshape = "vshape"


class Split(str, Enum):
    auto = "auto"
    yes = "yes"
    no = "no"


@app.command("synth")
def synth_cmd(
    pp: PP,
    microbatches: Micro,
    output: Annotated[str, typer.Option("--output", "-o", help="The .sched file to write (`-`: stdout).")],
    vpp: Chunks = 1,
    placement: Annotated[
        Placement, typer.Option("--placement", help="looped (stage = chunk * pp + rank) or vshape (ZB-V's V).")
    ] = Placement.looped,
    cost: CostPairs = None,
    costs: CostFile = None,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            "--memory-limit",
            help="Per-rank limit: activations as `check` counts them (`4`), or bytes with a unit (`2GiB`) with "
            "--model.",
        ),
    ] = None,
    model: ModelOption = None,
    batch_size: BatchOption = 32,
    split_backward: Annotated[
        Split, typer.Option("--split-backward", help="auto (the search chooses), yes (I + W) or no (whole B).")
    ] = Split.auto,
    backward_b_frees: Annotated[
        float,
        typer.Option(
            "--backward-b-frees",
            help="Part of an activation backward_b frees (the rest: W).",
            callback=in_range("--backward-b-frees", 0, 1),
        ),
    ] = 0.5,
    exact: Annotated[bool, typer.Option("--exact", help="Prove optimality with CP-SAT (or report the gap).")] = False,
    periodic: Annotated[
        bool,
        typer.Option(
            "--periodic", help="A block repeated every period, written to hold for any number of micro-batches."
        ),
    ] = False,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            help="Seconds of search (default 10; 120 with --exact).",
            callback=in_range("--time-limit", *TIME_LIMIT_RANGE),
        ),
    ] = None,
    seed: Annotated[
        int,
        typer.Option("--seed", help="Seed of the search's random choices.", callback=in_range("--seed", *SEED_RANGE)),
    ] = 0,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="CP-SAT threads with --exact (more than 1: not deterministic).",
            callback=in_range("--workers", *WORKERS_RANGE),
        ),
    ] = 1,
    library: Annotated[
        bool, typer.Option("--library/--no-library", help="Start the search from the library's schedules too.")
    ] = True,
    memory_actions: Annotated[
        str | None,
        typer.Option(
            "--memory-actions",
            help="Let the search recompute or offload activations: `recompute`, `offload` or `recompute,offload`.",
        ),
    ] = None,
    recompute_fraction: Annotated[
        float,
        typer.Option(
            "--recompute-fraction",
            help="With recompute: the part a recompute rebuilds of what its forward does not keep as the stage "
            "input (1: a full recompute, as `check` reads one without a fraction); it costs that part of the forward.",
            callback=in_range("--recompute-fraction", 0.01, 1),
        ),
    ] = DEFAULT_RECOMPUTE_FRACTION,
    host_limit: Annotated[
        str | None,
        typer.Option(
            "--host-limit", help="With offload: all ranks' offloaded memory together (units as --memory-limit)."
        ),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="The schedule's name in the file.")] = None,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
    max_problem: MaxProblem = None,
    fmt: Annotated[TextOrJson, typer.Option("--format", help="Report format.")] = TextOrJson.text,
    layers: LayersOption = None,
    partition: Annotated[
        str | None,
        typer.Option(
            "--partition",
            help="With --layers: fix the layers per virtual stage (`9,10,9,6` or a Megatron layout) instead of "
            "choosing them.",
        ),
    ] = None,
) -> None:
    """Find the fastest schedule within a memory limit and write it as a .sched that `ppdsl check` proves.

    With --layers, the partition of the model's layers into stages is chosen too (or fixed by --partition), the
    memory limit counts layer activations, and the file carries its partition: check it with the same --layers.
    """
    from ppdsl.synth import SynthRequest, synthesize_file
    from ppdsl.synth.actions import parse_actions

    if periodic and exact:
        usage_error(
            "--periodic and --exact do not combine: --exact proves one size's optimum, --periodic holds for all"
        )
    seconds = time_limit if time_limit is not None else (120.0 if exact else 10.0)
    budget.refuse_synth(pp, vpp, microbatches, seconds, max_problem)
    spec = cost_spec(cost, costs)
    actions = parse_actions(memory_actions)
    diagnosed(refuse_unused_action_costs, spec, actions)  # (before --model loads paddle)
    limit = memory_size(memory_limit, model is not None)
    memory = measured_memory(model, batch_size, microbatches)
    diagnosed(check_output, output)  # a bad output is refused now, not after the search
    cost_options = " ".join(([f"--cost {shlex.quote(cost)}"] if cost else []) + ([f"--costs {costs}"] if costs else []))
    memory_options = ""
    if model is not None:
        memory_options = f"--model {model} --batch-size {batch_size}"
        if memory_limit is not None:
            memory_options += f" --memory-limit {memory_limit}"
    request = SynthRequest(
        pp=pp,
        microbatches=microbatches,
        vpp=vpp,
        placement=placement.value,
        costs=spec,
        memory_limit=limit,
        memory=memory,
        memory_options=memory_options,
        split=split_backward.value,
        backward_b_frees=backward_b_frees,
        exact=exact,
        periodic=periodic,
        time_limit=seconds,
        seed=seed,
        workers=workers,
        library=library,
        name=name or "",
        command=_command_line(),
        output=output,
        cost_options=cost_options,
        max_jobs=max_jobs,
        memory_actions=actions,
        recompute_fraction=recompute_fraction,
        host_limit=memory_size(host_limit, model is not None, "--host-limit"),
    )
    quiet = fmt is TextOrJson.json or not err.is_terminal
    if partition is not None and layers is None:
        usage_error("synth --partition fixes a partition of --layers", help="give the layer profile: --layers FILE")
    profile = layer_profile(layers)
    chosen = None
    with err.status("searching", spinner="dots") if not quiet else _nothing():
        note = None if quiet else (lambda msg: err.log(msg))
        if profile is None:
            outcome = diagnosed(synthesize_file, request, note)
        else:
            from ppdsl.synth.partition import synthesize_partitioned

            if model is not None:
                usage_error("--model measures a model's own stages, not a partition of --layers", help="drop one")
            found = diagnosed(
                synthesize_partitioned,
                request,
                profile,
                f"--layers {shlex.quote(str(layers))}",
                partition_option(partition),
                note,
            )
            outcome, chosen = found.outcome, found
    emit(outcome.text, output)
    rows = _library_rows(outcome, request, spec, profile, chosen.partition if chosen else None)
    if fmt is TextOrJson.json:
        report = _report(outcome, rows, output)
        if chosen is not None:
            report["partition"] = list(chosen.partition.counts)
            report["partitions_tried"] = [{"partition": list(p.counts), "makespan": m} for p, m in chosen.tried]
        print_data(json.dumps(report, indent=2))
    else:
        _print(outcome, rows, output)
        if chosen is not None:
            tried = ", ".join(f"{p.text()}: {'-' if m is None else f'{m:g}'}" for p, m in chosen.tried)
            out.print(f"partition {chosen.partition.text()} (tried {tried})", markup=False)


def refuse_unused_action_costs(spec: CostSpec, actions: tuple[str, ...]) -> None:
    """`--cost offload=...` without `--memory-actions` times nothing synth writes (E110): more likely a forgotten
    option than an intent. A cost file's memory-action costs are left out instead (it may be calibrated on a run
    with them)."""
    named = [name for name in MEMORY_NAMES if name in (spec.pairs or {})]
    if named and not actions:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E110",
                    f"`--cost` gives `{named[0]}` a cost, but synth places no {named[0]} jobs without --memory-actions",
                    help="add `--memory-actions recompute,offload` (or the one you mean) to let the search use them, "
                    f"or drop `{named[0]}` from --cost",
                )
            ]
        )


def _command_line() -> str:
    """This command as typed, without the options that only change how the report looks."""
    args = sys.argv[1:]
    if args[:1] != ["synth"]:
        return ""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--format":
            skip = True
            continue
        if not arg.startswith("--format="):
            kept.append(arg)
    return " ".join(["ppdsl", *map(shlex.quote, kept)])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _library_rows(outcome, request, spec, profile=None, partition=None):
    """The library's schedules measured at the same sizes and costs (and partition of the profile's layers), with
    whether they fit the limit."""
    from ppdsl.reports.compare import compare

    base = Scenario(
        "",
        request.pp,
        request.microbatches,
        request.vpp,
        None,
        spec,
        memory=request.memory,
        layers=profile,
        partition=partition,
    )
    try:
        rows = compare(library_files(), base, memory_limit=request.memory_limit, skip_broken=True)
    except Exception:
        return []
    return [r for r in rows if r.status == "ok"]


def _report(outcome, rows, output) -> dict:
    result = outcome.result
    report = _base_report(outcome, rows, output)
    if outcome.request.memory_actions:  # how many (stage, micro-batch)s each action took, and the host's peak
        names = result.problem.expansion.type_names  # (the orders' type indices are the probe's)
        jobs = [names[t] for order in result.orders for t, _, _ in order]
        report["memory_actions"] = {a: jobs.count(a) for a in ("recompute", "offload")}
        report["host_peak"] = result.evaluation.host_peak
    return report


def _base_report(outcome, rows, output) -> dict:
    result, check = outcome.result, outcome.check
    return {
        "file": None if output == "-" else output,
        "makespan": result.makespan,
        "lower_bound": result.lower_bound,
        "optimal": result.optimal,
        "gap": result.gap,
        "bubble_ratio": check.bubble_ratio,
        "recompute_ratio": check.recompute_ratio,
        "peak_activations": [r.peak_activations for r in check.ranks],
        "memory_unit": check.expansion.memory_unit,
        "memory_limit": outcome.request.memory_limit,
        "pp": outcome.request.pp,
        "vpp": outcome.request.vpp,
        "microbatches": outcome.request.microbatches,
        "placement": outcome.request.placement,
        "found_by": result.origin,
        "steps": [{"step": s.name, "makespan": s.makespan, "detail": s.detail} for s in result.steps],
        "seconds": result.seconds,
        "library": [
            {
                "schedule": r.schedule,
                "makespan": r.makespan,
                "peak_activations": r.peak_activations,
                "fits": not r.over_limit if r.over_limit is not None else True,
            }
            for r in rows
        ],
    }


def _ratio(a: float, b: float) -> str:
    """`a / b` to 3 decimals; `-` when b is 0 (zero costs can make a schedule of no time: a valid result)."""
    return f"{a / b:.3f}" if b else "-"


def _print(outcome, rows, output) -> None:
    result, check = outcome.result, outcome.check
    in_bytes = check.expansion.memory_unit == "bytes"
    shown = format_bytes if in_bytes else (lambda x: f"{x:g}")
    where = "stdout" if output == "-" else f"`{escaped(output)}`"
    verdict = "optimal" if result.optimal else f"{result.gap:.1%} above the lower bound"
    overhead = f", recompute {check.recompute_ratio:.1%}" if check.has_recompute else ""
    out.print(
        styled(
            ("wrote", "green"),
            f" {where}: makespan {result.makespan:g} ({verdict}), bubble {check.bubble_ratio:.1%}{overhead}",
        )
    )
    out.print(
        f"lower bound {result.lower_bound:g} (makespan / bound = {_ratio(result.makespan, result.lower_bound)}); "
        f"found by {result.origin} in {result.seconds:.1f} s"
    )
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("rank", "busy", "idle", "peak memory" if in_bytes else "peak activations", "limit"):
        table.add_column(col, justify="right")
    for r in check.ranks:
        limit = "-" if r.memory_limit is None else shown(r.memory_limit)
        table.add_row(str(r.rank), f"{r.busy:g}", f"{r.idle:g}", shown(r.peak_activations), limit)
    out.print(table)
    if rows:
        lib = Table(
            title="the library at the same sizes and costs", title_justify="left", box=None, header_style="bold"
        )
        for col in ("schedule", "makespan", "peak", "fits", "vs synth"):
            lib.add_column(col, justify="left" if col == "schedule" else "right")
        for row in rows:
            fits = row.over_limit is not True
            ratio = f"{_ratio(row.makespan, result.makespan)}x"
            lib.add_row(
                escaped(row.schedule), f"{row.makespan:g}", shown(row.peak_activations), "yes" if fits else "no", ratio
            )
        out.print(lib)


@app.command("frontier")
def frontier_cmd(
    pp: PP,
    microbatches: Micro,
    vpp: Chunks = 1,
    cost: CostPairs = None,
    costs: CostFile = None,
    memory_actions: Annotated[
        str, typer.Option("--memory-actions", help="The actions synth may use: recompute, offload or both.")
    ] = "recompute,offload",
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            help="Limits on the ladder (from one micro-batch to 1F1B's peak).",
            callback=in_range("--steps", 2, 64),
        ),
    ] = 6,
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit",
            help="Seconds of search for each synth point.",
            callback=in_range("--time-limit", *TIME_LIMIT_RANGE),
        ),
    ] = 2.0,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Draw the frontier to this PNG.")] = None,
    fmt: Annotated[TextOrJson, typer.Option("--format", help="Report format.")] = TextOrJson.text,
) -> None:
    """Makespan against memory limit: synth with the order alone and with memory actions, and every library
    schedule at its own peak, so you see what each unit of memory buys."""
    from ppdsl.reports.frontier import draw_frontier, frontier
    from ppdsl.synth.actions import parse_actions

    if output is not None:
        diagnosed(check_output, output)
    spec = cost_spec(cost, costs)
    actions = parse_actions(memory_actions)
    quiet = fmt is TextOrJson.json or not err.is_terminal
    with err.status("searching", spinner="dots") if not quiet else _nothing():
        fr = diagnosed(frontier, pp, microbatches, vpp, spec, actions, steps, time_limit)
    if output is not None:  # drawn into memory, written by the one writer (never through a planted symlink)
        save_picture(lambda buf, fmt_: draw_frontier(fr, buf, fmt_), Path(output))
    if fmt is TextOrJson.json:
        data = {
            "pp": pp,
            "microbatches": microbatches,
            "vpp": vpp,
            "points": [p.__dict__ for p in fr.points],
            "anchors": [a.__dict__ for a in fr.anchors],
        }
        print_data(json.dumps(data, indent=2))
        return
    table = Table(title=f"makespan against memory limit, pp={pp} m={microbatches} vpp={vpp}")
    for column in ("limit", "synth (order)", "synth (actions)", "best anchor that fits", "anchor makespan"):
        table.add_column(column, justify="left" if "anchor that" in column else "right")
    for p in fr.points:
        best = fr.best_anchor(p.limit)
        table.add_row(
            f"{p.limit:g}",
            "-" if p.order_only is None else f"{p.order_only:g}",
            "-" if p.with_actions is None else f"{p.with_actions:g}",
            escaped(best.name) if best else "-",
            f"{best.makespan:g}" if best else "-",
        )
    out.print(table)
    if output is not None:
        out.print(f"drew `{escaped(output)}`")
