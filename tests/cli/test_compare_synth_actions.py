"""`ppdsl compare --synth --memory-actions` (issue 18, 4): beside synth's order-only rows, rows of synth recomputing
or offloading at the comparison's memory limit, with the actions' costs from `--cost` like the rest."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()
# pp 4, 8 micro-batches, 2 activations per rank: 1F1B holds 4, an order alone fits only by running few at once
ARGS = ["compare", "1f1b", "--synth", "--pp", "4", "-m", "8", "--vpp", "1", "--memory-limit", "2", "--time-limit", "1"]


def _rows(*extra: str) -> dict[str, dict]:
    result = runner.invoke(app, [*ARGS, *extra, "--format", "json"])
    assert result.exit_code == 0, result.output
    return {row["schedule"]: row for row in json.loads(result.stdout)["rows"]}


@pytest.mark.e2e
def test_synth_rows_with_actions_fit_the_limit_and_are_no_slower_than_the_order_alone():
    rows = _rows("--memory-actions", "recompute,offload", "--cost", "offload=0.25,reload=0.25")
    alone, acting = rows["synth (looped)"], rows["synth (looped, recompute+offload)"]
    assert alone["status"] == acting["status"] == "ok"
    assert acting["peak_activations"] <= 2 + 1e-9 and acting["over_limit"] is False
    assert acting["makespan"] <= alone["makespan"]
    assert rows["1F1B"]["over_limit"] is True  # (the named schedule took the same costs: E007 before for offload)


@pytest.mark.e2e
def test_each_action_alone_makes_its_own_row():
    rows = _rows("--memory-actions", "recompute")
    assert "synth (looped, recompute)" in rows and not any("offload" in name for name in rows)


def test_memory_actions_without_synth_is_a_usage_error():
    result = runner.invoke(app, ["compare", "1f1b", "--pp", "4", "-m", "8", "--memory-actions", "recompute"])
    assert result.exit_code == 2 and "--synth" in result.output
