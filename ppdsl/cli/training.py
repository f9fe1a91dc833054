"""`ppdsl run`: the command line of `ppdsl.runtime.run.run` (what `ppdsl.run(...)` calls too).

Its flags are `RunRequest`'s fields, read off the dataclass (name, default, help: ppdsl/runtime/request.py), so an
option is written once. This module parses them into a request and shows the run: the check's warnings, a
progress bar, the summary table. Everything else (validation, the check, training, the summary file) is the
runtime's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import statistics
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ppdsl.cli.app import app
from ppdsl.cli.common import SIZE_RANGE, diagnosed, err, in_range, out, styled
from ppdsl.common.codes import EXIT_VALID
from ppdsl.common.diagnostics import Diagnostic, SourceCache, render_all
from ppdsl.common.text import escaped
from ppdsl.common.units import format_bytes
from ppdsl.language.library import find_schedule
from ppdsl.runtime.request import RunRequest, flag

if typing.TYPE_CHECKING:
    from ppdsl.runtime.run import RunReport, RunStart

# what the command line adds to a field's option: a range checked as the flag is parsed, as every command's --vpp
CALLBACKS = {"vpp": in_range("--vpp", *SIZE_RANGE)}


class ConsoleObserver:
    """Shows a run on the terminal (a `RunObserver`): warnings on stderr, a progress bar or, when stdout is not
    a terminal, one line per step, and the summary table."""

    def __init__(self, console: Console, errors: Console):
        self.out, self.err = console, errors
        self._progress: Progress | None = None
        self._task = None
        self._status = None  # one process per rank: the spinner's line
        self._steps = 0

    def warnings(self, diagnostics: list[Diagnostic]) -> None:
        self.err.print(render_all(diagnostics, SourceCache(), color=self.err.is_terminal), markup=False)

    def resumed(self, checkpoint: Path, step: int, steps: int) -> None:
        self.out.print(f"resumed from `{checkpoint}` at step {step} of {steps}: {steps - step} to go")

    def dry_run(self, text: str) -> None:
        self.out.print(text, markup=False, end="")

    @contextlib.contextmanager
    def training(self, start: RunStart) -> Iterator[None]:
        sizes = f": pp={start.pp} vpp={start.vpp} microbatches={start.microbatches}, "
        if start.nproc_per_node is not None:
            where = f"{start.nnodes} node(s) x {start.nproc_per_node} processes, run directory `{start.launch_dir}`"
            self.out.print(styled((escaped(start.schedule), "bold"), sizes + where))
            self._steps = start.steps
            with self.out.status("training across processes") as self._status:
                yield
            self._status = None
            return
        self.out.print(
            styled(
                (escaped(start.schedule), "bold"),
                sizes + f"model {start.model}, batch {start.batch_size}, {start.jobs_per_step} jobs per step "
                f"(plan built in {(start.plan_build_seconds or 0) * 1e3:.0f} ms)",
            )
        )
        self._progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            console=self.out,
            transient=not self.out.is_terminal,
        )
        with self._progress:
            self._task = self._progress.add_task("train", total=start.steps, completed=start.first_step, loss="-")
            yield

    def step(self, step: int, loss: float) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, loss=f"{loss:.4f}")
        if not self.out.is_terminal:
            self.out.print(f"step {step:4d}  loss {loss:.4f}")

    def started_everywhere(self, step: int) -> None:
        if self._status is not None:
            self._status.update(f"training across processes: step {step} of {self._steps} (the slowest rank's)")
        if not self.out.is_terminal:
            self.out.print(f"step {step:4d}  started by every rank")

    def finished(self, report: RunReport) -> None:
        self.out.print(summary_table(report))


def summary_table(report: RunReport) -> Table:
    table = Table(title="summary", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    if report.losses:
        first, last = statistics.fmean(report.losses[0]), statistics.fmean(report.losses[-1])
        table.add_row("loss", f"{first:.4f} -> {last:.4f}")
    steady = report.step_seconds[1:] or report.step_seconds
    if report.launch_dir is not None:  # one process per rank
        if steady:
            table.add_row("time per step", f"{statistics.median(steady) * 1e3:.1f} ms (slowest rank, median)")
        comm = ", ".join(f"{s * 1e3:.0f}" for s in (report.comm_seconds or {}).values())
        table.add_row("sending", f"{comm} ms per rank over the run")
        table.add_row("simulated bubble", f"{report.simulated_bubble:.1%}")
        return table
    if steady:
        per_step = statistics.median(steady)
        table.add_row(
            "time per step", f"{per_step * 1e3:.1f} ms (median; first step {report.step_seconds[0] * 1e3:.0f} ms)"
        )
        table.add_row("time per job", f"{per_step / max(report.jobs_per_step, 1) * 1e3:.3f} ms")
    table.add_row("jobs per step", str(report.jobs_per_step))
    table.add_row(
        "plan build",
        f"{(report.plan_build_seconds or 0) * 1e3:.0f} ms (trainer ready in {report.trainer_seconds or 0:.2f} s)",
    )
    table.add_row(
        "simulated bubble", f"{report.simulated_bubble:.1%} (makespan {report.simulated_makespan:g} in cost units)"
    )
    peaks = ", ".join(f"{p:g}" for p in report.peak_activations)
    table.add_row("peak activations", f"{peaks} (per rank, in micro-batch activations)")
    if report.peak_bytes is not None:
        held = ", ".join(format_bytes(b) for b in report.peak_bytes)
        table.add_row("peak held", f"{held} (per rank, at job boundaries: variables the plan keeps, numel x itemsize)")
    if report.host_peak_bytes is not None:
        host = ", ".join(format_bytes(b) for b in report.host_peak_bytes)
        table.add_row("host store", f"{host} (per rank, offloaded; on CPU an emulation: one memory)")
    return table


def _run(**options: Any) -> None:
    """Train with the schedule's plan: every stage emulated on this machine, Paddle's standalone executor."""
    from ppdsl.runtime.run import run

    options["schedule"] = str(find_schedule(options["schedule"]))
    request = diagnosed(RunRequest, **options)
    diagnosed(run, request, ConsoleObserver(out, err))
    if request.profile is not None and not request.clustered:
        out.print(f"profile of the last {min(request.profile_steps, request.steps)} steps: `{request.profile}`")
    raise typer.Exit(EXIT_VALID)


def command_parameters(request_type: type = RunRequest) -> list[inspect.Parameter]:
    """`ppdsl run`'s parameters, one per field of the request: its flag, short alias, help and default."""
    hints = typing.get_type_hints(request_type)
    parameters = []
    for f in dataclasses.fields(request_type):
        meta = f.metadata
        if meta["argument"]:
            info = typer.Argument(help=meta["help"], metavar="file")  # as every command names its .sched
        else:
            names = [flag(f.name), *([meta["short"]] if meta["short"] else [])]
            info = typer.Option(
                *names, help=meta["help"], **({"callback": CALLBACKS[f.name]} if f.name in CALLBACKS else {})
            )
        cli_type = meta["cli_type"] or hints[f.name]
        annotation = Annotated[cli_type, info]
        parameters.append(
            inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=annotation)
        )
    return parameters


_run.__signature__ = inspect.Signature(command_parameters())  # what typer reads the command's parameters from
run_cmd = app.command("run")(_run)
