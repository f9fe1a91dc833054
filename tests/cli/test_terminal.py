"""The command line on a real terminal (a pseudo-terminal), and a hostile terminal size in the environment (issue 26):
`show` draws its coloured grid where stdout is a terminal, and `COLUMNS` / `LINES` / `TERMINAL_WIDTH` that are not a
sane width (huge, zero, non-ASCII digits, not a number) are ignored or capped, never a hang or a traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.text import (
    HEIGHT_VARIABLES,
    MAX_TERMINAL_COLUMNS,
    MAX_TERMINAL_LINES,
    MIN_TERMINAL_COLUMNS,
    WIDTH_VARIABLES,
    sane_terminal_environment,
)

from paths import ROOT

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_terminal(args: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str, str]:
    """Run `ppdsl ARGS` with its stdout on a pseudo-terminal: (exit status, what the terminal showed, stderr)."""
    master, slave = os.openpty()
    shown = bytearray()

    def drain() -> None:  # the terminal's reader: a full pty buffer would block the command
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command closed its end
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TERMINAL_WIDTH")}
    environ.update({"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **(env or {})})
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ppdsl.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=subprocess.PIPE,
            env=environ,
            timeout=timeout,
        )
    finally:
        os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, shown.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def test_show_on_a_terminal_draws_the_grid_and_its_legend():
    """Before: `UnboundLocalError: cannot access local variable 'legend'` once the grid was drawn."""
    code, shown, stderr = _on_terminal(["show", "1f1b", "--pp", "2", "-m", "3"], {"COLUMNS": "100"})
    assert "Traceback" not in stderr and code == 0, stderr
    text = ANSI.sub("", shown)
    assert "\x1b[" in shown  # it did take the terminal branch (colours)
    assert "rank 0" in text and "rank 1" in text
    assert "rf = recv_forward" in text and "sb = send_backward" in text  # the abbreviations' legend


# ---------------------------------------------------------------- the terminal size in the environment


@pytest.mark.parametrize(
    ("given", "width", "lines"),
    [
        ("120", "120", "120"),
        (" 120 ", "120", "120"),
        ("99999999", str(MAX_TERMINAL_COLUMNS), str(MAX_TERMINAL_LINES)),
        ("1" + "0" * 21, str(MAX_TERMINAL_COLUMNS), str(MAX_TERMINAL_LINES)),
        ("9" * 5000, str(MAX_TERMINAL_COLUMNS), str(MAX_TERMINAL_LINES)),  # past the 4300 digits int() reads
        ("3", str(MIN_TERMINAL_COLUMNS), "3"),  # a width has a floor (below it nothing fits), a height does not
        ("0", None, None),
        ("-5", None, None),
        ("abc", None, None),
        ("", None, None),
        ("\u00b2", None, None),  # str.isdigit() says yes, int() raises
        ("\u0663", None, None),  # an Arabic-Indic 3: int() reads 3
        ("1e3", None, None),
    ],
)
def test_a_terminal_size_is_a_sane_ascii_number_or_ignored(given, width, lines):
    environ = {name: given for name in (*WIDTH_VARIABLES, *HEIGHT_VARIABLES)}
    sane_terminal_environment(environ)
    assert {name: environ.get(name) for name in WIDTH_VARIABLES} == dict.fromkeys(WIDTH_VARIABLES, width)
    assert {name: environ.get(name) for name in HEIGHT_VARIABLES} == dict.fromkeys(HEIGHT_VARIABLES, lines)


@pytest.mark.parametrize("name", ["COLUMNS", "TERMINAL_WIDTH"])
@pytest.mark.parametrize("value", ["99999999", "1" + "0" * 21, "\u00b2", "0"])
def test_help_with_a_hostile_width_prints_help(name, value):
    """Before: `COLUMNS=99999999` hung `--help` (lines padded to 10^8 columns), `COLUMNS=10^21` and `²` were
    tracebacks (rich's int()), `TERMINAL_WIDTH=²` a traceback in typer, `COLUMNS=0` an empty help."""
    result = runner.invoke(app, ["--help"], env={name: value})
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output and "check" in result.output
    assert max(len(line) for line in result.output.splitlines()) <= MAX_TERMINAL_COLUMNS


@pytest.mark.parametrize("value", ["99999999", "1" + "0" * 21, "\u0663"])
def test_a_hostile_width_in_the_environment_of_the_process(value):
    """The consoles are made when ppdsl.cli is imported: the width is made sane before that, in the process itself."""
    environ = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    environ.update({"PYTHONPATH": str(ROOT), "COLUMNS": value})
    proc = subprocess.run(
        [sys.executable, "-m", "ppdsl.cli", "--help"], capture_output=True, env=environ, timeout=120, text=True
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    widths = [len(line) for line in proc.stdout.splitlines()]
    assert widths and max(widths) <= MAX_TERMINAL_COLUMNS
    if value == "\u0663":
        assert max(widths) > MIN_TERMINAL_COLUMNS  # not read as 3 columns


# ---------------------------------------------------------------- messages in a stream that cannot hold them


@pytest.mark.parametrize(
    "args",
    [["check", "{file}", "--pp", "2", "-m", "2"], ["compare", "{file}", "1f1b", "--pp", "2", "-m", "2"]],
)
def test_messages_in_an_ascii_stream_are_escaped_not_a_traceback(tmp_path, args):
    """Before: `PYTHONIOENCODING=ascii ppdsl check` of a schedule named `café①` was a UnicodeEncodeError traceback
    in rich (exit 1); the data writers (`-o -`, `fmt -`) already wrote UTF-8, the messages did not."""
    source = (ROOT / "schedules" / "1f1b.sched").read_text(encoding="utf-8")
    named = re.sub(r'^schedule "[^"]*"', 'schedule "café①"', source, count=1, flags=re.M)
    assert named != source
    path = tmp_path / "u.sched"
    path.write_text(named, encoding="utf-8")
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(
        [sys.executable, "-m", "ppdsl.cli", *(a.format(file=path) for a in args)],
        capture_output=True,
        env=environ,
        timeout=120,
    )
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr.decode()
    assert "caf\\xe9\\u2460" in proc.stdout.decode("ascii")
