"""Simulations, pictures and tables: `trace`, `plot`, `compare`, `sweep`, and `calibrate` (measured -> costs)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import budget
from ppdsl.cli.app import app
from ppdsl.cli.budget import MaxMemory
from ppdsl.cli.common import (
    DP,
    DPI_RANGE,
    PP,
    SIZE_RANGE,
    TIME_LIMIT_RANGE,
    VPP,
    BatchOption,
    CostFile,
    CostPairs,
    File,
    LayersOption,
    MaxJobs,
    Micro,
    ModelOption,
    Output,
    Params,
    PartitionOption,
    Rendezvous,
    TableFormat,
    TextOrJson,
    cost_spec,
    diagnosed,
    emit,
    err,
    fail,
    in_range,
    layer_profile,
    measured_memory,
    memory_size,
    out,
    output_name,
    partition_option,
    picture_format,
    print_data,
    report_console,
    save_picture,
    scenario,
    styled,
    usage_error,
)
from ppdsl.common.codes import EXIT_INVALID, EXIT_VALID
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.text import escaped
from ppdsl.common.units import format_bytes, unit_name
from ppdsl.language.library import find_schedule, library_files
from ppdsl.plan.kinds import action_names
from ppdsl.reports.compare import Row

if TYPE_CHECKING:
    from ppdsl.analysis.expansion import Expansion
    from ppdsl.reports.plot import Timeline


@app.command("trace")
def trace_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = None,
    dp: DP = 1,
    param: Params = None,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    output: Output = None,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
    max_memory: MaxMemory = None,
    layers: LayersOption = None,
    partition: PartitionOption = None,
) -> None:
    """Simulate, and write the run as a Chrome trace / Perfetto JSON (1 cost unit = 1 ms).

    A process per rank, compute / send / receive tracks, an arrow from each send to its receive; a cost file's
    times are real (seconds unless it says `"unit"`).
    """
    from ppdsl.reports.simulate import simulate
    from ppdsl.reports.trace import trace_json

    spec = scenario(
        file,
        pp,
        microbatches,
        vpp,
        param,
        cost,
        costs,
        rendezvous,
        max_jobs=max_jobs,
        layers=layers,
        partition=partition,
        dp=dp,
    )
    budget.refuse_sizes("trace", pp, spec.vpp, microbatches, max_memory)
    sim = diagnosed(simulate, spec)
    jobs = sum(len(j) for j in sim.expansion.jobs)
    budget.refuse_jobs("trace", jobs, max_memory)
    emit(trace_json(sim, spec.costs.us_per_unit, spec.costs.measured), output)
    if output is not None and output != "-":
        out.print(
            f"wrote {escaped(output)}: {jobs} jobs, {len(sim.transfers)} transfers, makespan {sim.makespan:g}, "
            f"bubble {sim.bubble_ratio:.1%}; open it in https://ui.perfetto.dev",
            markup=False,
        )


@app.command("plot")
def plot_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="The picture: .png, .svg or .pdf.")],
    file: Annotated[
        str | None,
        typer.Argument(help="A .sched file, or the name of a shipped schedule (`1f1b`); with --measured, optional."),
    ] = None,
    pp: Annotated[
        int | None,
        typer.Option(
            "--pp", help="Pipeline degree (with --measured: the profile's).", callback=in_range("--pp", *SIZE_RANGE)
        ),
    ] = None,
    microbatches: Annotated[
        int | None,
        typer.Option(
            "--microbatches",
            "-m",
            help="Micro-batches per step (with --measured: the profile's).",
            callback=in_range("--microbatches", *SIZE_RANGE),
        ),
    ] = None,
    vpp: Annotated[
        int | None,
        typer.Option(
            "--vpp",
            help="Chunks per rank (default 1; with --measured: the profile's).",
            callback=in_range("--vpp", *SIZE_RANGE),
        ),
    ] = None,
    param: Params = None,
    dp: DP = 1,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    measured: Annotated[
        Path | None, typer.Option("--measured", help="Draw this profile (Chrome trace, `ppdsl run --profile`).")
    ] = None,
    dpi: Annotated[
        int, typer.Option("--dpi", help="Resolution of a .png.", callback=in_range("--dpi", *DPI_RANGE))
    ] = 100,
    model: ModelOption = None,
    batch_size: BatchOption = 32,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
    max_memory: MaxMemory = None,
    layers: LayersOption = None,
    partition: PartitionOption = None,
) -> None:
    """Draw the timeline: a Gantt chart of every rank's jobs (idle hatched) over its in-flight activations."""
    from ppdsl.reports.plot import memory_timelines, plot_timeline, summary
    from ppdsl.reports.simulate import simulate_expansion
    from ppdsl.reports.trace import profile_mismatches, read_trace

    picture_format(output)
    profile = diagnosed(read_trace, measured) if measured is not None else None
    file, pp, microbatches, vpp = _plot_sizes(profile, measured, file, pp, microbatches, vpp)
    budget.refuse_sizes("plot", pp, vpp, microbatches, max_memory)
    memory = measured_memory(model, batch_size, microbatches)
    spec = scenario(
        file,
        pp,
        microbatches,
        vpp,
        param,
        cost,
        costs,
        rendezvous,
        memory,
        max_jobs=max_jobs,
        layers=layers,
        partition=partition,
        dp=dp,
    )
    exp = diagnosed(spec.expansion)
    budget.refuse_jobs("plot", sum(map(len, exp.jobs)), max_memory)
    if profile is not None:
        problems = profile_mismatches(profile, measured, exp)
        if problems:
            fail(problems)
        jobs = profile.jobs
        ranks = max(pp, profile.ranks)
        makespan, bubble = summary(jobs, ranks)
        unit = profile.time_unit
        source = f"measured ({measured.name})"
        memory_curves = memory_timelines(jobs, exp, ranks)
    else:
        sim = diagnosed(simulate_expansion, exp, rendezvous)
        jobs, ranks = list(sim.jobs()), pp
        makespan, bubble = sim.makespan, sim.bubble_ratio
        unit = unit_name(spec.costs.us_per_unit) if spec.costs.measured else "cost units"
        if not spec.costs.measured and exp.stage_work is not None and exp.stage_work.profiled:
            unit = exp.stage_work.unit  # a layer profile's times (ms unless it says)
        source = "simulated"
        memory_curves = [sim.memory_timeline(r) for r in range(pp)]  # (with what is in transit, when measured)
    head = f"{exp.defn.name} ({source})   pp={pp}  vpp={vpp}  microbatches={microbatches}   "
    title = head + f"makespan {makespan:.6g} {unit}   bubble {bubble:.1%}   "
    timeline = _timeline(exp, jobs, ranks, vpp, title, unit, memory_curves)
    save_picture(lambda buf, fmt: plot_timeline(timeline, buf, dpi=dpi, fmt=fmt), output)
    report_console(output).print(f"wrote {escaped(output_name(output))}: {escaped(timeline.title)}")


