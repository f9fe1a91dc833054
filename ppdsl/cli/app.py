"""The `ppdsl` Typer application; the commands register themselves on it from their modules (`ppdsl.cli`)."""

from __future__ import annotations

from typing import Annotated

import typer

from ppdsl.cli.common import out
from ppdsl.common.codes import EXIT_VALID
from ppdsl.common.files import forget_inputs
from ppdsl.common.version import __version__

app = typer.Typer(
    name="ppdsl",
    help="Pipeline-parallel training schedules as declarative .sched files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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
    forget_inputs()  # a new command has read nothing yet (what it reads, its outputs may not overwrite)
