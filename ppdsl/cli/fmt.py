"""`ppdsl fmt`: `.sched` files in the one canonical layout (`ppdsl.language.format`), rewritten in place, checked
(`--check`) or shown as a diff (`--diff`).

Each file is its own unit: one that cannot be read or does not parse is reported (the parser's diagnostics) and
left as it is, and the others are still formatted. Exit status: 2 if any file was refused, else 1 if `--check` or
`--diff` found a file that would change, else 0.
"""

from __future__ import annotations

import difflib
import os
import sys
from typing import Annotated

import typer

from ppdsl.cli.app import app
from ppdsl.cli.common import err, fail, out
from ppdsl.common.codes import EXIT_INVALID, EXIT_VALID, exit_code
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, SourceCache, render_all
from ppdsl.common.files import SCHEDULE_BYTES, read_text, rewrite_input
from ppdsl.common.text import count, escaped
from ppdsl.language.format import format_text

STDIN = "-"


def sched_files(paths: list[str]) -> list[str]:
    """The files named, and the `.sched` files under the directories named (sorted; hidden directories and
    symlinked directories are not entered), each once."""
    found: list[str] = []
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, f) for f in sorted(files) if f.endswith(".sched")]
        else:
            found.append(path)
    return list(dict.fromkeys(found))


def _read(path: str) -> str:
    if path == STDIN:
        text = sys.stdin.read(SCHEDULE_BYTES + 1)
        if len(text) > SCHEDULE_BYTES:
            raise DiagnosticError([Diagnostic("E052", f"stdin holds more than {SCHEDULE_BYTES} characters")])
        return text
    return read_text(path, SCHEDULE_BYTES, what="the schedule ")


def _lines(text: str) -> list[str]:
    """The lines of `text`, each with its `\n`, broken where Lark breaks them (at `\n` only: a `\r` or a form
    feed is inside a line, as the parser's line numbers count)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _diff(path: str, before: str, after: str) -> str:
    shown = "stdin" if path == STDIN else path
    lines = difflib.unified_diff(_lines(before), _lines(after), f"{shown}", f"{shown} (formatted)")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


@app.command("fmt")
def fmt_cmd(
    paths: Annotated[
        list[str] | None,
        typer.Argument(help="Files, and directories whose .sched files to format (default: `.`); `-`: stdin."),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Change nothing: list the files that would change (exit 1 if any).")
    ] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="Change nothing: print what would change as a unified diff (exit 1 if any).")
    ] = False,
) -> None:
    """Format .sched files in the canonical layout, comments and docstrings kept (as `gofmt`, `ruff format`)."""
    named = paths or ["."]
    files = sched_files(named)
    if not files:
        where = ", ".join(f"`{escaped(p)}`" for p in named)
        fail(
            [
                Diagnostic(
                    "E096",
                    f"no `.sched` file in {where}",
                    help="name the schedules or a directory that holds some (hidden directories are skipped)",
                )
            ]
        )
    refused: list[Diagnostic] = []
    changed = unchanged = failed = 0
    for path in files:
        try:
            before = _read(path)
            after = format_text(before, "<stdin>" if path == STDIN else path)
        except DiagnosticError as e:
            refused += e.diagnostics
            failed += 1
            continue
        if after == before:
            unchanged += 1
            if path == STDIN and not (check or diff):
                sys.stdout.write(after)
            continue
        changed += 1
        if diff:
            sys.stdout.write(_diff(path, before, after))
        if check:
            out.print(f"would reformat {escaped('stdin' if path == STDIN else path)}")
        if not (check or diff):
            if path == STDIN:
                sys.stdout.write(after)
            else:
                try:
                    rewrite_input(path, after)
                except DiagnosticError as e:
                    refused += e.diagnostics
                    changed, failed = changed - 1, failed + 1
    sys.stdout.flush()
    verb = "would be reformatted" if check or diff else "reformatted"
    summary = f"{count(changed, 'file')} {verb}, {count(unchanged, 'file')} left unchanged"
    if failed:
        summary += f", {count(failed, 'file')} refused"
    if refused:
        err.print(render_all(refused, SourceCache(), color=err.is_terminal), markup=False)
    if STDIN not in files or check or diff:
        err.print(summary)
    if refused:
        raise typer.Exit(exit_code(refused))
    raise typer.Exit(EXIT_INVALID if changed and (check or diff) else EXIT_VALID)
