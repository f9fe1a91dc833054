"""`ppdsl lsp` without pygls: E099 and exit 2, not a traceback."""

from __future__ import annotations

import sys

from typer.testing import CliRunner

from ppdsl.cli import app


def test_lsp_without_pygls_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygls", None)  # `import pygls` now raises ImportError
    result = CliRunner().invoke(app, ["lsp"])
    assert result.exit_code == 2
    assert "error[E099]: `ppdsl lsp` needs pygls, which is not installed" in result.stderr
    assert "pip install 'ppdsl[lsp]'" in result.stderr
