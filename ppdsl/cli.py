"""The `ppdsl` command line. Thin: parse options, call the front end, print. No paddle import here."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ppdsl import __version__
from ppdsl.checker import EXIT_INVALID, EXIT_USAGE, EXIT_VALID, CheckResult, check
from ppdsl.diagnostics import Diagnostic, DiagnosticError, SourceCache, render_all
from ppdsl.expand import expand, parse_params
from ppdsl.library import find_schedule, library_files
from ppdsl.units import format_bytes

app = typer.Typer(
    name="ppdsl",
    help="Pipeline-parallel training schedules as declarative .sched files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

JOB_COLOURS = {
    "forward": "bold white on blue",
    "backward": "bold white on green",
    "backward_b": "bold white on dark_green",
    "backward_w": "bold black on yellow",
    "optimizer": "bold white on magenta",
}


class CheckFormat(str, Enum):
    text = "text"
    json = "json"


class ExpandFormat(str, Enum):
    json = "json"
    csv = "csv"
    table = "table"
    torch_csv = "torch-csv"


File = Annotated[str, typer.Argument(help="A .sched file, or the name of a shipped schedule (`1f1b`).")]
PP = Annotated[int, typer.Option("--pp", help="Pipeline degree (number of ranks).")]
Micro = Annotated[int, typer.Option("--microbatches", "-m", help="Micro-batches per step.")]
VPP = Annotated[int, typer.Option("--vpp", help="Chunks (virtual stages) per rank.")]
Params = Annotated[list[str] | None, typer.Option("--param", help="Schedule parameter, `name=value`; repeatable.")]


def _fail(diagnostics: list[Diagnostic], code: int = EXIT_USAGE) -> None:
    err.print(render_all(diagnostics, SourceCache(), color=err.is_terminal), markup=False)
    raise typer.Exit(code)


def _write_atomic(path: Path, text: str | bytes) -> None:
    """Write next to the target, then rename: a failure never leaves a half-written file. Bytes for pictures."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make every output private to its writer
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    try:
        _write_atomic(output, text)
    except OSError as e:
        _fail([Diagnostic("E000", f"cannot write `{output}`: {e.strerror or e}", help="check the directory")])


def _load_expansion(file: str, pp: int, microbatches: int, vpp: int, params: list[str] | None):
    from ppdsl.resolve import load

    try:
        defn = load(find_schedule(file))
        return expand(defn, pp, microbatches, vpp, parse_params(params))
    except DiagnosticError as e:
        code = EXIT_USAGE if any(d.code.startswith("E") for d in e.diagnostics) else EXIT_INVALID
        _fail(e.diagnostics, code)


@app.command("check")
def check_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = 1,
    param: Params = None,
    fmt: Annotated[CheckFormat, typer.Option("--format", help="Report format.")] = CheckFormat.text,
    rendezvous: Annotated[
        bool, typer.Option("--rendezvous", help="A send waits for its receive (blocking transport, e.g. gloo).")
    ] = False,
    cost: CostPairs = None,
    costs: CostFile = None,
    model: ModelOption = None,
    batch_size: BatchOption = 32,
    memory_limit: Annotated[
        str | None, typer.Option("--memory-limit", help="Per-rank limit: `2GiB` with --model, else activations.")
    ] = None,
) -> None:
    """Prove a schedule complete, ordered and deadlock-free for these sizes; report bubble and memory."""
    from ppdsl.units import parse_size

    params = _diagnosed(parse_params, param)
    limit = _diagnosed(parse_size, memory_limit) if memory_limit is not None else None
    _measured_on(model, batch_size, microbatches)  # a batch that does not split fails before paddle loads
    spec = _cost_spec(cost, costs)
    result = check(
        find_schedule(file),
        pp,
        microbatches,
        vpp,
        params,
        rendezvous,
        spec,
        model=model,
        batch_size=batch_size,
        memory_limit=limit,
    )
    if fmt is CheckFormat.json:
        out.print(json.dumps(result.to_dict(), indent=2), markup=False)
    else:
        if result.diagnostics:
            err.print(render_all(result.diagnostics, SourceCache(), color=err.is_terminal), markup=False)
        if result.valid:
            _print_report(result)
    raise typer.Exit(result.exit_code)


