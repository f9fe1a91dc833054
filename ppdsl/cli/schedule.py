"""Commands about one schedule at given sizes, as text: `check`, `expand`, `show`, `list`, `import`; and `explain`,
what a diagnostic code means."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from ppdsl.analysis.check import CheckResult, check
from ppdsl.analysis.checks import used_types
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.analysis.grid import abbreviations, grid_label, legend, text_grid
from ppdsl.cli import budget
from ppdsl.cli.app import app
from ppdsl.cli.budget import MaxMemory
from ppdsl.cli.common import (
    DP,
    PP,
    STEPS_RANGE,
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
    TextOrJson,
    diagnosed,
    emit,
    err,
    fail,
    in_range,
    measured_memory,
    out,
    print_data,
    profiled_memory_size,
    scenario,
    styled,
    usage_error,
)
from ppdsl.common import codes
from ppdsl.common.diagnostics import DiagnosticError, SourceCache, render_all
from ppdsl.common.text import escaped, terminal_columns
from ppdsl.common.units import format_bytes
from ppdsl.language.library import library_files
from ppdsl.plan.kinds import letter_of, style_of


class ExpandFormat(str, Enum):
    json = "json"
    csv = "csv"
    table = "table"
    torch_csv = "torch-csv"
    megatron_layout = "megatron-layout"


@app.command("check")
def check_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = None,
    dp: DP = 1,
    param: Params = None,
    fmt: Annotated[TextOrJson, typer.Option("--format", help="Report format.")] = TextOrJson.text,
    rendezvous: Rendezvous = False,
    cost: CostPairs = None,
    costs: CostFile = None,
    model: ModelOption = None,
    batch_size: BatchOption = 32,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            "--memory-limit",
            help="Per-rank limit: bytes with a unit (`2GiB`) with --model or a --layers profile of "
            "`activation_bytes`, else activations (`4`).",
        ),
    ] = None,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
    layers: LayersOption = None,
    partition: PartitionOption = None,
) -> None:
    """Prove a schedule complete, ordered and deadlock-free for these sizes; report bubble and memory."""
    limit = profiled_memory_size(memory_limit, model is not None, layers)
    memory = measured_memory(model, batch_size, microbatches)
    chosen = scenario(
        file, pp, microbatches, vpp, param, cost, costs, rendezvous, memory, limit, max_jobs, layers, partition, dp
    )
    result = check(chosen)
    if fmt is TextOrJson.json:
        print_data(json.dumps(result.to_dict(), indent=2))
    else:
        if result.diagnostics:
            err.print(render_all(result.diagnostics, SourceCache(), color=err.is_terminal), markup=False)
        if result.valid:
            print_report(result)
    raise typer.Exit(result.exit_code)


def print_report(result: CheckResult) -> None:
    """`ok: ...`, makespan and bubble, then a table of every rank's measures."""
    exp = result.expansion
    size = f"pp={result.pp} vpp={result.vpp} microbatches={result.microbatches}" + (
        f" dp={exp.dp}" if exp.dp != 1 else ""
    )
    out.print(styled(("ok", "green"), f": `{escaped(exp.defn.name)}` is complete, ordered and deadlock-free at {size}"))
    recomputes = result.has_recompute  # the bubble is idle time; what recomputing costs is shown beside it
    overhead = f", recompute {result.recompute_ratio:.1%}" if recomputes else ""
    out.print(f"makespan {result.makespan:g}, bubble {result.bubble_ratio:.1%}{overhead}")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    in_bytes = exp.memory_unit == "bytes"
    collectives = any(r.collective is not None for r in result.ranks)  # its collective time, and the exposed part
    columns = ("rank", "jobs", "busy", "idle", "bubble", *(("recompute",) if recomputes else ()))
    columns += ("collective", "exposed") if collectives else ()
    for col in (*columns, "peak memory" if in_bytes else "peak activations", "limit"):
        table.add_column(col, justify="right")
    for r in result.ranks:
        table.add_row(
            str(r.rank),
            str(r.jobs),
            f"{r.busy:g}",
            f"{r.idle:g}",
            f"{r.bubble_ratio:.1%}" if result.makespan else "-",
            *((f"{r.recompute_ratio:.1%}" if result.makespan else "-",) if recomputes else ()),
            *((f"{r.collective:g}", f"{r.exposed_collective:g}") if collectives else ()),
            format_bytes(r.peak_activations) if in_bytes else f"{r.peak_activations:g}",
            "-" if r.memory_limit is None else (format_bytes(r.memory_limit) if in_bytes else f"{r.memory_limit:g}"),
        )
    out.print(table)
    print_stages(result)
    limit = exp.host_limit
    # What offloads hold on the host, for a schedule that offloads or bounds the host; a recompute alone holds none.
    if result.host_peak is not None and (result.host_peak or limit is not None):
        amount = format_bytes if in_bytes else "{:g}".format
        out.print(
            f"host memory (all ranks' offloads): peak {amount(result.host_peak)} at time "
            f"{result.execution.host_peak_time:g}" + ("" if limit is None else f", limit {amount(limit)}")
        )


