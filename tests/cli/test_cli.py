"""The command line: every command, its formats, exit codes, and that bad input never shows a traceback."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ppdsl import __version__
from ppdsl.cli import app

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output + (result.stderr or "")
    return result


def test_check_valid_text_report(in_repo):
    result = invoke("check", "schedules/1f1b.sched", "--pp", "4", "-m", "8")
    assert result.exit_code == 0
    assert "deadlock-free" in result.stdout
    assert "makespan 33" in result.stdout


def test_check_json_report_fields(in_repo):
    result = invoke("check", "1f1b", "--pp", "4", "-m", "8", "--format", "json")
    report = json.loads(result.stdout)
    assert report["valid"] is True and report["diagnostics"] == []
    # p=4, m=8, F=1, B=2: makespan (m + p - 1)(F + B) = 33, idle (p - 1)(F + B) = 9 per rank
    assert report["makespan"] == 33
    assert report["bubble_ratio"] == pytest.approx(9 / 33)
    assert [r["idle"] for r in report["ranks"]] == [9, 9, 9, 9]
    assert [r["peak_activations"] for r in report["ranks"]] == [4, 3, 2, 1]
    assert set(report["ranks"][0]) >= {"rank", "busy", "idle", "peak_activations"}


def test_check_cost_override_changes_the_makespan(in_repo):
    result = invoke("check", "1f1b", "--pp", "4", "-m", "8", "--format", "json", "--cost", "forward=1,backward=1")
    assert json.loads(result.stdout)["makespan"] == 22  # (m + p - 1)(F + B)


def test_paddle_1f1b_order_survives_blocking_sends(in_repo):
    """Paddle posts the next receive before sending the gradient, so even a blocking transport cannot hang."""
    assert invoke("check", "1f1b", "--pp", "4", "-m", "8", "--rendezvous").exit_code == 0


def test_missing_file_is_a_usage_error(in_repo):
    result = invoke("check", "no/such.sched", "--pp", "2", "-m", "2")
    assert result.exit_code == 2
    assert "error[E000]: cannot read `no/such.sched`" in result.stderr


def test_bad_sizes_and_params_are_usage_errors(in_repo):
    assert invoke("check", "1f1b", "--pp", "0", "-m", "2").exit_code == 2
    result = invoke("check", "vpp", "--pp", "2", "-m", "2", "--param", "split_backward")
    assert result.exit_code == 2 and "--param name=value" in result.stderr


def test_expand_json_shape(in_repo):
    data = json.loads(invoke("expand", "interleaved1f1b", "--pp", "2", "-m", "4", "--vpp", "2").stdout)
    assert (data["schedule"], data["pp"], data["vpp"], data["microbatches"]) == ("Interleaved1F1B", 2, 2, 4)
    first = data["ranks"][1]["jobs"][0]
    assert first == {"type": "forward", "chunk": 0, "microbatch": 0, "stage": 1}
    assert data["ranks"][0]["jobs"][-1]["type"] == "optimizer"
    assert {j["stage"] for j in data["ranks"][0]["jobs"]} == {0, 2}


def test_expand_other_formats(in_repo):
    csv = invoke("expand", "fthenb", "--pp", "2", "-m", "2", "--format", "csv").stdout.splitlines()
    assert csv[0] == "rank,step,type,chunk,microbatch,stage"
    assert csv[1] == "0,0,forward,0,0,0"
    table = invoke("expand", "fthenb", "--pp", "2", "-m", "2", "--format", "table").stdout
    assert table.splitlines()[0] == "rank 0: F0 F1 B0 B1 optimizer"
    torch = invoke("expand", "fthenb", "--pp", "2", "-m", "2", "--format", "torch-csv").stdout
    assert torch.splitlines()[1] == "1F0,1F1,1B0,1B1"


def test_expand_output_file_is_written_whole_or_not_at_all(in_repo, tmp_path):
    target = tmp_path / "out.json"
    assert invoke("expand", "1f1b", "--pp", "2", "-m", "4", "-o", str(target)).exit_code == 0
    good = target.read_text()
    assert json.loads(good)["pp"] == 2
    # a failing run leaves the earlier file untouched
    assert invoke("expand", "1f1b", "--pp", "4", "-m", "2", "-o", str(target)).exit_code == 1
    assert target.read_text() == good
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_show_draws_every_rank(in_repo):
    out = invoke("show", "zbh1", "--pp", "3", "-m", "4").stdout
    for r in range(3):
        assert f"rank {r}" in out
    # ZB-H1: rank 0 never splits a backward; rank 1 splits micro-batch 0's (I0) and defers its W0
    rank0 = [line for line in out.splitlines() if "rank 0" in line]
    assert rank0 and not any(" I" in line or " W" in line for line in rank0)
    assert " I0 " in out and " W0 " in out


def test_list_names_every_library_schedule(in_repo):
    rows = json.loads(invoke("list", "--format", "json").stdout)
    names = {r["name"] for r in rows}
    assert {"1F1B", "FThenB", "VPP", "ZBH1", "ZBVPP", "Eager1F1B", "Interleaved1F1B", "ZBV", "DualPipeV"} <= names
    one_f_one_b = next(r for r in rows if r["name"] == "1F1B")
    assert "microbatches >= pp" in one_f_one_b["requires"]
    assert invoke("list").exit_code == 0


def test_import_writes_a_schedule_that_checks(in_repo, tmp_path):
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n")
    out = tmp_path / "mine.sched"
    assert invoke("import", str(csv_path), "-o", str(out)).exit_code == 0
    assert invoke("check", str(out), "--pp", "2", "-m", "2").exit_code == 0
    assert invoke("check", str(out), "--pp", "3", "-m", "2").exit_code == 1


def test_import_bad_csv_leaves_no_file(in_repo, tmp_path):
    csv_path = tmp_path / "bad.csv"
    csv_path.write_text("0F0,zz\n")
    out = tmp_path / "bad.sched"
    result = invoke("import", str(csv_path), "-o", str(out))
    assert result.exit_code == 2
    assert "row 1, column 5" in result.stderr
    assert not out.exists()


def test_version():
    assert invoke("--version").stdout.strip() == f"ppdsl {__version__}"


def test_check_takes_costs_like_the_other_commands(in_repo, tmp_path):
    """`check` shares the report commands' cost handling: unknown names are errors, links and files apply."""
    bad = invoke("check", "1f1b", "--pp", "4", "-m", "8", "--cost", "fwd=1")
    assert bad.exit_code == 2 and "`--cost` names no job type `fwd`" in bad.stderr
    # two link crossings on the critical path of FThenB at pp=2, m=2 add 2 * latency: (m + p - 1)(F + B) + 2L
    linked = invoke("check", "fthenb", "--pp", "2", "-m", "2", "--format", "json", "--cost", "latency=0.5")
    assert json.loads(linked.stdout)["makespan"] == 10
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"costs": {"forward": 1, "backward": 1}}))
    filed = invoke("check", "1f1b", "--pp", "4", "-m", "8", "--format", "json", "--costs", str(costs))
    assert json.loads(filed.stdout)["makespan"] == 22  # (m + p - 1)(F + B)