def _print_report(result: CheckResult) -> None:
    ex, exp = result.execution, result.expansion
    size = f"pp={result.pp} vpp={result.vpp} microbatches={result.microbatches}"
    out.print(f"[green]ok[/green]: `{exp.defn.name}` is complete, ordered and deadlock-free at {size}")
    out.print(f"makespan {ex.makespan:g}, bubble {ex.bubble_ratio:.1%}")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    peak = "peak memory" if exp.memory_unit == "bytes" else "peak activations"
    for col in ("rank", "jobs", "busy", "idle", "bubble", peak, "limit"):
        table.add_column(col, justify="right")
    in_bytes = exp.memory_unit == "bytes"
    for s in ex.ranks:
        limit = exp.memory_limit[s.rank]
        table.add_row(
            str(s.rank),
            str(s.jobs),
            f"{s.busy:g}",
            f"{s.idle:g}",
            f"{s.idle / ex.makespan:.1%}" if ex.makespan else "-",
            format_bytes(s.peak_activations) if in_bytes else f"{s.peak_activations:g}",
            "-" if limit is None else (format_bytes(limit) if in_bytes else f"{limit:g}"),
        )
    out.print(table)


@app.command("run")
def run_cmd(
    file: Annotated[str, typer.Argument(help="A .sched file or shipped schedule name.")] = "1f1b",
    pp: Annotated[int, typer.Option("--pp", help="Pipeline degree (stages emulated on this machine).")] = 4,
    microbatches: Annotated[int, typer.Option("--microbatches", "-m", help="Micro-batches per step.")] = 8,
    vpp: VPP = 1,
    param: Params = None,
    steps: Annotated[int, typer.Option("--steps", help="Training steps.")] = 30,
    model: Annotated[
        str | None, typer.Option("--model", help="`module:function` building the forward pass (see README).")
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Samples per step (all micro-batches).")] = 32,
    lr: Annotated[float, typer.Option("--lr", help="Learning rate.")] = 0.01,
    optimizer: Annotated[str, typer.Option("--optimizer", help="adam or sgd.")] = "adam",
    seed: Annotated[int, typer.Option("--seed", help="Seed of parameters and synthetic data.")] = 0,
    summary_json: Annotated[
        Path | None, typer.Option("--summary-json", help="Write losses, checksums and times here.")
    ] = None,
    save_dir: Annotated[Path | None, typer.Option("--save-dir", help="Write checkpoints here.")] = None,
    save_every: Annotated[int, typer.Option("--save-every", help="Checkpoint every N steps (0: at the end).")] = 0,
    resume: Annotated[Path | None, typer.Option("--resume", help="Continue from this --save-dir.")] = None,
    profile: Annotated[
        Path | None, typer.Option("--profile", help="Write the last steps' measured job timings (Chrome trace).")
    ] = None,
    profile_steps: Annotated[int, typer.Option("--profile-steps", help="How many final steps to profile.")] = 3,
    nproc_per_node: Annotated[
        int | None,
        typer.Option("--nproc-per-node", help="One process per rank via paddle.distributed.launch (K per node)."),
    ] = None,
    nnodes: Annotated[int, typer.Option("--nnodes", help="Nodes, with --nproc-per-node.")] = 1,
    master: Annotated[str | None, typer.Option("--master", help="HOST:PORT of the rendezvous, several nodes.")] = None,
    node_rank: Annotated[int, typer.Option("--node-rank", help="This node's index, several nodes.")] = 0,
    run_dir: Annotated[Path, typer.Option("--run-dir", help="Spec, logs and results of a launch.")] = Path("ppdsl-run"),
    comm_timeout: Annotated[
        float, typer.Option("--comm-timeout", help="Seconds a receive may wait before the run stops.")
    ] = 20.0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --nproc-per-node: print the command and every rank's jobs.")
    ] = False,
) -> None:
    """Train with the schedule's plan: every stage emulated on this machine, Paddle's standalone executor."""
    from ppdsl.run import RunOptions, run_training

    options = RunOptions(
        schedule=str(find_schedule(file)),
        pp=pp,
        microbatches=microbatches,
        vpp=vpp,
        params=param,
        steps=steps,
        model=model,
        batch_size=batch_size,
        lr=lr,
        optimizer=optimizer,
        seed=seed,
        summary_json=summary_json,
        save_dir=save_dir,
        save_every=save_every,
        resume=resume,
        profile=profile,
        profile_steps=profile_steps,
    )
    if nproc_per_node is not None:
        from ppdsl.launch import LaunchOptions

        options.launch = LaunchOptions(
            nproc_per_node, nnodes, master, node_rank, run_dir, comm_timeout=comm_timeout, dry_run=dry_run
        )
    elif dry_run:
        _fail([Diagnostic("E007", "--dry-run goes with --nproc-per-node")])
    try:
        code = run_training(options, out, err)
    except DiagnosticError as e:
        codes = {d.code for d in e.diagnostics}
        _fail(e.diagnostics, EXIT_USAGE if any(c.startswith("E") for c in codes) else EXIT_INVALID)
    raise typer.Exit(code)


