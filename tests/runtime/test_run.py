"""`ppdsl.run(...)`, the run as a library call: what `ppdsl run` does, from Python, with one report for one process
and for one process per rank (`--summary-json` is `RunReport.to_json()`)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.cli import app
from ppdsl.runtime.run import RunReport

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

runner = CliRunner()
OPTIONS = {"pp": 2, "microbatches": 2, "batch_size": 4, "steps": 2, "model": "tiny_mlp", "optimizer": "sgd", "seed": 5}
ARGS = ["1f1b", "--pp", "2", "-m", "2", "--batch-size", "4", "--steps", "2", "--model", "tiny_mlp"]
ARGS += ["--optimizer", "sgd", "--seed", "5"]


def _summary(tmp_path, name, *extra):
    path = tmp_path / f"{name}.json"
    result = runner.invoke(app, ["run", *ARGS, "--summary-json", str(path), *extra])
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return json.loads(path.read_text())


class _Steps:
    """A RunObserver that keeps what it is told (the protocol's other calls do nothing)."""

    def __init__(self):
        self.seen = []

    def warnings(self, diagnostics):
        pass

    def resumed(self, checkpoint, step, steps):
        pass

    def dry_run(self, text):
        pass

    def training(self, start):
        import contextlib

        self.seen.append(("start", start.steps, start.jobs_per_step))
        return contextlib.nullcontext()

    def step(self, step, loss):
        self.seen.append((step, loss))

    def finished(self, report):
        self.seen.append("finished")


def test_python_run_is_the_command_line_run(tmp_path, in_repo):
    cli = _summary(tmp_path, "cli")
    observer = _Steps()
    report = ppdsl.run("1f1b", observer=observer, **OPTIONS)
    assert isinstance(report, RunReport)
    assert report.final_loss == sum(cli["losses"][-1]) / len(cli["losses"][-1])
    assert report.losses == cli["losses"] and report.parameters == cli["parameters"]
    assert set(report.to_dict()) == set(cli)
    first = pytest.approx(sum(cli["losses"][0]) / 2)
    assert observer.seen == [("start", 2, 18), (1, first), (2, report.final_loss), "finished"]
    assert report.peak_bytes is None, "no summary or profile asked for: the memory step is not run"


@pytest.mark.e2e
def test_the_summary_has_the_same_keys_on_one_process_and_one_per_rank(tmp_path, in_repo):
    one = _summary(tmp_path, "one")
    ranks = _summary(tmp_path, "ranks", "--steps", "1", "--nproc-per-node", "2", "--run-dir", str(tmp_path / "r"))
    assert list(one) == list(ranks)
    assert (one["processes"], ranks["processes"]) == (1, 2)
    # what a mode does not measure is null: the plan build and held memory per rank, the sending on one process
    assert one["peak_bytes"] is not None and ranks["peak_bytes"] is None
    assert one["plan_build_seconds"] is not None and ranks["plan_build_seconds"] is None
    assert one["comm_seconds"] is None and set(ranks["comm_seconds"]) == {"0", "1"}
    assert one["launch_dir"] is None and ranks["launch_dir"] == str(tmp_path / "r" / "launch-1")
    assert ranks["losses"][0] == pytest.approx(one["losses"][0], abs=1e-5)  # the same first step
    assert ranks["jobs_per_step"] == one["jobs_per_step"]
