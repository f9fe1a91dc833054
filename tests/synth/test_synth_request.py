"""`SynthRequest` is the one table of `ppdsl synth`'s options: the command's flags are read off its fields, and
`ppdsl.synthesize` takes every one of them by its Python name, with the same checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.cli import app
from ppdsl.cli.synth import COMPOSED, OWN, command_parameters
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.synth.cpsat import available
from ppdsl.synth.request import SynthRequest, api_keywords, flag, is_option

GOLDEN = Path(__file__).parent / "golden"


def test_the_command_has_one_flag_per_option_field_and_the_composed_ones_in_their_place():
    fields = dataclasses.fields(SynthRequest)
    expected = []
    for f in fields:
        expected += [name for name, _, _ in COMPOSED.get(f.name, [])]
        expected += [f.name] if is_option(f) else []
    expected += [name for name, _, _ in OWN]
    assert [p.name for p in command_parameters()] == expected
    # every option is in --help by its flag, with its help's first words
    shown = CliRunner().invoke(app, ["synth", "--help"], env={"COLUMNS": "200"}).output
    for f in fields:
        if is_option(f):
            assert flag(f) in shown and f.metadata["help"][:20] in shown, f.name


def test_a_flag_out_of_its_fields_range_is_refused_by_the_command_line():
    result = CliRunner().invoke(app, ["synth", "--pp", "2", "-m", "4", "-o", "-", "--recompute-fraction", "0"])
    assert result.exit_code != 0 and "--recompute-fraction" in result.output and "0.01" in result.output


def test_the_python_api_checks_the_same_ranges():
    with pytest.raises(DiagnosticError) as found:
        ppdsl.synthesize(pp=2, microbatches=4, seed=-1, workers=0)
    messages = [d.message for d in found.value.diagnostics]
    assert any("`seed` must be from 0" in m for m in messages) and any("`workers`" in m for m in messages)


def test_a_mistyped_keyword_is_refused_with_the_close_one():
    with pytest.raises(DiagnosticError) as found:
        ppdsl.synthesize(pp=2, microbatches=4, memory_action="offload")
    (diagnostic,) = found.value.diagnostics
    assert "`ppdsl.synthesize` takes no option `memory_action`" in diagnostic.message
    assert "memory_actions" in diagnostic.help


def test_every_field_but_what_the_command_records_is_a_keyword():
    assert set(api_keywords()) == {f.name for f in dataclasses.fields(SynthRequest)} - {
        "memory_options",
        "command",
        "cost_options",
    }


@pytest.mark.skipif(not available(), reason="OR-Tools (CP-SAT) is not installed")
def test_the_python_api_with_memory_actions_writes_what_the_command_writes():
    """The golden the command line wrote (test_synth_golden.py), from `ppdsl.synthesize` with the same options."""
    out = "pp3-m6-actions-limit2.sched"
    found = ppdsl.synthesize(
        pp=3, microbatches=6, memory_limit=2, memory_actions="recompute,offload", time_limit=1, output=out
    )
    assert found.text == (GOLDEN / out).read_text(encoding="utf-8")
    assert found.request.memory_actions == ("recompute", "offload")


def test_the_python_api_reads_a_host_limit_and_a_recompute_fraction():
    request = SynthRequest(2, 4, memory_actions=("offload", "recompute"), host_limit=1.5, recompute_fraction=0.5)
    assert request.memory_actions == ("offload", "recompute") and request.time_limit == 10.0
    assert SynthRequest(2, 4, exact=True).time_limit == 120.0
    with pytest.raises(DiagnosticError) as found:  # a size in bytes without a model: refused as the flag is
        ppdsl.synthesize(pp=2, microbatches=4, memory_actions="offload", host_limit="2GiB")
    assert found.value.diagnostics[0].code == "E088"


def test_a_model_batch_that_does_not_split_is_refused_before_the_model_is_measured(monkeypatch):
    import ppdsl.runtime.memory as memory  # (the module only: paddle loads when a model is measured)

    monkeypatch.setattr(memory, "model_memory", lambda *args: pytest.fail("measured a batch that does not split"))
    with pytest.raises(DiagnosticError) as found:
        ppdsl.synthesize(pp=2, microbatches=4, model="builtin", batch_size=6)
    assert found.value.diagnostics[0].code == "E036"  # (the batch does not split into the micro-batches)