def print_stages(result: CheckResult) -> None:
    """A partitioned model's stages: layers, one micro-batch's work and activation each, the critical one marked."""
    stages = result.stages
    if not stages:
        return
    work = result.expansion.stage_work
    unit = f" ({work.unit})" if work.profiled and work.unit else ""
    out.print(f"stages: partition {work.partition.text()}, one micro-batch's forward + backward{unit} each")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("stage", "rank", "chunk", "layers", "time", "activation", ""):
        table.add_column(col, justify="right" if col else "left")
    for s in stages:
        table.add_row(
            str(s.stage),
            str(s.rank),
            str(s.chunk),
            str(s.layers),
            f"{s.time:.4g}",
            format_bytes(s.activation) if work.memory_unit == "bytes" else f"{s.activation:g}",
            "critical" if s.critical else "",
        )
    out.print(table)


@app.command("expand")
def expand_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = None,
    dp: DP = 1,
    param: Params = None,
    fmt: Annotated[ExpandFormat, typer.Option("--format", help="Output format.")] = ExpandFormat.json,
    output: Output = None,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
    max_memory: MaxMemory = None,
    layers: LayersOption = None,
    partition: PartitionOption = None,
) -> None:
    """Print every rank's job order for these sizes (`--format megatron-layout`: the partition, as Megatron's
    `--pipeline-model-parallel-layout`)."""
    from ppdsl.reports import formats

    chosen = scenario(file, pp, microbatches, vpp, param, max_jobs=max_jobs, layers=layers, partition=partition, dp=dp)
    budget.refuse_sizes("expand", pp, chosen.vpp, microbatches, max_memory)
    exp = diagnosed(chosen.expansion)
    budget.refuse_jobs("expand", sum(map(len, exp.jobs)), max_memory)
    if fmt is ExpandFormat.megatron_layout:
        text = diagnosed(formats.to_megatron_layout, exp, chosen.profile())
    elif fmt is ExpandFormat.json:
        text = formats.to_json(exp)
    elif fmt is ExpandFormat.csv:
        text = formats.to_csv(exp)
    elif fmt is ExpandFormat.torch_csv:
        text = formats.to_torch_csv(exp)
        dropped = formats.torch_dropped(exp)
        if dropped:  # the compute is exported; say what the format cannot hold rather than lose it silently
            jobs = ", ".join(f"{n} `{name}`" for name, n in dropped.items())
            err.print(
                styled(("warning", "yellow"), f": PyTorch's compute-only CSV has no memory actions: left out {jobs}")
            )
        # what a torch user builds: one PipelineStage per stage of the rank's row (to stderr: `-o -` pipes the CSV)
        for r, stages in enumerate(exp.stage_of):
            listed = ", ".join(str(s) for s in sorted(stages))
            err.print(f"rank {r}: {'stage' if len(stages) == 1 else 'stages'} {listed}", markup=False)
        err.print("(torch: build a PipelineStage for each stage of a rank's row; see the README, Use with PyTorch)")
    else:
        text = "\n".join(f"rank {r}: " + " ".join(map(exp.label, jobs)) for r, jobs in enumerate(exp.jobs))
    emit(text, output)


