"""UI tests for model mistakes (issue 19): each `--model` module in tests/ui/models/ next to the exact diagnostic
`ppdsl run` prints for it: an E-code naming the model function, what it returned or raised, and what it must do.

The first line of each module, `# args: ...`, holds the command line. `pytest tests/cli/test_ui_models.py
--update-golden` regenerates the expectations.
"""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

from paths import UI

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed (pip install -e '.[test]')"
)
MODELS = UI / "models"
CASES = sorted(MODELS.glob("model_*.py"))
runner = CliRunner()


def _args(path: Path) -> list[str]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# args:"), f"{path.name} must start with `# args: ...`"
    return shlex.split(first[len("# args:") :])


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_model_mistake_is_a_diagnostic(case: Path, monkeypatch, golden):
    monkeypatch.chdir(MODELS)  # the model module is found in the folder the command is typed in
    result = runner.invoke(app, _args(case))
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"model function `{case.stem}:build`" in result.stderr
    golden(case.with_suffix(".stderr"), f"exit code: {result.exit_code}\n{result.stderr}")
