"""UI tests: every bad `.sched` in tests/ui/ next to the exact diagnostics `ppdsl check` prints for it.

The first line of each file, `# args: ...`, holds the command-line sizes. Regenerate the expectations with
`pytest tests/test_ui.py --update-golden` and review the diff.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

from paths import UI

CASES = sorted(UI.glob("*.sched"))
runner = CliRunner()


def _args(path: Path) -> list[str]:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# args:"), f"{path.name} must start with `# args: ...`"
    return shlex.split(first[len("# args:") :])


def _run(path: Path, *extra: str):
    rel = str(path.relative_to(UI.parent.parent))
    return runner.invoke(app, ["check", rel, *_args(path), *extra])


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_diagnostics_text(case: Path, in_repo, golden):
    result = _run(case)
    assert result.exit_code in (1, 2), f"a bad schedule must fail, got exit {result.exit_code}"
    assert "Traceback" not in result.output
    golden(case.with_suffix(".stderr"), f"exit code: {result.exit_code}\n{result.stderr}")


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_diagnostics_json_has_the_same_findings(case: Path, in_repo):
    text = _run(case)
    data = _run(case, "--format", "json")
    assert data.exit_code == text.exit_code
    report = json.loads(data.stdout)
    assert report["valid"] is False
    assert report["diagnostics"], "an invalid schedule reports at least one diagnostic"
    for diag in report["diagnostics"]:
        assert set(diag) >= {"severity", "code", "message", "file", "line", "col", "help"}
        # the human rendering shows every code and message the JSON holds
        assert f"[{diag['code']}]: {diag['message']}" in text.stderr


def test_exit_codes_separate_syntax_from_invalid(in_repo):
    assert _run(UI / "syntax_missing_colon.sched").exit_code == 2
    assert _run(UI / "deadlock.sched").exit_code == 1


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_every_wrong_file_is_answered_in_under_a_second(case: Path, in_repo):
    """Whatever its loops and sizes (nested loops of 4000^3, pp=100000 microbatches=100000): bounded evaluation
    answers each case quickly (in process, without the interpreter's start-up)."""
    _run(case)  # the parser's tables and the imports are built once per process
    seconds = []
    for _ in range(3):  # the best of three: on a shared machine one run may lose its core for a while
        start = time.perf_counter()
        result = _run(case)
        seconds.append(time.perf_counter() - start)
        assert result.exit_code in (1, 2)
    assert min(seconds) < 1.0, seconds
