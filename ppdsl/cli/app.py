"""The `ppdsl` Typer application; the commands register themselves on it from their modules (`ppdsl.cli`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperGroup, TyperOption

from ppdsl.cli.common import out
from ppdsl.common.codes import EXIT_VALID
from ppdsl.common.files import forget_inputs
from ppdsl.common.text import sane_terminal_environment
from ppdsl.common.version import __version__

# `ppdsl --help` lists the commands in the order of a user's path: train, prove, look, search, generate, then the
# reports and the tools. A command missing here is listed after these, in the order it registered.
COMMAND_ORDER = (
    "run",
    "check",
    "show",
    "synth",
    "compile",
    "compare",
    "sweep",
    "frontier",
    "plot",
    "trace",
    "calibrate",
    "expand",
    "list",
    "explain",
    "import",
    "fmt",
    "lsp",
)

# The value a flag takes, as users of command lines know it (click's words), not typer's `<int>` or `<bool>`.
_TYPE_NAMES = {"<int>": "INTEGER", "<float>": "NUMBER", "<str>": "TEXT", "<list[str]>": "TEXT", "<path>": "PATH"}


class PpdslGroup(TyperGroup):
    """The `ppdsl` command group: each invocation first makes the terminal size in the environment sane, before
    click parses (and `--help` draws) anything. (`ppdsl.cli` does it once more at import, before its consoles.)"""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        sane_terminal_environment(os.environ)
        return super().main(*args, **kwargs)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with its whole summary, wrapped (click cuts it at the width: `for...`)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                summary = command.short_help or (command.help or "").split("\n\n")[0]
                rows.append((name, " ".join(summary.split())))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def list_commands(self, ctx: Any) -> list[str]:
        registered = super().list_commands(ctx)
        return [c for c in COMMAND_ORDER if c in registered] + [c for c in registered if c not in COMMAND_ORDER]


def _value_name(display_type: Callable[[Any, Any], str]) -> Callable[[Any, Any], str]:
    def named(self: Any, ctx: Any) -> str:
        shown = display_type(self, ctx)
        if shown in _TYPE_NAMES:
            return _TYPE_NAMES[shown]
        if shown.startswith("<") and shown.endswith(">") and "|" in shown:  # a choice: `[text|json]`
            return f"[{shown[1:-1]}]"
        return shown

    return named


# Help is click's plain layout: at 80 columns an option and its whole text fit (typer's rich panels gave the text
# an 18-character column at 80 and cut words: `forward=1,backw…`).
TyperOption.display_type = _value_name(TyperOption.display_type)
TyperArgument.display_type = _value_name(TyperArgument.display_type)


app = typer.Typer(
    name="ppdsl",
    cls=PpdslGroup,
    help="Pipeline-parallel training schedules as declarative .sched files.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
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