def test_check_and_compare_show_recomputing_beside_the_bubble():
    text = runner.invoke(app, ["check", "1f1b_recompute", "--pp", "4", "-m", "8"])
    assert text.exit_code == 0, text.output
    # on every rank: idle 9 of the 33 units not spent recomputing (as 1F1B's 9 of 33), recompute 8 of 41
    assert "bubble 27.3%, recompute 19.5%" in text.stdout
    header = text.stdout.splitlines()[2].split()
    assert header[header.index("bubble") + 1] == "recompute"
    plain = runner.invoke(app, ["check", "1f1b", "--pp", "4", "-m", "8"])
    assert "recompute" not in plain.stdout  # no recomputes: no column of zeros
    rows = json.loads(
        runner.invoke(app, ["compare", "1f1b", "1f1b_recompute", "--pp", "4", "-m", "8", "--format", "json"]).stdout
    )["rows"]
    ratios = {r["schedule"]: r["recompute_ratio"] for r in rows}
    assert ratios == {"1F1B": 0.0, "1F1B-Recompute": pytest.approx(8 / 41)}
    table = runner.invoke(app, ["compare", "1f1b", "1f1b_recompute", "--pp", "4", "-m", "8"]).stdout
    assert "recompute" in table and "19.5%" in table


@pytest.mark.parametrize("command", ["check", "show", "expand", "trace"])
def test_a_vpp_the_schedules_requires_pin_is_the_default(command, in_repo, tmp_path):
    """ZB-V takes only vpp 2 (`require vpp == 2`): without --vpp every command uses it; a schedule that takes
    several keeps 1; an explicit --vpp 1 is still refused by the require."""
    extra = ["-o", str(tmp_path / "t.json")] if command == "trace" else []
    result = runner.invoke(app, [command, "zbv", "--pp", "4", "-m", "8", *extra])
    assert result.exit_code == 0, result.output
    if command in ("check", "show"):
        assert "vpp=2" in result.stdout
    pinned = runner.invoke(app, ["check", "zbv", "--pp", "4", "-m", "8", "--vpp", "1"])
    assert pinned.exit_code != 0 and "S100" in pinned.stderr
    assert "vpp=1" in runner.invoke(app, ["check", "vpp", "--pp", "4", "-m", "8"]).stdout
