"""The layers of docs/architecture.md, as import-linter contracts in pyproject.toml: they hold, and a back-edge
breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from paths import ROOT


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the package under `root`, before any installed one
    cmd = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]
    return subprocess.run(
        [*cmd, "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_layer_imports_only_the_layers_below_it():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_a_back_edge_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "ppdsl", tmp_path / "ppdsl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "ppdsl" / "analysis" / "grid.py", "a") as f:
        f.write("\nfrom ppdsl.reports import trace  # a back-edge: analysis reaching up into reports\n")
    with open(tmp_path / "ppdsl" / "language" / "ir.py", "a") as f:
        f.write("\nimport paddle  # the front end importing paddle\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "0 kept, 2 broken" in result.stdout
    assert "ppdsl.analysis.grid -> ppdsl.reports.trace" in result.stdout
    assert "ppdsl.language.ir -> paddle" in result.stdout
