"""The `ppdsl` command line. Thin: parse options, call the front end, print. No paddle import here."""

from __future__ import annotations

import json
import os
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


def _write_atomic(path: Path, text: str) -> None:
    """Write next to the target, then rename: a failure never leaves a half-written file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or Path("."), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
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


def _parse_costs(spec: str | None) -> dict[str, float] | None:
    if not spec:
        return None
    costs = {}
    for part in spec.split(","):
        key, sep, raw = part.partition("=")
        try:
            costs[key.strip()] = float(raw)
        except ValueError:
            _fail([Diagnostic("E007", f"bad cost `{part}`", help="write `--cost forward=1,backward=2`")])
        if not sep:
            _fail([Diagnostic("E007", f"bad cost `{part}`", help="write `--cost forward=1,backward=2`")])
    return costs


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
    cost: Annotated[str | None, typer.Option("--cost", help="Override costs: `forward=1,backward=2`.")] = None,
) -> None:
    """Prove a schedule complete, ordered and deadlock-free for these sizes; report bubble and memory."""
    try:
        params = parse_params(param)
    except DiagnosticError as e:
        _fail(e.diagnostics)
    result = check(find_schedule(file), pp, microbatches, vpp, params, rendezvous, _parse_costs(cost))
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
    for col in ("rank", "jobs", "busy", "idle", "bubble", "peak activations", "limit"):
        table.add_column(col, justify="right")
    for s in ex.ranks:
        limit = exp.memory_limit[s.rank]
        table.add_row(
            str(s.rank),
            str(s.jobs),
            f"{s.busy:g}",
            f"{s.idle:g}",
            f"{s.idle / ex.makespan:.1%}" if ex.makespan else "-",
            f"{s.peak_activations:g}",
            "-" if limit is None else f"{limit:g}",
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
    )
    try:
        code = run_training(options, out, err)
    except DiagnosticError as e:
        codes = {d.code for d in e.diagnostics}
        _fail(e.diagnostics, EXIT_USAGE if any(c.startswith("E") for c in codes) else EXIT_INVALID)
    raise typer.Exit(code)


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