@app.command("calibrate")
def calibrate_cmd(
    profile: Annotated[Path, typer.Argument(help="A measured profile from `ppdsl run --profile`.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Cost file to write (JSON).")] = Path("costs.json"),
    fmt: Annotated[CheckFormat, typer.Option("--format", help="text or json report.")] = CheckFormat.text,
) -> None:
    """Turn measured job timings into simulator costs (`--costs FILE`), and compare a simulation with them."""
    from ppdsl.calibrate import calibrate, compare
    from ppdsl.trace import read_trace

    try:
        measured = read_trace(profile)
        costs = calibrate(measured)
        comparison = compare(measured, costs)
    except DiagnosticError as e:
        _fail(e.diagnostics)
    _emit(json.dumps(costs, indent=1), output)
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
    if fmt is CheckFormat.json:
        out.print(json.dumps(report, indent=2), markup=False)
        return
    table = Table(show_header=True, header_style="bold", box=None)
    table.add_column("job type")
    table.add_column("mean time", justify="right")
    for name, seconds in costs["costs"].items():
        table.add_row(name, f"{seconds * 1e3:.3f} ms")
    out.print(f"{costs['samples']} measured jobs -> `{output}`")
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


@app.command("expand")
def expand_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = 1,
    param: Params = None,
    fmt: Annotated[ExpandFormat, typer.Option("--format", help="Output format.")] = ExpandFormat.json,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to a file instead of stdout.")] = None,
) -> None:
    """Print every rank's job order for these sizes."""
    from ppdsl import formats

    exp = _load_expansion(file, pp, microbatches, vpp, param)
    if fmt is ExpandFormat.json:
        text = formats.to_json(exp)
    elif fmt is ExpandFormat.csv:
        text = formats.to_csv(exp)
    elif fmt is ExpandFormat.torch_csv:
        text = formats.to_torch_csv(exp)
    else:
        text = "\n".join(f"rank {r}: " + " ".join(map(exp.label, jobs)) for r, jobs in enumerate(exp.jobs))
    _emit(text, output)


