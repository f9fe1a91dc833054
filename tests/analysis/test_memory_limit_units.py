"""A memory limit carries its unit: activations (a bare number) when memory is counted, bytes (`2GiB`) when it is
measured on a model. A limit in the other unit is refused (E088), never read as a number of this one."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ppdsl.analysis.expand import expand
from ppdsl.analysis.memory import MemoryModel
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.units import parse_memory_limit
from ppdsl.language.resolve import resolve_text

runner = CliRunner()
GPIPE = "order { forward * microbatches  backward * microbatches  optimizer }"
PP, M = 2, 2


def _code(fn, *args, **kwargs) -> str:
    with pytest.raises(DiagnosticError) as caught:
        fn(*args, **kwargs)
    return caught.value.diagnostics[0].code


@pytest.mark.parametrize(("text", "measured"), [("2GiB", False), ("1KiB", False), ("8B", False), ("4", True)])
def test_a_limit_in_the_other_unit_is_refused(text, measured):
    assert _code(parse_memory_limit, text, measured) == "E088"


def test_a_limit_in_its_own_unit_is_read():
    assert parse_memory_limit("4", measured=False) == 4
    assert parse_memory_limit("2GiB", measured=True) == 2 * 2**30
    assert parse_memory_limit("4096B", measured=True) == 4096


@pytest.mark.parametrize(
    "args",
    [
        ["check", "1f1b", "--pp", "4", "-m", "8", "--memory-limit", "1KiB"],  # used to be 1024 activations
        ["compare", "1f1b", "--pp", "4", "-m", "8", "--memory-limit", "1KiB"],
    ],
)
def test_bytes_without_a_model_are_refused_on_the_command_line(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "error[E088]" in result.stderr and "without --model" in result.stderr


def test_synth_refuses_bytes_without_a_model_and_writes_nothing(tmp_path):
    out = tmp_path / "found.sched"
    result = runner.invoke(app, ["synth", "--pp", "2", "-m", "4", "--memory-limit", "2GiB", "-o", str(out)])
    assert result.exit_code == 2 and "error[E088]" in result.stderr
    assert not out.exists()  # (it used to write `memory limit = 2147483648` activations)


def _measured() -> MemoryModel:
    return MemoryModel({s: {"forward": 1000.0, "backward": -1000.0} for s in range(PP)})


def test_a_schedules_activation_limit_is_refused_under_a_measured_model_with_the_reason():
    defn = resolve_text("memory limit = 2\n" + GPIPE)
    with pytest.raises(DiagnosticError) as caught:
        expand(defn, PP, M, memory=_measured())
    (d,) = caught.value.diagnostics
    assert d.code == "E088" and "counts activations" in d.message and "bytes" in d.message
    assert d.span is not None and "--memory-limit" in d.help
    # counted in activations it is a limit of 2; a limit in bytes from outside replaces it
    assert expand(defn, PP, M).memory_limit == [2, 2]
    assert expand(defn, PP, M, memory=_measured(), memory_limit=4096).memory_limit == [4096, 4096]
