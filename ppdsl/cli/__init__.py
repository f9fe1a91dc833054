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

import sys

from ppdsl.cli import codegen, fmt, lsp, reports, schedule, synth, training  # noqa: F401  (each registers its commands on `app`)
from ppdsl.cli.app import app
from ppdsl.cli.common import err
from ppdsl.common.codes import EXIT_USAGE
from ppdsl.common.diagnostics import DiagnosticError, SourceCache, render_all

__all__ = ["app", "main"]


def main() -> None:
    """Console entry point: usage errors exit 2, never a traceback for bad input."""
    try:
        app()
    except DiagnosticError as e:
        err.print(render_all(e.diagnostics, SourceCache()), markup=False)
        sys.exit(EXIT_USAGE)
