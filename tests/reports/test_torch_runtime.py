"""A torch user's path (issue 19): `ppdsl expand --format torch-csv` output, and a synthesized schedule's, trained
by PyTorch's own `_PipelineScheduleRuntime` on 2 gloo processes (examples/torch_pipeline.py, as the README's "Use
with PyTorch" runs it) to the parameters of the same model trained without a pipeline."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.cli import app
from ppdsl.language.resolve import resolve_text
from ppdsl.reports.formats import to_torch_csv

from paths import ROOT

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed (pip install -e '.[bench]')"
)
EXAMPLE = ROOT / "examples" / "torch_pipeline.py"
# a number, not what follows it: two ranks print at once, so one line may run into the next
DIFFERENCE = re.compile(
    r"rank (\d): stages \[([\d, ]+)\], largest difference from no pipeline (\d[\d.]*(?:e[-+]?\d+)?)"
)
runner = CliRunner()


def _train_in_torch(csv, microbatches: int) -> dict[int, tuple[str, float]]:
    """rank -> (its stages, the largest parameter difference from the unpipelined run)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    proc = subprocess.run(
        [*command, str(EXAMPLE), str(csv), "-m", str(microbatches)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {int(r): (stages, float(d)) for r, stages, d in DIFFERENCE.findall(proc.stdout)}


@pytest.mark.e2e
def test_an_exported_v_schedule_trains_in_torch_like_no_pipeline(tmp_path):
    csv = tmp_path / "zbv.csv"
    result = runner.invoke(
        app, ["expand", "zbv", "--pp", "2", "-m", "4", "--vpp", "2", "--format", "torch-csv", "-o", str(csv)]
    )
    assert result.exit_code == 0
    # the export says which stages each rank builds (a V: rank 0 holds the first and the last)
    assert "rank 0: stages 0, 3" in result.stderr and "rank 1: stages 1, 2" in result.stderr
    ranks = _train_in_torch(csv, 4)
    assert {r: s for r, (s, _) in ranks.items()} == {0: "0, 3", 1: "1, 2"}
    assert all(d < 1e-5 for _, d in ranks.values()), ranks


@pytest.mark.e2e
def test_a_synthesized_schedule_trains_in_torch_like_no_pipeline(tmp_path):
    outcome = ppdsl.synthesize(pp=2, microbatches=4, memory_limit=2, time_limit=1.0)
    exp = ppdsl.expand(resolve_text(outcome.text, "synth.sched"), pp=2, microbatches=4)
    csv = tmp_path / "synth.csv"
    csv.write_text(to_torch_csv(exp), newline="")
    ranks = _train_in_torch(csv, 4)
    assert sorted(ranks) == [0, 1] and all(d < 1e-5 for _, d in ranks.values()), ranks
