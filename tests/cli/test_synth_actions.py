"""`ppdsl synth --memory-actions` on the command line: the file it writes carries the actions, and `ppdsl check`
proves it with the makespan synth reported (issue 18, 3)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()
SIZES = ["--pp", "4", "-m", "8"]


@pytest.mark.e2e
def test_a_synthesized_file_with_actions_checks_valid_with_synths_makespan(tmp_path):
    out = tmp_path / "found.sched"
    args = ["synth", *SIZES, "--memory-limit", "2", "--memory-actions", "recompute,offload", "--time-limit", "2"]
    made = runner.invoke(app, [*args, "-o", str(out), "--format", "json"])
    assert made.exit_code == 0, made.output
    made_report = json.loads(made.stdout)
    searched, actions = made_report["makespan"], made_report["memory_actions"]
    assert actions["recompute"] + actions["offload"] > 0
    text = out.read_text(encoding="utf-8")
    assert " O" in text or "offload" in text or "recompute" in text or " R" in text
    checked = runner.invoke(app, ["check", str(out), *SIZES, "--format", "json"])
    assert checked.exit_code == 0, checked.output
    report = json.loads(checked.stdout)
    assert report["valid"] and abs(report["makespan"] - searched) < 1e-9
    assert max(r["peak_activations"] for r in report["ranks"]) <= 2 + 1e-9


def test_an_unknown_action_is_a_usage_error():
    result = runner.invoke(app, ["synth", *SIZES, "--memory-actions", "swap", "-o", "x.sched"])
    assert result.exit_code == 2 and "E084" in result.output


def test_exact_with_actions_is_searched_and_says_optimal_or_the_gap(tmp_path):
    # (once refused with E092: --exact did not take the actions)
    out = tmp_path / "exact.sched"
    args = ["synth", "--pp", "2", "-m", "3", "--memory-limit", "1.2", "--split-backward", "no"]
    args += ["--memory-actions", "recompute,offload", "--exact", "--time-limit", "3", "-o", str(out)]
    made = runner.invoke(app, [*args, "--format", "json"])
    assert made.exit_code == 0, made.output
    report = json.loads(made.stdout)
    assert report["memory_actions"]["recompute"] + report["memory_actions"]["offload"] > 0
    assert report["optimal"] is True and abs(report["makespan"] - report["lower_bound"]) < 1e-9
    assert "(optimal)" in out.read_text(encoding="utf-8")


@pytest.mark.e2e
def test_copy_costs_on_the_command_line_time_the_offloads(tmp_path):
    """Issue 18, 1: `--cost offload=...,reload=...` with --memory-actions (E007 before: no job type `offload`)."""
    out = tmp_path / "found.sched"
    args = ["synth", *SIZES, "--memory-limit", "2", "--memory-actions", "recompute,offload", "--time-limit", "1"]
    made = runner.invoke(app, [*args, "--cost", "offload=0.25,reload=0.25", "-o", str(out), "--format", "json"])
    assert made.exit_code == 0, made.output
    checked = runner.invoke(app, ["check", str(out), *SIZES, "--format", "json"])
    assert checked.exit_code == 0 and json.loads(checked.stdout)["makespan"] == json.loads(made.stdout)["makespan"]


def test_an_action_cost_without_memory_actions_names_the_option():
    result = runner.invoke(app, ["synth", *SIZES, "--memory-limit", "4", "--cost", "offload=0.5", "-o", "x.sched"])
    assert result.exit_code == 2 and "E110" in result.output and "--memory-actions" in result.output


@pytest.mark.e2e
def test_the_frontier_takes_the_costs_of_the_actions():
    args = ["frontier", "--pp", "2", "-m", "4", "--steps", "2", "--time-limit", "0.5"]
    result = runner.invoke(app, [*args, "--cost", "offload=0.25,reload=0.25,recompute=0.5", "--format", "json"])
    assert result.exit_code == 0, result.output
    assert all(p["with_actions"] is not None for p in json.loads(result.stdout)["points"])


def test_the_frontier_reports_a_cost_file_without_copy_times(tmp_path):
    """E111 is the input's problem, not a limit nothing fits: it was swallowed, every point then without actions."""
    costs = tmp_path / "costs.json"
    costs.write_text('{"unit": "s", "costs": {"forward": 0.001, "backward": 0.002}}', encoding="utf-8")
    args = ["frontier", "--pp", "2", "-m", "4", "--steps", "2", "--time-limit", "0.5", "--costs", str(costs)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "E111" in result.output


def test_periodic_with_actions_writes_a_block_that_holds_for_other_microbatches(tmp_path):
    out = tmp_path / "block.sched"
    args = ["synth", *SIZES, "--memory-limit", "1", "--memory-actions", "offload", "--periodic", "--time-limit", "1"]
    made = runner.invoke(app, [*args, "-o", str(out), "--format", "json"])
    assert made.exit_code == 0, made.output  # (was E092: --memory-actions did not combine with --periodic)
    assert (
        "periodic block" in json.loads(made.stdout)["found_by"] and json.loads(made.stdout)["memory_actions"]["offload"]
    )
    text = out.read_text(encoding="utf-8")
    assert "for n in 0 .. microbatches" in text and "offload(" in text and "reload(" in text
    for m in ("8", "3", "20"):
        checked = runner.invoke(app, ["check", str(out), "--pp", "4", "-m", m, "--format", "json"])
        assert checked.exit_code == 0, (m, checked.output)
        report = json.loads(checked.stdout)
        assert report["valid"] and max(r["peak_activations"] for r in report["ranks"]) <= 1 + 1e-9