def _plot_sizes(profile, measured: Path | None, file: str | None, pp, microbatches, vpp) -> tuple[str, int, int, int]:
    """The schedule and sizes `plot` draws: a profile says what it measured, so what the command line leaves out
    comes from there (the rest is checked against it later); a usage error names what neither says."""
    from ppdsl.reports.trace import profile_sizes

    said = profile_sizes(profile) if profile is not None else {}
    file = file if file is not None else _profile_schedule(said)
    pp = pp if pp is not None else said.get("pp")
    microbatches = microbatches if microbatches is not None else said.get("microbatches")
    vpp = vpp if vpp is not None else said.get("vpp", 1)
    missing = [name for name, value in (("a schedule", file), ("--pp", pp), ("-m", microbatches)) if value is None]
    if missing:
        usage_error(
            f"plot needs {', '.join(missing)}"
            + (f": profile `{measured}` does not say what it measured" if measured is not None else ""),
            help="e.g. `ppdsl plot 1f1b --pp 4 -m 8 -o timeline.png`",
        )
    return file, pp, microbatches, vpp


def _timeline(exp: Expansion, jobs, ranks: int, vpp: int, title: str, unit: str, memory_curves) -> Timeline:
    """What `plot` draws: the title ends with the peak memory, and memory measured on a model is drawn in KiB or
    MiB (activations as they are)."""
    from ppdsl.reports.plot import Timeline

    peak = max((level for points in memory_curves for _, level in points), default=0.0)
    title += f"peak memory {format_bytes(peak)}" if exp.memory_unit == "bytes" else f"peak activations {peak:g}"
    limits, label = exp.memory_limit, "in-flight\nactivations"
    if exp.memory_unit == "bytes":  # measured on a model: draw KiB or MiB
        scale, suffix = (2**20, "MiB") if peak >= 2**20 else (2**10, "KiB")
        memory_curves = [[(t, level / scale) for t, level in points] for points in memory_curves]
        limits = [None if x is None else x / scale for x in limits]
        label = f"activation\nmemory ({suffix})"
    return Timeline(jobs, ranks, vpp, title, f"time ({unit})", memory_curves, limits, label)