@app.command("compile")
def compile_cmd(
    file: File,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Write the plan module here (`-` for stdout; default plan_<name>.py)."),
    ] = None,
    pp: Annotated[int | None, typer.Option("--pp", help="Check the schedule at these sizes before compiling.")] = None,
    microbatches: Annotated[int | None, typer.Option("--microbatches", "-m", help="Micro-batches per step.")] = None,
    vpp: Annotated[int | None, typer.Option("--vpp", help="Chunks (virtual stages) per rank.")] = None,
    param: Params = None,
    literal: Annotated[
        bool, typer.Option("--literal", help="Make `job_list` the expanded order of these sizes, for them only.")
    ] = False,
) -> None:
    """Compile a schedule into a plan module: readable Python whose build_plan() makes its Paddle plan."""
    from ppdsl.checker import check_expansion
    from ppdsl.codegen.generate import Sizes, generate_plan_module
    from ppdsl.resolve import load

    sized = pp is not None or microbatches is not None or vpp is not None or bool(param)
    if (literal or sized) and (pp is None or microbatches is None):
        what = "`--literal` compiles for given sizes" if literal else "sizes and parameters are checked together"
        _fail([Diagnostic("E007", f"{what}: pass `--pp P -m M` (and `--vpp V` for more than one chunk)")])
    path = find_schedule(file)
    try:
        defn = load(path)
        sizes = Sizes(pp, microbatches, vpp or 1, parse_params(param)) if sized else None
        if sizes is not None:  # a plan for sizes the checker rejects would hang or fail on the cluster
            result = check_expansion(expand(defn, sizes.pp, sizes.microbatches, sizes.vpp, sizes.params))
            if result.diagnostics:
                err.print(render_all(result.diagnostics, SourceCache(), color=err.is_terminal), markup=False)
            if not result.valid:
                raise typer.Exit(result.exit_code)
        text = generate_plan_module(defn, path, literal_sizes=sizes if literal else None)
    except DiagnosticError as e:
        _fail(e.diagnostics, EXIT_USAGE if any(d.code.startswith("E") for d in e.diagnostics) else EXIT_INVALID)
    if output == "-":
        _emit(text, None)
        return
    target = Path(output) if output else Path(f"plan_{_module_stem(defn.name)}.py")
    _emit(text, target)
    form = "a literal order" if literal else "tables" if defn.tables else "loops"
    out.print(f"wrote {target}: `{defn.name}`, job_list as {form}", markup=False)


def _module_stem(name: str) -> str:
    """A schedule name as a module name: `Interleaved1F1B` -> `interleaved1f1b`, `ZB-H1` -> `zb_h1`."""
    return re.sub(r"[^0-9a-z_]", "_", name.lower()) or "schedule"


@app.command("show")
def show_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = 1,
    param: Params = None,
    steps: Annotated[int, typer.Option("--steps", help="Columns per row block.")] = 24,
) -> None:
    """Draw the rank x step grid in the terminal, coloured by job type."""
    exp = _load_expansion(file, pp, microbatches, vpp, param)
    names = exp.type_names
    longest = max((len(j) for j in exp.jobs), default=0)
    out.print(f"[bold]{exp.defn.name}[/bold]  pp={pp} vpp={vpp} microbatches={microbatches}")
    for lo in range(0, max(longest, 1), steps):
        table = Table(show_header=True, header_style="dim", box=None, padding=(0, 0))
        table.add_column("", justify="right", style="bold")
        for s in range(lo, min(lo + steps, longest)):
            table.add_column(str(s), justify="center")
        for r, jobs in enumerate(exp.jobs):
            cells = []
            for code in jobs[lo : lo + steps]:
                t = exp.decode(code)[0]
                style = JOB_COLOURS.get(names[t], "bold black on cyan")
                cells.append(f"[{style}] {exp.label(code)} [/]")
            table.add_row(f"rank {r} ", *cells)
        out.print(table)
    legend = "  ".join(f"[{JOB_COLOURS.get(n, 'bold black on cyan')}] {n} [/]" for n in sorted(set(names)))
    out.print(legend)


