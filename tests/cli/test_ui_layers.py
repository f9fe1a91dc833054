"""UI tests of layer profiles: each `.sched` in tests/ui/layers/ names a profile beside it in its `# args:` line
(`--layers tests/ui/layers/X.json`), and `ppdsl check`'s diagnostics, located in the profile, are the `.stderr`
next to it. Kept apart from tests/ui/ because the language server's `# ppdsl:` directive reads no profile files.
Regenerate with `pytest tests/cli/test_ui_layers.py --update-golden` and review the diff."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

from paths import UI

CASES = sorted((UI / "layers").glob("*.sched"))
runner = CliRunner()


def _run(path: Path, *extra: str):
    args = shlex.split(path.read_text(encoding="utf-8").splitlines()[0][len("# args:") :])
    return runner.invoke(app, ["check", str(path.relative_to(UI.parent.parent)), *args, *extra])


def test_there_are_cases():
    assert len(CASES) >= 3


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_diagnostics_text(case: Path, in_repo, golden):
    result = _run(case)
    assert result.exit_code == 2 and "Traceback" not in result.output
    golden(case.with_suffix(".stderr"), f"exit code: {result.exit_code}\n{result.stderr}")


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_diagnostics_json_has_the_same_findings(case: Path, in_repo):
    text, data = _run(case), _run(case, "--format", "json")
    assert data.exit_code == text.exit_code
    report = json.loads(data.stdout)
    assert report["valid"] is False and report["diagnostics"]
    for diag in report["diagnostics"]:
        assert f"[{diag['code']}]: {diag['message']}" in text.stderr
