"""A schedule name that is neither a file nor a shipped name (issue 19): the likely shipped one, and every name."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.language.library import library_files, suggest_schedules

runner = CliRunner()


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("gpipe", "fthenb"),
        ("GPipe", "fthenb"),
        ("zbh", "zbh1"),
        ("dualpipe", "dualpipev"),
        ("zb-v", "zbv"),
        ("interleaved", "interleaved1f1b"),
        ("1f1", "1f1b"),
        ("pipedream-flush", "1f1b"),
        ("zb1p", "interleavedzb"),
    ],
)
def test_a_mistyped_name_suggests_the_shipped_schedule(typed, meant):
    assert meant in suggest_schedules(typed)


def test_no_suggestion_for_a_name_like_none():
    assert suggest_schedules("nonsense") == []


def test_check_names_what_was_meant_and_lists_every_shipped_schedule(in_repo):
    result = runner.invoke(app, ["check", "gpipe", "--pp", "2", "-m", "4"])
    assert result.exit_code == 2
    assert "error[E000]: cannot read `gpipe`" in result.stderr
    assert "did you mean `fthenb`?" in result.stderr
    for path in library_files():
        assert path.stem in result.stderr


def test_a_missing_path_in_a_folder_keeps_its_own_help(in_repo):
    result = runner.invoke(app, ["check", "nowhere/gpipe.sched", "--pp", "2", "-m", "4"])
    assert result.exit_code == 2 and "did you mean" not in result.stderr
