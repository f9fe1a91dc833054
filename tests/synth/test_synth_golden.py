"""`ppdsl synth` writes the same `.sched` text, byte for byte, as the goldens in `tests/synth/golden/`.

The search's budget is counted work (synth/clock.py), so a small `--time-limit` gives the same file under any
load; these cases hold what the orchestration, the engines and the options reach, so a refactoring of them that
changes any written file fails here. `pytest --update-golden` rewrites the goldens (only when a change of the
search is meant).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.synth.cpsat import available

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "pp2-m4-unlimited": ["--pp", "2", "-m", "4"],
    "pp4-m8-limit4": ["--pp", "4", "-m", "8", "--memory-limit", "4"],
    "pp2-m4-vshape-limit3": ["--pp", "2", "-m", "4", "--vpp", "2", "--placement", "vshape", "--memory-limit", "3"],
    "pp3-m6-looped-vpp2-split-no": ["--pp", "3", "-m", "6", "--vpp", "2", "--split-backward", "no"],
    "pp3-m6-actions-limit2": ["--pp", "3", "-m", "6", "--memory-limit", "2", "--memory-actions", "recompute,offload"],
    "pp4-m8-recompute-limit2": [
        *("--pp", "4", "-m", "8", "--memory-limit", "2", "--memory-actions", "recompute"),
        *("--recompute-fraction", "0.5", "--cost", "forward=1,backward_b=1.5,backward_w=0.7,latency=0.1"),
    ],
    # above ACTIONS_CP_SAT_MAX_JOBS: the windows with actions; above CP_SAT_WHOLE_MAX_JOBS: the race of the starts
    "pp4-m16-actions-limit2": ["--pp", "4", "-m", "16", "--memory-limit", "2", "--memory-actions", "recompute,offload"],
    "pp4-m32-limit3": ["--pp", "4", "-m", "32", "--memory-limit", "3", "--cost", "backward_b=1.5,backward_w=0.7"],
    "pp2-m4-periodic": ["--pp", "2", "-m", "4", "--periodic", "--memory-limit", "2"],
    "pp2-m4-exact": ["--pp", "2", "-m", "4", "--exact", "--memory-limit", "2"],
}


@pytest.mark.skipif(not available(), reason="OR-Tools (CP-SAT) is not installed")
@pytest.mark.parametrize("case", CASES)
def test_synth_writes_the_golden_file(case, golden, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (the file names its own path in its commands: the same short one every time)
    out = f"{case}.sched"
    result = CliRunner().invoke(app, ["synth", *CASES[case], "--time-limit", "1", "-o", out, "--format", "json"])
    assert result.exit_code == 0, result.output
    golden(GOLDEN / out, Path(out).read_text(encoding="utf-8"))