# ---- simulation pictures and reports: trace, plot, compare, sweep (ppdsl/trace.py, plot.py, reports.py)

ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="Measure activation bytes on this model (`module:function` or `builtin`)."),
]
BatchOption = Annotated[int, typer.Option("--batch-size", help="Samples per step, with --model.")]


def _measured_on(model: str | None, batch_size: int, microbatches: int) -> tuple[str | None, int] | None:
    """(model spec for ppdsl.runtime.model.load_model, batch size), or None without --model."""
    if model is None:
        return None
    if batch_size < microbatches or batch_size % microbatches:
        _fail([Diagnostic("E036", f"batch size {batch_size} does not split into {microbatches} micro-batches")])
    return (None if model == "builtin" else model, batch_size)


class TableFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


PICTURE_SUFFIXES = (".png", ".svg", ".pdf")
CostPairs = Annotated[
    str | None,
    typer.Option("--cost", help="Override costs: `forward=1,backward=2`; `latency=` and `bandwidth=` for links."),
]
CostFile = Annotated[
    Path | None, typer.Option("--costs", help="Cost file (JSON from `ppdsl calibrate`): times in seconds.")
]
Rendezvous = Annotated[
    bool, typer.Option("--rendezvous", help="A send waits for its receive (blocking transport, e.g. gloo).")
]


def _diagnosed(fn, *args, **kwargs):
    """Call into the front end; its diagnostics end the command with `check`'s exit codes (E: 2, S: 1)."""
    try:
        return fn(*args, **kwargs)
    except DiagnosticError as e:
        _fail(e.diagnostics, EXIT_USAGE if any(d.code.startswith("E") for d in e.diagnostics) else EXIT_INVALID)


def _cost_spec(cost: str | None, costs: Path | None):
    from ppdsl.costs import CostSpec, parse_cost_pairs

    return _diagnosed(CostSpec.read, _diagnosed(parse_cost_pairs, cost), costs)


def _picture_format(output: Path) -> str:
    suffix = output.suffix.lower()
    if suffix not in PICTURE_SUFFIXES:
        _fail([Diagnostic("E007", f"cannot draw `{output}`", help="name a .png, .svg or .pdf file")])
    return suffix[1:]


def _save_picture(draw, output: Path) -> None:
    """Draw into memory, then write through the atomic writer: a failed plot leaves no half-written file."""
    import io

    fmt = _picture_format(output)
    buf = io.BytesIO()
    draw(buf, fmt)
    try:
        _write_atomic(output, buf.getvalue())
    except OSError as e:
        _fail([Diagnostic("E000", f"cannot write `{output}`: {e.strerror or e}", help="check the directory")])


@app.command("trace")
def trace_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    vpp: VPP = 1,
    param: Params = None,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the trace here (else stdout).")] = None,
) -> None:
    """Simulate, and write the run as a Chrome trace / Perfetto JSON (1 cost unit = 1 ms).

    A process per rank, compute / send / receive tracks, an arrow from each send to its receive; a cost file's
    times are real (seconds unless it says `"unit"`).
    """
    from ppdsl.reports import run_simulation
    from ppdsl.trace import trace_json

    spec = _cost_spec(cost, costs)
    params = _diagnosed(parse_params, param)
    sim = _diagnosed(run_simulation, find_schedule(file), pp, microbatches, vpp, params, spec, rendezvous)
    _emit(trace_json(sim, spec.us_per_unit, spec.measured), output)
    if output is not None:
        jobs = sum(len(j) for j in sim.expansion.jobs)
        out.print(
            f"wrote {output}: {jobs} jobs, {len(sim.transfers)} transfers, makespan {sim.makespan:g}, "
            f"bubble {sim.bubble_ratio:.1%}; open it in https://ui.perfetto.dev",
            markup=False,
        )