def _profile_schedule(said: dict) -> str | None:
    """The schedule a profile names: its file if that is still there, else the shipped schedule of its name."""
    file = said.get("file")
    if file and Path(file).is_file():
        return file
    name = said.get("schedule")
    if name and find_schedule(str(name).lower()).is_file():
        return str(name).lower()
    return file


def rows_table(
    rows: list[Row],
    title: str,
    first: dict[str, list[str]],
    limit: float | None = None,
    footnotes: list[str] | None = None,
) -> Table:
    """Rows of `ppdsl.reports.compare` as a rich table: the `first` columns (header -> cells), then the measures,
    then why a row failed. With `footnotes` (a list to fill), a failed row's note is `[1]` and its
    reason goes into the list as `[1] schedule rejected: reason`, to print below the table where it cannot wrap."""
    table = Table(
        title=escaped(title) if title else None, title_justify="left", show_header=True, header_style="bold", box=None
    )
    for col in first:
        table.add_column(col, justify="left" if col == "schedule" else "right", no_wrap=col == "schedule")
    # the bubble is idle time; a schedule's recomputes are overhead of their own, in a column beside it
    recomputes = any(row.recompute_ratio for row in rows)
    for col in ("makespan", "bubble", *(("recompute",) if recomputes else ()), "peak act."):
        table.add_column(col, justify="right")
    if limit is not None:
        in_bytes = any(r.memory_unit == "bytes" for r in rows)
        table.add_column(f"<= {format_bytes(limit) if in_bytes else f'{limit:g}'}", justify="center")
    table.add_column("note")
    for i, row in enumerate(rows):
        cells: list[str | Text] = [escaped(column[i]) for column in first.values()]
        if row.status == "ok":
            peak = format_bytes(row.peak_activations) if row.memory_unit == "bytes" else f"{row.peak_activations:.4g}"
            overhead = [f"{row.recompute_ratio or 0.0:.1%}"] if recomputes else []
            cells += [f"{row.makespan:.6g}", f"{row.bubble_ratio:.1%}", *overhead, peak]
            if limit is not None:
                cells.append(Text("OVER", "bold red") if row.over_limit else Text("ok", "green"))
            cells.append(row.partition or "")
        else:
            cells += ["-"] * (4 if recomputes else 3) + (["-"] if limit is not None else [])
            status = (row.status, "yellow" if row.status == "rejected" else "red")
            if footnotes is None:
                cells.append(styled(status, f": {escaped(row.reason)}"))
            else:
                footnotes.append(f"[{len(footnotes) + 1}] {escaped(row.schedule)} {row.status}: {escaped(row.reason)}")
                cells.append(Text(f"[{len(footnotes)}]", status[1]))
        table.add_row(*cells)
    return table


