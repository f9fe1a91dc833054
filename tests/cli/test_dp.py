"""`--dp D` on the commands that take sizes: one option definition (`ppdsl.cli.common.DP`), carried by the Scenario
to the expansion, so each command checks, draws and times the schedule at that degree."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.reports.trace import COLLECTIVE_TID
from ppdsl.runtime.request import RunRequest

runner = CliRunner()
REDUCING = "examples/loopedbfs_reduce.sched"
SIZES = ["--pp", "4", "-m", "8", "--vpp", "2"]


def test_check_takes_the_library_at_dp_2_and_runs_no_reduction_at_dp_1(in_repo):
    one = json.loads(runner.invoke(app, ["check", "1f1b", "--pp", "4", "-m", "8", "--format", "json"]).stdout)
    two = runner.invoke(app, ["check", "1f1b", "--pp", "4", "-m", "8", "--dp", "2", "--format", "json"])
    assert two.exit_code == 0, two.stderr
    ranks = json.loads(two.stdout)["ranks"]
    assert all(r["collective"] > 0 for r in ranks) and all("collective" not in r for r in one["ranks"])
    assert json.loads(two.stdout)["makespan"] > one["makespan"]  # the last reduction is exposed before the optimizer


def test_check_reports_each_ranks_collective_time_in_its_table_and_json(in_repo):
    text = runner.invoke(app, ["check", REDUCING, *SIZES, "--dp", "2"])
    assert text.exit_code == 0 and "dp=2" in text.stdout and "exposed" in text.stdout
    data = json.loads(runner.invoke(app, ["check", REDUCING, *SIZES, "--dp", "2", "--format", "json"]).stdout)
    ranks = data["ranks"]
    assert all(0 < r["exposed_collective"] < r["collective"] for r in ranks)  # chunk 1's hides, chunk 0's not
    alone = json.loads(runner.invoke(app, ["check", REDUCING, *SIZES, "--format", "json"]).stdout)["ranks"]
    assert all("collective" not in r for r in alone)  # dp 1: a reduction over one replica is no job


@pytest.mark.parametrize("command", ["expand", "show", "trace", "compile"])
def test_every_sized_command_takes_dp(command, in_repo, tmp_path):
    args = [command, REDUCING, *SIZES, "--dp", "2"]
    if command == "compile":
        args += ["-o", str(tmp_path / "plan.py")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    bad = runner.invoke(app, [command, REDUCING, *SIZES, "--dp", "0"])
    assert bad.exit_code == 2


def test_the_trace_has_a_collective_track(in_repo):
    trace = json.loads(runner.invoke(app, ["trace", REDUCING, *SIZES, "--dp", "2"]).stdout)
    reductions = [e for e in trace["traceEvents"] if e.get("name", "").startswith("reduce_grads")]
    assert reductions and all(e["tid"] == COLLECTIVE_TID for e in reductions if e["ph"] == "X")


def test_run_takes_dp_as_a_request_field():
    assert RunRequest(dp=2).dp == 2 and RunRequest().dp == 1
    with pytest.raises(DiagnosticError, match="--dp must be at least 1"):
        RunRequest(dp=0)


def test_synth_refuses_dp_above_1_with_memory_actions_before_it_searches(tmp_path):
    out = tmp_path / "found.sched"
    args = ["synth", "--pp", "4", "-m", "8", "--dp", "2", "--memory-actions", "recompute", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "error[E079]" in result.stderr and not out.exists()