@app.command("show")
def show_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = None,
    dp: DP = 1,
    param: Params = None,
    steps: Annotated[
        int,
        typer.Option(
            "--block",
            "--steps",
            help="At most this many steps a block (the terminal's width may allow fewer); `--steps` is its old name.",
            callback=in_range("--block", *STEPS_RANGE),
        ),
    ] = 24,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
    max_memory: MaxMemory = None,
    layers: LayersOption = None,
    partition: PartitionOption = None,
) -> None:
    """Draw the rank x step grid in the terminal, coloured by job type (plain text when piped)."""
    chosen = scenario(file, pp, microbatches, vpp, param, max_jobs=max_jobs, layers=layers, partition=partition, dp=dp)
    budget.refuse_sizes("show", pp, chosen.vpp, microbatches, max_memory)
    exp = diagnosed(chosen.expansion)
    budget.refuse_jobs("show", sum(map(len, exp.jobs)), max_memory)
    names = exp.type_names
    longest = max((len(j) for j in exp.jobs), default=0)
    if not out.is_terminal:  # a pipe or a file: plain text, every cell whole, blocks that fit COLUMNS (or 80)
        grid = text_grid(exp, width=steps, columns=terminal_columns())
        used = used_types(exp)
        letters = ", ".join(f"{letter_of(n)} = {n}" for t, n in enumerate(names) if t in used and letter_of(n))
        text = "\n\n".join([f"{escaped(exp.defn.name)}  pp={pp} vpp={chosen.vpp} microbatches={microbatches}", grid])
        emit(text + (f"\n{letters}" if letters else ""), None)
        return
    out.print(styled((escaped(exp.defn.name), "bold"), f"  pp={pp} vpp={chosen.vpp} microbatches={microbatches}"))
    # every cell whole: long names abbreviated (a legend follows), as many steps a block as the terminal holds
    short = abbreviations(exp)
    labels = {code: escaped(grid_label(exp, code, short)) for jobs in exp.jobs for code in set(jobs)}
    cell = max([len(x) for x in labels.values()] + [len(str(longest)), 2]) + 2
    per_block = max(1, min(steps, (out.width - 8) // cell))
    for lo in range(0, max(longest, 1), per_block):
        table = Table(show_header=True, header_style="dim", box=None, padding=(0, 0))
        table.add_column("", justify="right", style="bold", no_wrap=True, min_width=8)
        for s in range(lo, min(lo + per_block, longest)):
            table.add_column(str(s), justify="center", no_wrap=True, min_width=cell)
        for r, jobs in enumerate(exp.jobs):
            cells = [
                Text(f" {labels[code]} ", style_of(names[exp.decode(code)[0]])) for code in jobs[lo : lo + per_block]
            ]
            table.add_row(f"rank {r} ", *cells)
        out.print(table)
    out.print(Text("  ").join(Text(f" {escaped(n)} ", style_of(n)) for n in sorted(set(names))))
    if short:
        out.print(escaped(legend(exp, short)))


LIST_TABLE_COLUMNS = 100  # `list` draws its table from this width on


@app.command("list")
def list_cmd(
    fmt: Annotated[TextOrJson, typer.Option("--format", help="text or json.")] = TextOrJson.text,
) -> None:
    """The shipped schedules, with their summaries and constraints."""
    from ppdsl.language.resolve import load

    rows = []
    for path in library_files():
        try:
            defn = load(path)
        except DiagnosticError as e:
            rows.append({"file": path.name, "name": path.stem, "summary": f"(broken: {e})", "requires": []})
            continue
        rows.append(
            {
                "file": path.name,
                "name": defn.name,
                "summary": defn.summary,
                "requires": [r.source for r in defn.requires],
                "params": {p.name: p.default for p in defn.params.values()},
            }
        )
    if fmt is TextOrJson.json:
        print_data(json.dumps(rows, indent=2))
        return
    if out.width < LIST_TABLE_COLUMNS:  # too narrow for four columns: one block per schedule, the names whole
        import textwrap

        for row in rows:
            out.print(styled((escaped(row["file"]), "bold"), f"  {escaped(row['name'])}"), soft_wrap=True)
            for line in textwrap.wrap(row["summary"], max(out.width - 4, 20), break_long_words=False):
                out.print(f"    {escaped(line)}", soft_wrap=True)
            if row["requires"]:
                text = "requires " + ", ".join(row["requires"])
                for line in textwrap.wrap(text, max(out.width - 4, 20), break_long_words=False):
                    out.print(f"    {escaped(line)}", soft_wrap=True)
        return
    table = Table(show_header=True, header_style="bold")
    # the names a user types are never cut or wrapped; the prose wraps, folding a word longer than its column
    for col in ("file", "schedule"):
        table.add_column(col, no_wrap=True)
    table.add_column("summary", overflow="fold", ratio=1)
    table.add_column("requires", overflow="fold")
    for row in rows:
        table.add_row(
            *map(escaped, (row["file"], row["name"], row["summary"])), "\n".join(map(escaped, row["requires"]))
        )
    out.print(table)


@app.command("import")
def import_cmd(
    csv_file: Annotated[Path, typer.Argument(help="PyTorch pipelining compute-only CSV (one row per rank).")],
    output: Output = None,
    name: Annotated[str | None, typer.Option("--name", help="Schedule name (default: the file's stem).")] = None,
    placement: Annotated[
        str | None, typer.Option("--placement", help="looped | vshape (default: inferred from the CSV).")
    ] = None,
) -> None:
    """Turn a PyTorch compute-only CSV into a .sched literal table."""
    from ppdsl.reports.torch_csv import import_torch_csv

    try:
        text = import_torch_csv(csv_file, name=name, placement=placement)
    except DiagnosticError as e:
        fail(e.diagnostics)
    emit(text, output)


@app.command("explain")
def explain_cmd(
    code: Annotated[
        str | None, typer.Argument(help="A diagnostic code, e.g. E010 or s105; none: list them all.")
    ] = None,
) -> None:
    """What a diagnostic code means, with a wrong example and the fixed one (as `rustc --explain`)."""
    if code is None:
        for entry in codes.REGISTRY.values():
            out.print(f"{entry.code}  {entry.summary}", markup=False)
        return
    entry = codes.lookup(code)
    if entry is None:
        usage_error(f"unknown diagnostic code `{code}`", help="`ppdsl explain` lists every code")
    out.print(codes.explain(entry), markup=False, end="")
