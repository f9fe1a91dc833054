"""The `ppdsl` Typer application; the commands register themselves on it from their modules (`ppdsl.cli`)."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from ppdsl.cli.common import out
from ppdsl.common.codes import EXIT_VALID
from ppdsl.common.files import forget_inputs
from ppdsl.common.text import sane_terminal_environment
from ppdsl.common.version import __version__


class PpdslGroup(TyperGroup):
    """The `ppdsl` command group: each invocation first makes the terminal size in the environment sane, before
    click parses (and `--help` draws) anything. (`ppdsl.cli` does it once more at import, before its consoles.)"""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        sane_terminal_environment(os.environ)
        return super().main(*args, **kwargs)


app = typer.Typer(
    name="ppdsl",
    cls=PpdslGroup,
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
