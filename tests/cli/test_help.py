"""Every `--help` reads at 80 columns (issue 30): whole words and whole summaries, values named as command lines
name them, no padding after the text, and `ppdsl --help` in the order of a user's path."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()
COMMANDS = sorted(get_command(app).commands)


def _help(*words: str) -> str:
    result = runner.invoke(app, [*words, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_fits_80_columns_whole(command):
    text = _help(*([command] if command else []))
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80, max(lines, key=len)
    assert not [line for line in lines if line != line.rstrip()], "a line ends in spaces"
    assert "…" not in text and not re.search(r"\w\.\.\.$", text, re.M), "a cut word or summary"
    assert not re.search(r"<(bool|int|str|float|path|list\[str\])>", text), "typer's type names"


def test_the_commands_are_listed_in_the_order_of_a_users_path():
    listed = re.findall(r"^  (\w+) ", _help().split("Commands:")[1], re.M)
    assert listed[:5] == ["run", "check", "show", "synth", "compile"]
    assert sorted(listed) == COMMANDS


def test_a_flag_shows_no_value_and_an_integer_is_an_integer():
    text = _help("check")
    assert re.search(r"^  --rendezvous  ", text, re.M)
    assert "--pp INTEGER" in text and "--format [text|json]" in text
