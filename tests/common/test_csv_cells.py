"""CSV cells ppdsl writes never start like a spreadsheet formula (ppdsl/common/csv_cells.py), and numbers,
negative ones too, stay numbers."""

from __future__ import annotations

import csv
import io

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.csv_cells import cell, row

FORMULAS = ['=HYPERLINK("http://x")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "-", "=", "-x"]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_text_that_starts_like_a_formula_gets_a_quote(text):
    assert cell(text) == "'" + text


@pytest.mark.parametrize("value", [-3, -1.5, 0, 2.0, "-3", "-1.5e-3", "+7", ".5", "-inf", "12", "1F0", "plain"])
def test_numbers_and_plain_text_are_unchanged(value):
    assert cell(value) == value


def test_a_row_is_made_safe_cell_by_cell():
    assert row([1, "=x", None, "-2"]) == [1, "'=x", None, "-2"]


def test_compare_csv_quotes_a_hostile_file_name(tmp_path, monkeypatch):
    """A schedule file named like a formula: its name and path cells are text in the sheet, the figures numbers."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "=HYPERLINK(1).sched").write_text(
        "order { forward * microbatches  backward * microbatches  optimizer }\n"
    )
    result = CliRunner().invoke(app, ["compare", "=HYPERLINK(1).sched", "--pp", "2", "-m", "4", "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    (record,) = list(csv.DictReader(io.StringIO(result.stdout)))
    assert record["schedule"] == "'=HYPERLINK(1)" and record["file"] == "'=HYPERLINK(1).sched"
    assert float(record["makespan"]) > 0
    starts = [c[:1] for line in csv.reader(io.StringIO(result.stdout)) for c in line]
    assert not [s for s in starts if s in "=+@\t\r" and s]
