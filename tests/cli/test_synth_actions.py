"""`ppdsl synth --memory-actions` on the command line: the file it writes carries the actions, and `ppdsl check`
proves it with the makespan synth reported (issue 18, 3)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()
SIZES = ["--pp", "4", "-m", "8"]


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
