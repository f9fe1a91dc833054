"""Test configuration: `tests/` helpers importable, and `--update-golden` to rewrite golden files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite golden and UI expectation files from the current output instead of comparing",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """compare(path, text): assert `text` equals the golden file, or rewrite it under --update-golden."""
    update = request.config.getoption("--update-golden")

    def compare(path: Path, text: str) -> None:
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"{path} is missing: run pytest with --update-golden to create it"
        expected = path.read_text(encoding="utf-8")
        assert text == expected, f"{path.relative_to(ROOT)} differs (pytest --update-golden rewrites it)"

    return compare


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from the repository root, so paths in diagnostics are short and stable."""
    monkeypatch.chdir(ROOT)
    return ROOT
