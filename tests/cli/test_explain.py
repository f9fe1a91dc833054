"""`ppdsl explain CODE` prints, byte for byte, what it printed when every explanation lived in one module (the
goldens in tests/golden/explain/ were written by that code, before the texts moved to a file per code)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app
from ppdsl.common.codes import REGISTRY

from paths import ROOT

GOLDEN = ROOT / "tests" / "golden" / "explain"
runner = CliRunner()


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_explain_prints_its_golden_text(code, golden):
    result = runner.invoke(app, ["explain", code])
    assert result.exit_code == 0, result.output
    golden(GOLDEN / f"{code}.txt", result.stdout)


def test_every_golden_is_a_registered_code():
    assert sorted(path.stem for path in GOLDEN.glob("*.txt")) == sorted(REGISTRY)