@app.command("plot")
def plot_cmd(
    file: File,
    pp: PP,
    microbatches: Micro,
    output: Annotated[Path, typer.Option("--output", "-o", help="The picture: .png, .svg or .pdf.")],
    vpp: VPP = 1,
    param: Params = None,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    measured: Annotated[
        Path | None, typer.Option("--measured", help="Draw this profile (Chrome trace, `ppdsl run --profile`).")
    ] = None,
    dpi: Annotated[int, typer.Option("--dpi", help="Resolution of a .png.")] = 100,
    model: ModelOption = None,
    batch_size: BatchOption = 32,
) -> None:
    """Draw the timeline: a Gantt chart of every rank's jobs (idle hatched) over its in-flight activations."""
    from ppdsl.plot import Timeline, memory_timelines, plot_timeline, summary
    from ppdsl.reports import prepare
    from ppdsl.simulate import simulate_expansion
    from ppdsl.trace import read_trace, unit_name

    _picture_format(output)
    spec = _cost_spec(cost, costs)
    params = _diagnosed(parse_params, param)
    exp = _diagnosed(prepare, find_schedule(file), pp, microbatches, vpp, params, spec)
    measured_on = _measured_on(model, batch_size, microbatches)
    if measured_on is not None:
        from ppdsl.runtime.memory import apply_model_memory

        _diagnosed(apply_model_memory, exp, *measured_on)
    if measured is not None:
        profile = _diagnosed(read_trace, measured)
        jobs = profile.jobs
        ranks = max(pp, profile.ranks)
        makespan, bubble = summary(jobs, ranks)
        unit = profile.time_unit
        source = f"measured ({measured.name})"
    else:
        sim = _diagnosed(simulate_expansion, exp, rendezvous)
        jobs, ranks = list(sim.jobs()), pp
        makespan, bubble = sim.makespan, sim.bubble_ratio
        unit = unit_name(spec.us_per_unit) if spec.measured else "cost units"
        source = "simulated"
    memory = memory_timelines(jobs, exp, ranks)
    peak = max((level for points in memory for _, level in points), default=0.0)
    title = (
        f"{exp.defn.name} ({source})   pp={pp}  vpp={vpp}  microbatches={microbatches}   "
        f"makespan {makespan:.6g} {unit}   bubble {bubble:.1%}   "
        + (f"peak memory {format_bytes(peak)}" if exp.memory_unit == "bytes" else f"peak activations {peak:g}")
    )
    limits, label = exp.memory_limit, "in-flight\nactivations"
    if exp.memory_unit == "bytes":  # measured on a model: draw KiB or MiB
        scale, suffix = (2**20, "MiB") if peak >= 2**20 else (2**10, "KiB")
        memory = [[(t, level / scale) for t, level in points] for points in memory]
        limits = [None if x is None else x / scale for x in limits]
        label = f"activation\nmemory ({suffix})"
    timeline = Timeline(jobs, ranks, vpp, title, f"time ({unit})", memory, limits, label)
    _save_picture(lambda buf, fmt: plot_timeline(timeline, buf, dpi=dpi, fmt=fmt), output)
    out.print(f"wrote {output}: {title}", markup=False)


def _rows_table(rows, title: str, first: dict[str, list[str]], limit: float | None = None) -> Table:
    """Rows of `ppdsl.reports` as a rich table: the `first` columns (header -> cells), then the measures, then
    why a row failed."""
    table = Table(title=title, title_justify="left", show_header=True, header_style="bold", box=None)
    for col in first:
        table.add_column(col, justify="left" if col == "schedule" else "right")
    for col in ("makespan", "bubble", "peak act."):
        table.add_column(col, justify="right")
    if limit is not None:
        in_bytes = any(r.memory_unit == "bytes" for r in rows)
        table.add_column(f"<= {format_bytes(limit) if in_bytes else f'{limit:g}'}", justify="center")
    table.add_column("note")
    for i, row in enumerate(rows):
        cells = [column[i] for column in first.values()]
        if row.status == "ok":
            peak = format_bytes(row.peak_activations) if row.memory_unit == "bytes" else f"{row.peak_activations:.4g}"
            cells += [f"{row.makespan:.6g}", f"{row.bubble_ratio:.1%}", peak]
            if limit is not None:
                cells.append("[bold red]OVER[/]" if row.over_limit else "[green]ok[/]")
            cells.append("")
        else:
            cells += ["-", "-", "-"] + (["-"] if limit is not None else [])
            cells.append(f"[{'yellow' if row.status == 'rejected' else 'red'}]{row.status}[/]: {row.reason}")
        table.add_row(*cells)
    return table