@app.command("compare")
def compare_cmd(
    pp: PP,
    microbatches: Micro,
    files: Annotated[list[str] | None, typer.Argument(help="Schedules (.sched files or shipped names).")] = None,
    vpp: Annotated[
        int | None,
        typer.Option(
            "--vpp",
            help="Chunks per rank for all (default: each schedule's smallest, costs / its vpp).",
            callback=in_range("--vpp", *SIZE_RANGE),
        ),
    ] = None,
    dp: DP = 1,
    library: Annotated[bool, typer.Option("--library", help="Compare every shipped schedule too.")] = False,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            "--memory-limit",
            help="Mark schedules over it: activations (`4`), or bytes with a unit (`2GiB`) with --model.",
        ),
    ] = None,
    param: Params = None,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, json or csv.")] = TableFormat.table,
    model: ModelOption = None,
    batch_size: BatchOption = 32,
    synth: Annotated[
        bool, typer.Option("--synth", help="Add the schedule `ppdsl synth` finds within --memory-limit.")
    ] = False,
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit",
            help="Seconds of search for each --synth row.",
            callback=in_range("--time-limit", *TIME_LIMIT_RANGE),
        ),
    ] = 10.0,
    memory_actions: Annotated[
        str | None,
        typer.Option(
            "--memory-actions",
            help="With --synth: rows of synth recomputing or offloading too (`recompute`, `offload` or both).",
        ),
    ] = None,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
    layers: LayersOption = None,
    partition: PartitionOption = None,
) -> None:
    """Makespan, bubble and peak activations of several schedules at one size, best first."""
    from ppdsl.common.sizes import parse_params
    from ppdsl.reports.compare import compare, ranked
    from ppdsl.synth.request import parse_actions

    actions = parse_actions(memory_actions)
    if actions and not synth:
        usage_error("--memory-actions chooses what --synth may do", help="add --synth, or drop --memory-actions")
    if partition is not None and layers is None:
        usage_error("--partition places the layers of --layers", help="give the layer profile: --layers FILE")
    profile = layer_profile(layers)  # (before the limit: a profile of `activation_bytes` counts it in bytes)
    limit = memory_size(memory_limit, model is not None, profile=profile)
    memory = measured_memory(model, batch_size, microbatches)
    named, shipped = _schedules_to_compare(files, library, synth)
    spec = cost_spec(cost, costs)
    params = diagnosed(parse_params, param)
    # the base scenario's schedule is not used: every schedule compared takes its place
    base = Scenario(
        "",
        pp,
        microbatches,
        vpp or 1,
        params,
        spec,
        rendezvous,
        memory,
        max_jobs=max_jobs,
        layers=profile,
        partition=partition_option(partition),
        dp=dp,
    )
    action_types = action_names() if actions else ()  # (the synth rows' too: `--cost offload=...` may be for them)
    rows = diagnosed(compare, named, base, vpp is None, limit, False, action_types) if named else []
    if shipped:
        rows += diagnosed(compare, shipped, base, vpp is None, limit, True, action_types)
    if synth:
        rows += synthesized_rows(base, vpp, limit, time_limit, model, batch_size)
        if actions:
            rows += synthesized_rows(base, vpp, limit, time_limit, model, batch_size, actions)
    rows = ranked(rows)  # named and shipped schedules were measured apart
    measured_on = f"`{model}` at batch {batch_size}" if memory is not None else None
    layers_note = None
    if layers is not None:
        layers_note = (
            "; the layers of --layers, each schedule at the faster of the even and the DP split (note)"
            if partition is None
            else "; the layers of --layers as --partition places them"
        )
    sizes = {"pp": pp, "microbatches": microbatches, "vpp": vpp, "memory_limit": limit}
    _show_compared(rows, fmt, sizes, measured_on, layers_note)
    raise typer.Exit(_compare_status(rows, named))


