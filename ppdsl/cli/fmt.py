"""`ppdsl fmt`: `.sched` files in the one canonical layout (`ppdsl.language.format`), rewritten in place, checked
(`--check`) or shown as a diff (`--diff`).

Each file is its own unit: one that cannot be read or does not parse is reported (the parser's diagnostics) and
left as it is, and the others are still formatted. Exit status: 2 if any file was refused, else 1 if `--check` or
`--diff` found a file that would change, else 0.
"""

from __future__ import annotations

import difflib
import os
from typing import Annotated

import typer

from ppdsl.cli.app import app
from ppdsl.cli.common import err, fail, out
from ppdsl.common.codes import EXIT_INVALID, EXIT_VALID, exit_code
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, SourceCache, render_all
from ppdsl.common.files import SCHEDULE_BYTES, read_stdin_text, read_text, rewrite_input, write_stdout
from ppdsl.common.text import count, escaped
from ppdsl.language.format import format_text

STDIN = "-"


def _walk(paths: list[str]) -> tuple[list[tuple[str, str | None]], list[Diagnostic]]:
    """Each file to format with the real path of the tree it was found in (None for a file named), and E059 for
    each symlink found that leads out of its tree. A symlink found inside a tree is never followed: one to a file
    of the tree is skipped (the file is formatted under its own name), one out of it is reported, so that `fmt
    DIR` writes only under DIR."""
    found: dict[str, str | None] = {}
    refused: list[Diagnostic] = []
    for path in paths:
        if path == STDIN or not os.path.isdir(path):
            found.setdefault(path, None)
            continue
        tree = os.path.realpath(path)
        for root, dirs, files in os.walk(path):  # followlinks=False: a symlinked directory is not entered
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if not name.endswith(".sched"):
                    continue
                file = os.path.join(root, name)
                if not os.path.islink(file):
                    found.setdefault(file, tree)
                elif not _inside(os.path.realpath(file), tree):
                    refused.append(_link_out(file, path))
    return list(found.items()), refused


def _inside(real: str, tree: str) -> bool:
    return os.path.commonpath([real, tree]) == tree


def _link_out(file: str, tree: str) -> Diagnostic:
    return Diagnostic(
        "E059",
        f"not formatting `{escaped(file)}`: it is a symlink to `{escaped(os.path.realpath(file))}`, outside "
        f"`{escaped(tree)}`",
        help="`ppdsl fmt DIR` writes only under DIR: name the file the link points to to format it",
    )


def _read(path: str) -> str:
    if path == STDIN:
        return read_stdin_text(SCHEDULE_BYTES, what="the schedule from ")
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


def _print(text: str, refused: list[Diagnostic]) -> None:
    """Formatted text or a diff on stdout, as UTF-8 whatever the locale says (`files.write_stdout`)."""
    try:
        write_stdout(text)
    except DiagnosticError as e:
        refused += e.diagnostics


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
    walked, refused = _walk(named)
    files = [path for path, _ in walked]
    if not files and not refused:
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
    changed, unchanged, failed = 0, 0, len(refused)
    for path, tree in walked:
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
                _print(after, refused)
            continue
        changed += 1
        if diff:
            _print(_diff(path, before, after), refused)
        if check:
            out.print(f"would reformat {escaped('stdin' if path == STDIN else path)}")
        if not (check or diff):
            if path == STDIN:
                _print(after, refused)
            else:
                try:
                    rewrite_input(path, after, within=tree)
                except DiagnosticError as e:
                    refused += e.diagnostics
                    changed, failed = changed - 1, failed + 1
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
