"""The `ppdsl` command line: one module per command group, each a thin layer over the library.

    schedule.py  check, expand, show, list, import, explain: a schedule at given sizes, as text
    reports.py   trace, plot, compare, sweep, calibrate: simulations, pictures and tables
    codegen.py   compile: a schedule as a Python plan module
    fmt.py       fmt: .sched files in the canonical layout
    synth.py     synth: the fastest schedule within a memory limit, as a checked .sched; frontier: makespan
                 against memory limit
    lsp.py       lsp: the language server for editors (`ppdsl.lsp`)
    training.py  run: training with a schedule's plan (one process, or one per rank through launch.py)

`common.py` holds the options and the rule that ends a command on diagnostics. Nothing here imports paddle
unless a command needs the runtime (`run`, or `--model`).
"""

from __future__ import annotations

import os
import sys

from ppdsl.common.text import sane_terminal_environment

# before any console is made: rich reads COLUMNS and LINES when a console is created, typer TERMINAL_WIDTH when its
# help module is imported, and a hostile value there hangs or crashes every command (issue 26)
sane_terminal_environment(os.environ)

from ppdsl.cli import codegen, fmt, lsp, reports, schedule, synth, training  # noqa: E402, F401  (each registers its commands on `app`)
from ppdsl.cli.app import app  # noqa: E402  (after the terminal size is made sane)
from ppdsl.cli.common import err  # noqa: E402  (after the terminal size is made sane)
from ppdsl.common.codes import EXIT_USAGE  # noqa: E402  (after the terminal size is made sane)
from ppdsl.common.diagnostics import DiagnosticError, SourceCache, render_all  # noqa: E402  (after the terminal size is made sane)

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point: usage errors exit 2, never a traceback for bad input."""
    # messages go through rich in the streams' own encoding; one that cannot hold a character of a schedule's name
    # or of a quoted source line (PYTHONIOENCODING=ascii, a C locale) shows it escaped, not as a UnicodeEncodeError
    # traceback (issue 26). Data written to stdout is UTF-8 bytes whatever the encoding (files.write_stdout).
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and (stream.errors or "strict") == "strict":
            stream.reconfigure(errors="backslashreplace")
    try:
        app()
    except DiagnosticError as e:
        err.print(render_all(e.diagnostics, SourceCache()), markup=False)
        sys.exit(EXIT_USAGE)