@app.command("compare")
def compare_cmd(
    pp: PP,
    microbatches: Micro,
    files: Annotated[list[str] | None, typer.Argument(help="Schedules (.sched files or shipped names).")] = None,
    vpp: Annotated[
        int | None,
        typer.Option("--vpp", help="Chunks per rank for all (default: each schedule's smallest, costs / its vpp)."),
    ] = None,
    library: Annotated[bool, typer.Option("--library", help="Compare every shipped schedule too.")] = False,
    memory_limit: Annotated[
        str | None,
        typer.Option("--memory-limit", help="Mark schedules over it: activations, or `2GiB` with --model."),
    ] = None,
    param: Params = None,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, json or csv.")] = TableFormat.table,
    model: ModelOption = None,
    batch_size: BatchOption = 32,
) -> None:
    """Makespan, bubble and peak activations of several schedules at one size, best first."""
    from ppdsl.reports import compare, ranked, rows_csv, rows_json
    from ppdsl.units import parse_size

    memory_limit = _diagnosed(parse_size, memory_limit) if memory_limit is not None else None
    measured_on = _measured_on(model, batch_size, microbatches)

    named = [find_schedule(f) for f in files or []]
    shipped = [p for p in library_files() if p.resolve() not in {n.resolve() for n in named}] if library else []
    if not named and not shipped:
        _fail([Diagnostic("E007", "nothing to compare", help="name schedules, or pass `--library`")])
    spec = _cost_spec(cost, costs)
    params = _diagnosed(parse_params, param)
    rows = []
    for group, broken_ok in ((named, False), (shipped, True)):
        if group:
            args = (group, pp, microbatches, vpp, params, spec, memory_limit, rendezvous, broken_ok, measured_on)
            rows += _diagnosed(compare, *args)
    rows = ranked(rows)  # named and shipped schedules were measured apart
    if fmt is TableFormat.json:
        header = {"pp": pp, "microbatches": microbatches, "vpp": vpp, "memory_limit": memory_limit}
        _emit(rows_json(rows, **header, normalised=vpp is None), None)
    elif fmt is TableFormat.csv:
        _emit(rows_csv(rows), None)
    else:
        how = f"vpp={vpp}" if vpp is not None else "each at its smallest vpp; costs and activations per rank (/ vpp)"
        first = {
            "#": [str(i + 1) if r.status == "ok" else "" for i, r in enumerate(rows)],
            "schedule": [r.schedule for r in rows],
            "vpp": [str(r.vpp or "-") for r in rows],
        }
        out.print(_rows_table(rows, f"pp={pp} microbatches={microbatches} ({how})", first, memory_limit))
        if measured_on is not None:
            out.print(f"peak memory measured on `{model}` at batch {batch_size}")
    named_paths = {str(p) for p in named}
    failed = [r for r in rows if r.file in named_paths and r.status != "ok"]
    raise typer.Exit(EXIT_INVALID if failed or not any(r.status == "ok" for r in rows) else EXIT_VALID)