def _compare_status(rows: list[Row], named: list[Path]) -> int:
    """`compare` fails when a schedule it was named fails, or when no schedule has figures."""
    named_paths = {str(p) for p in named}
    failed = [r for r in rows if r.file in named_paths and r.status != "ok"]
    return EXIT_INVALID if failed or not any(r.status == "ok" for r in rows) else EXIT_VALID


def _schedules_to_compare(files: list[str] | None, library: bool, synth: bool) -> tuple[list[Path], list[Path]]:
    """The schedules named, and with `--library` the shipped ones not named; a usage error when there is nothing
    to compare."""
    named = [find_schedule(f) for f in files or []]
    shipped = [p for p in library_files() if p.resolve() not in {n.resolve() for n in named}] if library else []
    if not named and not shipped and not synth:
        usage_error("nothing to compare", help="name schedules, pass `--library` or `--synth`")
    return named, shipped


def _show_compared(
    rows: list[Row], fmt: TableFormat, sizes: dict, measured_on: str | None, layers_note: str | None = None
) -> None:
    """`compare`'s rows as JSON (headed by the sizes), CSV, or a table titled with the sizes (and, with a layer
    profile, how its layers were placed: `layers_note`)."""
    from ppdsl.reports.compare import rows_csv, rows_json

    vpp, limit = sizes["vpp"], sizes["memory_limit"]
    if fmt is TableFormat.json:
        emit(rows_json(rows, **sizes, normalised=vpp is None), None)
    elif fmt is TableFormat.csv:
        emit(rows_csv(rows), None)
    else:
        how = f"vpp={vpp}" if vpp is not None else "each at its smallest vpp; costs and activations per rank (/ vpp)"
        if layers_note is not None:  # a stage costs and holds its layers, whatever the vpp: nothing is divided
            how = (f"vpp={vpp}" if vpp is not None else "each at its smallest vpp") + layers_note
        _print_ranked(rows, f"pp={sizes['pp']} microbatches={sizes['microbatches']} ({how})", limit)
        if measured_on is not None:
            out.print(f"peak memory measured on {measured_on}")


def _print_ranked(rows: list[Row], title: str, limit: float | None) -> None:
    """`compare`'s table: the schedules numbered best first, each row's note (why a schedule has no figures)
    beside it, or below the table as a footnote where the terminal is too narrow for it."""
    first = {
        "#": [str(i + 1) if r.status == "ok" else "" for i, r in enumerate(rows)],
        "schedule": [r.schedule for r in rows],
        "vpp": [str(r.vpp or "-") for r in rows],
    }
    out.print(textwrap.fill(escaped(title), out.width, break_long_words=False))  # wraps at words where narrow
    table = rows_table(rows, "", first, limit)
    # the table's width without its notes: where the rest is too narrow for them, they go below it
    widths = out.measure(rows_table([r for r in rows if r.status == "ok"], "", first, limit)).maximum
    notes = [len(r.status) + 2 + len(r.reason) for r in rows if r.status != "ok"]
    if notes and out.width - widths < max(notes) + 2:
        footnotes: list[str] = []
        table = rows_table(rows, "", first, limit, footnotes)
        out.print(table)
        for line in footnotes:
            out.print(textwrap.fill(line, out.width, subsequent_indent="    ", break_long_words=False))
    else:
        out.print(table)


