"""No line a command prints ends in spaces (issue 30): a table pads every cell of its last column to the widest,
which is what a user copies and a script compares. Tables print `Trimmed` (ppdsl/cli/common.py)."""

from __future__ import annotations

import io
import re

import pytest
from rich.table import Table
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.cli.common import PpdslConsole

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;]*m")

COMMANDS = {
    "check": ["check", "zbv", "--pp", "4", "-m", "8"],
    "compare": ["compare", "1f1b", "zbh1", "zbv", "--pp", "4", "-m", "8"],
    "sweep": ["sweep", "1f1b", "--pp", "2,4", "-m", "4,8"],
    "synth": ["synth", "--pp", "2", "-m", "4", "--memory-limit", "2", "-o", "s.sched"],
    "run": ["run", "1f1b", "--model", "tiny_mlp", "--pp", "2", "-m", "2", "--steps", "2", "--batch-size", "4"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_no_printed_line_ends_in_a_space(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, COMMANDS[name])
    assert result.exit_code == 0, result.output
    padded = [line for line in result.output.splitlines() if line != line.rstrip()]
    assert not padded, padded
    assert "\n \n" not in result.output


def test_a_coloured_table_keeps_its_styles_and_loses_its_padding():
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("loss", "0.5 -> 0.4")
    table.add_row("time per step", "3.5 ms (median)")
    target = PpdslConsole(file=io.StringIO(), force_terminal=True, color_system="standard", width=80)
    target.print(table)
    text = target.file.getvalue()
    assert "\x1b[1m" in text  # the labels are still bold
    lines = [ANSI.sub("", line) for line in text.splitlines()]
    assert [line.rstrip() for line in lines] == lines, lines
    assert [line.split()[0] for line in lines] == ["loss", "time"]
    assert lines[0].index("0.5") == lines[1].index("3.5")  # still a table: the values in one column