@app.command("sweep")
def sweep_cmd(
    file: File,
    pp: Annotated[str, typer.Option("--pp", help="Pipeline degrees: `4,8`, `2..16` (doubling), `2..8:2`.")],
    microbatches: Annotated[str, typer.Option("--microbatches", "-m", help="Micro-batches: `8..64`, `8,12,16`.")],
    vpp: VPP = 1,
    param: Params = None,
    cost: CostPairs = None,
    costs: CostFile = None,
    rendezvous: Rendezvous = False,
    fmt: Annotated[TableFormat, typer.Option("--format", help="table, json or csv.")] = TableFormat.table,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Also draw bubble and memory against sizes (.png, .svg).")
    ] = None,
) -> None:
    """Bubble and peak activations of one schedule over pipeline degrees and micro-batch counts."""
    from ppdsl.plot import plot_sweep
    from ppdsl.reports import parse_sizes, rows_csv, rows_json, sweep

    if output is not None:
        _picture_format(output)
    pps = _diagnosed(parse_sizes, pp, "--pp")
    ms = _diagnosed(parse_sizes, microbatches, "-m")
    spec = _cost_spec(cost, costs)
    params = _diagnosed(parse_params, param)
    rows = _diagnosed(sweep, find_schedule(file), pps, ms, vpp, params, spec, rendezvous)
    name = next((r.schedule for r in rows), file)
    title = f"{name}  vpp={vpp}  pp in {pps}  microbatches in {ms}"
    if fmt is TableFormat.json:
        _emit(rows_json(rows, schedule=name, pp=pps, microbatches=ms, vpp=vpp), None)
    elif fmt is TableFormat.csv:
        _emit(rows_csv(rows), None)
    else:
        first = {"pp": [str(r.pp) for r in rows], "microbatches": [str(r.microbatches) for r in rows]}
        out.print(_rows_table(rows, title, first))
    if output is not None:
        data = [r.to_dict() for r in rows]
        _save_picture(lambda buf, fmt_: plot_sweep(data, title, buf, fmt=fmt_), output)
        if fmt is TableFormat.table:
            out.print(f"wrote {output}", markup=False)
    raise typer.Exit(EXIT_VALID if any(r.status == "ok" for r in rows) else EXIT_INVALID)


@app.command("list")
def list_cmd(
    fmt: Annotated[CheckFormat, typer.Option("--format", help="text or json.")] = CheckFormat.text,
) -> None:
    """The shipped schedules, with their summaries and constraints."""
    from ppdsl.resolve import load

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
    if fmt is CheckFormat.json:
        out.print(json.dumps(rows, indent=2), markup=False)
        return
    table = Table(show_header=True, header_style="bold")
    table.add_column("file")
    table.add_column("schedule")
    table.add_column("summary")
    table.add_column("requires")
    for row in rows:
        table.add_row(row["file"], row["name"], row["summary"], "\n".join(row["requires"]))
    out.print(table)


@app.command("import")
def import_cmd(
    csv_file: Annotated[Path, typer.Argument(help="PyTorch pipelining compute-only CSV (one row per rank).")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the .sched here.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Schedule name (default: the file's stem).")] = None,
    placement: Annotated[
        str | None, typer.Option("--placement", help="looped | vshape (default: inferred from the CSV).")
    ] = None,
) -> None:
    """Turn a PyTorch compute-only CSV into a .sched literal table."""
    from ppdsl.torch_csv import import_torch_csv

    try:
        text = import_torch_csv(csv_file, name=name, placement=placement)
    except DiagnosticError as e:
        _fail(e.diagnostics)
    _emit(text, output)


def _version(value: bool) -> None:
    if value:
        out.print(f"ppdsl {__version__}")
        raise typer.Exit(EXIT_VALID)


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Pipeline-parallel training schedules as declarative .sched files."""


def run() -> None:
    """Console entry point: usage errors exit 2, never a traceback for bad input."""
    try:
        app()
    except DiagnosticError as e:
        err.print(render_all(e.diagnostics, SourceCache()), markup=False)
        sys.exit(EXIT_USAGE)


if __name__ == "__main__":
    run()