def synthesized_rows(
    base: Scenario,
    vpp: int | None,
    limit: float | None,
    time_limit: float,
    model: str | None,
    batch_size: int,
    actions: tuple[str, ...] = (),
) -> list[Row]:
    """The schedules `ppdsl synth` finds at the comparison's sizes, costs and memory limit: looped, and V-shaped
    where the chunks allow it; with `actions` (`--memory-actions`), recomputing or offloading where that is faster
    or needed. Without --vpp (each schedule at its smallest vpp, normalised per rank), a two-chunk V is searched
    with each chunk costing half a rank's work and holding half its activations. With a layer profile (--layers)
    nothing is normalised (a stage costs and holds its layers): synth chooses the partition with the order, or
    keeps --partition, as the library's rows each take their better split."""
    from ppdsl.synth import SynthRequest, synthesize_file

    shapes = [(1, "looped"), (2, "vshape")] if vpp is None else [(vpp, "looped")] + ([(vpp, "vshape")] * (vpp % 2 == 0))
    rows = []
    profile = base.profile()
    for chunks, placement in shapes:
        normalised = vpp is None and profile is None
        scale = 1.0 / chunks if normalised else 1.0
        in_units = base.memory is None
        chunk_limit = None if limit is None else (limit * chunks if normalised and in_units else limit)
        request = SynthRequest(
            base.pp,
            base.microbatches,
            chunks,
            placement,
            base.costs,
            chunk_limit,
            base.memory,
            time_limit=time_limit,
            cost_scale=scale,
            memory_actions=actions,
            layers=profile,
            partition=None if profile is None else base.partition,
        )
        label = f"synth ({'V' if placement == 'vshape' else placement}{', ' + '+'.join(actions) if actions else ''})"
        row = Row(label, "(ppdsl synth)", base.pp, chunks, base.microbatches, "invalid")
        try:
            outcome = synthesize_file(request)
        except DiagnosticError as err:
            row.reason = f"{err.diagnostics[0].code}: {err.diagnostics[0].message}"
            rows.append(row)
            continue
        check = outcome.check
        peak = max(r.peak_activations for r in check.ranks)
        row.status, row.makespan, row.bubble_ratio = "ok", check.makespan, check.bubble_ratio
        row.recompute_ratio = check.recompute_ratio
        row.peak_activations = peak * (scale if in_units else 1.0)
        row.peak_rank = max(check.ranks, key=lambda r: r.peak_activations).rank
        row.memory_unit = check.expansion.memory_unit
        row.over_limit = None if limit is None else row.peak_activations > limit + 1e-9
        row.partition = None if outcome.partition is None else outcome.partition.text()
        rows.append(row)
    return rows


@app.command("sweep")
def sweep_cmd(
    file: File,
    pp: Annotated[str, typer.Option("--pp", help="Pipeline degrees: `4,8`, `2..16` (doubling), `2..8:2`.")],
    microbatches: Annotated[str, typer.Option("--microbatches", "-m", help="Micro-batches: `8..64`, `8,12,16`.")],
    vpp: VPP = None,
    dp: DP = 1,
    param: Params = None,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, json or csv.")] = TableFormat.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also draw bubble and memory against sizes (.png, .svg).")
    ] = None,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
) -> None:
    """Bubble and peak activations of one schedule over pipeline degrees and micro-batch counts."""
    from ppdsl.reports.compare import parse_sizes, rows_csv, rows_json, sweep
    from ppdsl.reports.plot import plot_sweep

    if output is not None:
        picture_format(output)
    pps = diagnosed(parse_sizes, pp, "--pp")
    ms = diagnosed(parse_sizes, microbatches, "-m")
    base = scenario(file, pps[0], ms[0], vpp, param, cost, costs, rendezvous, max_jobs=max_jobs, dp=dp)
    vpp = base.vpp
    budget.refuse_sweep([(p, m) for p in pps for m in ms], vpp, max_jobs)
    rows = diagnosed(sweep, base, pps, ms)
    name = next((r.schedule for r in rows), file)
    title = f"{name}  vpp={vpp}  pp in {pps}  microbatches in {ms}"
    console = report_console(output)  # `-o -`: the picture takes stdout, the table goes to stderr
    stream = sys.stderr if console is err else sys.stdout
    if fmt is TableFormat.json:
        stream.write(rows_json(rows, schedule=name, pp=pps, microbatches=ms, vpp=vpp) + "\n")
    elif fmt is TableFormat.csv:
        stream.write(rows_csv(rows))
    else:
        first = {"pp": [str(r.pp) for r in rows], "microbatches": [str(r.microbatches) for r in rows]}
        console.print(rows_table(rows, title, first))
    if output is not None:
        data = [r.to_dict() for r in rows]
        save_picture(lambda buf, fmt_: plot_sweep(data, title, buf, fmt=fmt_), output)
        if fmt is TableFormat.table:
            console.print(f"wrote {escaped(output_name(output))}")
    raise typer.Exit(EXIT_VALID if any(r.status == "ok" for r in rows) else EXIT_INVALID)


