"""`--layers` and `--partition` on the commands that evaluate a schedule, and `run`, which refuses them for now."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.runtime.request import RunRequest

runner = CliRunner()
PROFILE = {
    "pattern": "ETTTTTTL",
    "forward_ms": {"E": 2.0, "T": 1.0, "L": 6.0},
    "backward_ms": {"E": 1.0, "T": 1.0, "L": 4.0},
    "weight_ms": {"E": 0.0, "T": 1.0, "L": 0.0},
}


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(PROFILE))
    return str(path)


def test_check_reports_each_stage_and_marks_the_critical_one(profile):
    result = runner.invoke(app, ["check", "1f1b", "--pp", "2", "-m", "4", "--layers", profile])
    assert result.exit_code == 0, result.stderr
    assert "stages: partition 4,4" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.strip().startswith(("0 ", "1 "))]
    stage_rows = [r for r in rows if len(r) >= 6 and r[2] == "0"]  # stage rank chunk layers time activation
    assert [r[3] for r in stage_rows[-2:]] == ["4", "4"]
    assert stage_rows[-1][-1] == "critical"  # the head's stage: 3 blocks + L = 9 + 10, against E + 3 blocks = 12
    data = json.loads(
        runner.invoke(
            app,
            ["check", "1f1b", "--pp", "2", "-m", "4", "--layers", profile, "--partition", "5,3", "--format", "json"],
        ).stdout
    )
    assert [s["layers"] for s in data["stages"]] == [5, 3]
    assert [s["critical"] for s in data["stages"]] == [False, True]


def test_a_bad_profile_is_reported_in_json_too(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"pattern": "TQ", "forward_ms": {"T": 1}, "backward_ms": {"T": 1}, "weight_ms": {"T": 1}}')
    result = runner.invoke(app, ["check", "1f1b", "--pp", "2", "-m", "4", "--layers", str(path), "--format", "json"])
    assert result.exit_code == 2
    (diag,) = json.loads(result.stdout)["diagnostics"]
    assert diag["code"] == "E102" and diag["file"] == str(path) and diag["col"] == len('{"pattern": "T') + 1


def test_expand_prints_the_partition_as_a_megatron_layout(profile):
    result = runner.invoke(
        app, ["expand", "1f1b", "--pp", "2", "-m", "4", "--layers", profile, "--format", "megatron-layout"]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "Et*3|t*3L"
    layout = runner.invoke(
        app, ["check", "1f1b", "--pp", "2", "-m", "4", "--layers", profile, "--partition", "Et*4|ttL"]
    )
    assert layout.exit_code == 0 and "partition 5,3" in layout.stdout
    refused = runner.invoke(
        app, ["expand", "zbv", "--pp", "2", "-m", "4", "--partition", "2,2,2,2", "--format", "megatron-layout"]
    )
    assert refused.exit_code == 2 and "error[E106]" in refused.stderr


@pytest.mark.parametrize("command", ["show", "trace", "expand"])
def test_the_other_commands_take_the_partition(command):
    ok = runner.invoke(app, [command, "1f1b", "--pp", "2", "-m", "4", "--partition", "3,1"])
    assert ok.exit_code == 0, ok.stderr
    bad = runner.invoke(app, [command, "1f1b", "--pp", "2", "-m", "4", "--partition", "3,0"])
    assert bad.exit_code == 2 and "error[E105]" in bad.stderr


def test_trace_times_the_partition():
    even = json.loads(runner.invoke(app, ["trace", "1f1b", "--pp", "2", "-m", "4"]).stdout)
    split = json.loads(runner.invoke(app, ["trace", "1f1b", "--pp", "2", "-m", "4", "--partition", "3,1"]).stdout)

    def forward_durations(trace, pid):
        return {
            e["dur"]
            for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("pid") == pid and e["name"].startswith("F")
        }

    assert forward_durations(split, 0) == {3 * d for d in forward_durations(even, 0)}


def test_compare_ranks_schedules_on_the_profile(profile):
    result = runner.invoke(
        app, ["compare", "1f1b", "interleaved1f1b", "--pp", "2", "-m", "4", "--layers", profile, "--format", "json"]
    )
    assert result.exit_code == 0, result.stderr
    rows = {r["schedule"]: r for r in json.loads(result.stdout)["rows"]}
    assert rows["1F1B"]["status"] == "ok" and rows["Interleaved1F1B"]["status"] == "ok"
    fixed = runner.invoke(
        app,
        [
            "compare",
            "1f1b",
            "interleaved1f1b",
            "--pp",
            "2",
            "-m",
            "4",
            "--layers",
            profile,
            "--partition",
            "4,4",
            "--format",
            "json",
        ],
    )
    rows = {r["schedule"]: r for r in json.loads(fixed.stdout)["rows"]}
    assert rows["1F1B"]["status"] == "ok" and rows["Interleaved1F1B"]["status"] == "rejected"
    assert rows["1F1B"]["partition"] == "4,4"
    # --synth searches the partition too (tests/cli/test_compare_synth_layers.py): its rows say the one it chose
    args = ["compare", "1f1b", "--pp", "2", "-m", "4", "--layers", profile, "--synth", "--time-limit", "1"]
    searched = runner.invoke(app, [*args, "--format", "json"])
    assert searched.exit_code == 0, searched.stderr
    synth = [r for r in json.loads(searched.stdout)["rows"] if r["schedule"].startswith("synth")]
    assert synth and all(r["status"] == "ok" and r["partition"] for r in synth)


def test_compare_keeps_the_faster_of_the_even_and_the_dp_split(profile):
    from ppdsl.analysis.check import check
    from ppdsl.analysis.layers import even_partition, min_max_partition, read_profile
    from ppdsl.analysis.scenario import Scenario

    result = runner.invoke(app, ["compare", "1f1b", "--pp", "2", "-m", "4", "--layers", profile, "--format", "csv"])
    header, row = result.stdout.splitlines()[:2]
    assert header.endswith(",partition")
    layers = read_profile(profile)
    best = min(
        (check(Scenario("1f1b", 2, 4, layers=layers, partition=p)).makespan, p.text())
        for p in (even_partition(8, 2), min_max_partition(layers, 2))
    )
    cells = dict(zip(header.split(","), row.split(","), strict=False))
    assert float(cells["makespan"]) == pytest.approx(best[0])
    assert row.endswith(f'"{best[1]}"') or row.endswith(best[1])
    plain = runner.invoke(app, ["compare", "1f1b", "--pp", "2", "-m", "4", "--format", "csv"])
    assert "partition" not in plain.stdout.splitlines()[0]  # a model without layers reads as it did


def test_runs_partition_reaches_the_plan_the_ranks_build_from(tmp_path):
    """`run --partition` and a file's `partition` travel in the plan specification (plan.json, bound by its
    sha256 in a launch), the command line's over the file's; the training itself: tests/runtime/test_run_partition.py."""
    from ppdsl.analysis.check import check
    from ppdsl.analysis.plan_spec import plan_spec
    from ppdsl.analysis.scenario import Scenario
    from ppdsl.plan.spec import PlanSpec

    request = RunRequest(pp=2, microbatches=4, partition="2,4")
    assert RunRequest.from_spec(request.to_spec()).partition == "2,4"
    path = tmp_path / "split.sched"
    path.write_text("partition = [3, 1]\norder { forward * microbatches backward * microbatches optimizer }\n")
    declared = plan_spec(check(Scenario(str(path), 2, 4), record_visits=True))
    given = plan_spec(check(Scenario(str(path), 2, 4, partition="1,3"), record_visits=True))
    assert declared.partition == (3, 1) and given.partition == (1, 3)
    assert PlanSpec.from_json(given.to_json()).partition == (1, 3)
    assert plan_spec(check(Scenario("1f1b", 2, 4), record_visits=True)).partition is None
    broken = json.loads(given.to_json()) | {"partition": [1, -3]}
    with pytest.raises(DiagnosticError) as err:
        PlanSpec.from_json(json.dumps(broken))
    assert [d.code for d in err.value.diagnostics] == ["E091"]
