"""Output that fits the terminal (issue 19): `show`, `check`'s deadlock grid, `compare` and `list` at 60, 80 and 200
columns (`COLUMNS`, as a pipe sees it): no line wider than the terminal where the content allows, and no name a
user must type cut."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.language.library import library_files

runner = CliRunner()
WIDTHS = [60, 80, 200]


def _run(columns: int, *args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": str(columns)})


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.mark.parametrize("columns", WIDTHS)
def test_show_wraps_by_blocks_that_fit(columns):
    result = _run(
        columns, "show", "zbv", "--pp", "4", "-m", "8", "--vpp", "2", "--steps", "1000"
    )  # the old name still works
    assert result.exit_code == 0 and "…" not in result.stdout
    assert _widest(result.stdout) <= columns
    jobs = [job for line in result.stdout.splitlines() if line.startswith("rank 2 ") for job in line.split()[2:]]
    assert len(jobs) == 8 * 2 * 3 + 1  # every job of the rank, whole: F, B and W of 8 micro-batches x 2 chunks, opt


@pytest.mark.parametrize("columns", WIDTHS)
def test_deadlock_grid_is_a_window_around_the_stuck_steps(columns, in_repo):
    """Before: about 330 columns of grid, wrapped into broken lines."""
    result = _run(columns, "check", "vpp", "--pp", "4", "-m", "6", "--vpp", "2")
    assert result.exit_code == 1 and "error[S105]" in result.stderr
    grid = result.stderr.split("rank x step grid", 1)[1].split("= help:", 1)[0]
    assert _widest(grid) <= max(columns, 40)
    assert ">rf5.c1<" in grid and ">B0.c0<" in grid  # the stuck jobs are shown, marked
    assert "rf = recv_forward, sb = send_backward" in grid


@pytest.mark.parametrize("columns", WIDTHS)
def test_compare_puts_notes_that_do_not_fit_below_the_table(columns):
    result = _run(columns, "compare", "--library", "--pp", "4", "-m", "8")
    assert result.exit_code == 0
    table = result.stdout.split("\n[1]", 1)[0]
    assert _widest(table) <= columns
    assert "Paddle's ZBVPP is defined only for microbatches == pp" in " ".join(result.stdout.split())
    for name in ("ZBV", "DualPipeV", "Interleaved1F1B", "LoopedBFS", "ZBVPP"):
        assert f" {name} " in result.stdout


@pytest.mark.parametrize("columns", WIDTHS)
def test_list_never_cuts_a_file_name(columns):
    result = _run(columns, "list")
    assert result.exit_code == 0
    assert _widest(result.stdout) <= columns
    for path in library_files():
        assert path.name in result.stdout