@app.command("calibrate")
def calibrate_cmd(
    profile: Annotated[Path, typer.Argument(help="A measured profile from `ppdsl run --profile`.")],
    output: Annotated[str, typer.Option("--output", "-o", help="Cost file to write (JSON; `-`: stdout).")] = (
        "costs.json"
    ),
    fmt: Annotated[TextOrJson, typer.Option("--format", help="text or json report.")] = TextOrJson.text,
    layers: Annotated[
        Path | None,
        typer.Option(
            "--layers", help="Also write a layer profile (JSON, what `--layers FILE` reads) of the profiled model."
        ),
    ] = None,
) -> None:
    """Turn measured job timings into simulator costs (`--costs FILE`), and compare a simulation with them."""
    from ppdsl.analysis.layers import profile_from_text
    from ppdsl.common.files import write_output
    from ppdsl.reports.calibrate import against_simulation, calibrate, layer_profile
    from ppdsl.reports.trace import read_trace

    measured = diagnosed(read_trace, profile)
    costs = diagnosed(calibrate, measured)
    comparison = diagnosed(against_simulation, measured, costs)
    if layers is not None:
        layer_text = json.dumps(diagnosed(layer_profile, measured, costs), indent=1) + "\n"
        diagnosed(profile_from_text, layer_text, str(layers))  # what `--layers` will read: never a file it refuses
        diagnosed(write_output, layers, layer_text)
    emit(json.dumps(costs, indent=1), output)
    out = report_console(output)  # `-o -`: the cost file takes stdout, the report goes to stderr
    report = {"costs": costs["costs"], "output": str(output)}
    if comparison is not None:
        report |= {
            "measured_step_seconds": comparison.measured_step_seconds,
            "measured_jobs_seconds": comparison.measured_jobs_seconds,
            "simulated_serial_seconds": comparison.simulated_serial_seconds,
            "simulated_makespan_seconds": comparison.simulated_makespan_seconds,
            "gap_seconds": comparison.gap_seconds,
            "error": comparison.error,
        }
    if fmt is TextOrJson.json:
        print_data(json.dumps(report, indent=2), out)
        return
    table = Table(show_header=True, header_style="bold", box=None)
    table.add_column("job type")
    table.add_column("mean time", justify="right")
    for name, seconds in costs["costs"].items():
        table.add_row(escaped(name), f"{seconds * 1e3:.3f} ms")
    shown = "stdout" if str(output) == "-" else f"`{escaped(str(output))}`"
    out.print(f"{costs['samples']} measured jobs -> {shown}")
    out.print(table)
    if comparison is not None:
        c = comparison
        out.print(
            f"measured step {c.measured_step_seconds * 1e3:.2f} ms: jobs {c.measured_jobs_seconds * 1e3:.2f} ms"
            f" + executor gaps {c.gap_seconds * 1e3:.2f} ms"
        )
        out.print(f"simulated on one process {c.simulated_serial_seconds * 1e3:.2f} ms: error {c.error:+.1%}")
        out.print(
            f"predicted step on {len(costs['stages'])} stage devices: {c.simulated_makespan_seconds * 1e3:.2f} ms"
        )
