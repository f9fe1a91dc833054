"""Activation memory measured on a real program, against sizes computed by hand.

tests/models/user_mlp.py: x [MB, SEQ, HIDDEN] float32, each stage `h = tanh(h @ w)`. A stage's backward needs
the matmul's input (for the weight gradient) and the tanh output (for tanh_grad): two tensors of
MB * SEQ * HIDDEN * 4 bytes. Split, backward_b runs tanh_grad and the input gradient and hands the matmul's
output gradient (one tensor) to backward_w, which also reads the matmul input.
"""

from __future__ import annotations

import importlib.util

import pytest

from ppdsl.analysis.check import check
from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import expansion_spec
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.units import format_bytes, parse_size
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load, resolve_text
from tests.models.user_mlp import HIDDEN, SEQ

from paths import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

MODEL = "tests.models.user_mlp:build"


def tensor_bytes(micro_batch: int) -> int:
    return micro_batch * SEQ * HIDDEN * 4


@pytest.mark.parametrize("micro_batch", [1, 3])
def test_whole_backward_frees_what_forward_keeps(micro_batch, monkeypatch):
    from ppdsl.runtime.memory import measure_stages, memory_model

    monkeypatch.syspath_prepend(str(ROOT))
    pp, m = 3, 4
    defn = load(library_dir() / "1f1b.sched")
    stages = measure_stages(expand(defn, pp, m), MODEL, micro_batch * m)
    for s in range(pp - 1):  # the last stage also keeps the loss's inputs
        assert stages[s].delta["forward"] == 2 * tensor_bytes(micro_batch)
        assert stages[s].delta["backward"] == -2 * tensor_bytes(micro_batch)
    assert stages[pp - 1].delta["forward"] > 2 * tensor_bytes(micro_batch)
    exp = expand(defn, pp, m, memory=memory_model(stages))  # the expansion built with the measured model
    assert exp.memory_unit == "bytes"
    forward = exp.type_names.index("forward")
    assert exp.mem_delta[forward][0][0] == 2 * tensor_bytes(micro_batch)


def test_split_backward_hands_one_tensor_to_backward_w(monkeypatch):
    from ppdsl.runtime.memory import measure_stages

    monkeypatch.syspath_prepend(str(ROOT))
    exp = expand(load(library_dir() / "zbv.sched"), 2, 4, 2)
    stages = measure_stages(exp, MODEL, 8)
    one = tensor_bytes(2)
    for s in range(3):
        d = stages[s].delta
        # backward_b frees the tanh output and allocates the matmul output gradient: net 0
        assert (d["forward"], d["backward_b"], d["backward_w"]) == (2 * one, 0, -2 * one)


def test_check_reports_bytes_and_checks_the_limit(monkeypatch):
    from ppdsl.runtime.memory import model_memory

    monkeypatch.syspath_prepend(str(ROOT))
    pp, m, batch = 2, 4, 8
    one = tensor_bytes(batch // m)
    ok = check(Scenario(library_dir() / "fthenb.sched", pp, m, memory=model_memory(MODEL, batch)))
    assert ok.valid
    # FThenB keeps every micro-batch's activations: rank 0 holds m * (2 tensors), and the gradients of its output (one
    # tensor each) of micro-batches 0 and 1: rank 1's backward of the second starts as rank 0's first does, and a
    # value counts from its sender's start (`analysis.memory`)
    held = m * 2 * one + 2 * one
    assert ok.execution.ranks[0].peak_activations == held
    tight = check(
        Scenario(library_dir() / "fthenb.sched", pp, m, memory=model_memory(MODEL, batch), memory_limit=held - 1)
    )
    assert [d.code for d in tight.errors] and all(d.code == "S106" for d in tight.errors)
    assert "KiB" in tight.errors[0].message or " B" in tight.errors[0].message


@pytest.mark.parametrize(
    ("text", "value"), [("2GiB", 2 * 2**30), ("512MiB", 512 * 2**20), ("1.5GB", 1.5e9), ("64", 64)]
)
def test_sizes(text, value):
    assert parse_size(text) == value
    assert format_bytes(2 * 2**30) == "2.00 GiB"


def test_compare_and_plot_report_bytes(tmp_path, monkeypatch, in_repo):
    import json

    from typer.testing import CliRunner

    from ppdsl.cli import app

    monkeypatch.syspath_prepend(str(ROOT))
    runner = CliRunner()
    pp, m, batch = 2, 4, 8
    one = tensor_bytes(batch // m)
    # Per micro-batch stage 0 keeps 2 tensors (x, tanh out), the last stage 3 (its input, tanh out, t - y for
    # pow_grad; not y, which subtract_grad reads for its shape) and a few scalars of the loss. FThenB's last rank
    # holds all m micro-batches; 1F1B's rank 0 holds pp = 2 micro-batches of 2 tensors and, during its first backward,
    # the gradients of both (one tensor each: rank 1 starts the second's backward then), its last rank one of 3.
    limit = f"{m * 2 * one}B"  # above 1F1B's peak, below FThenB's (a limit in bytes says so)
    args = ["compare", "fthenb", "1f1b", "--pp", str(pp), "-m", str(m), "--model", MODEL, "--batch-size", str(batch)]
    result = runner.invoke(app, [*args, "--memory-limit", limit, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["schedule"]: r for r in json.loads(result.stdout)["rows"]}
    f, o = rows["FThenB"], rows["1F1B"]
    assert (f["peak_rank"], o["peak_rank"]) == (pp - 1, 0)
    assert m * 3 * one <= f["peak_activations"] < m * (3 * one + 64)
    assert o["peak_activations"] == 2 * 2 * one + 2 * one
    assert (f["over_limit"], o["over_limit"], o["memory_unit"]) == (True, False, "bytes")
    out = tmp_path / "t.png"
    result = runner.invoke(
        app, ["plot", "fthenb", "--pp", "2", "-m", "4", "--model", MODEL, "--batch-size", "8", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"peak memory {format_bytes(f['peak_activations'])}" in result.stdout


def _job(name, ts, dur):
    return {"ph": "X", "cat": "UserDefined", "name": f"{name}[{dur} us]", "ts": ts, "dur": dur, "tid": "main"}


def _mem(cat, addr, size, ts, tid):
    return {
        "ph": "i",
        "cat": cat,
        "name": "[memory]",
        "ts": ts,
        "tid": tid,
        "args": {"place": "Place(cpu)", "addr": addr, "increase_bytes": size if cat == "Allocate" else -size},
    }


def test_held_memory_ties_each_free_to_the_job_that_released_it():
    """Profiler events made by hand: a free lands in a later job (the collector thread lags), yet counts for the job
    whose collector thread released it; a job's own scratch is held at no boundary."""
    from ppdsl.runtime.profile import held_memory

    exp = expand(resolve_text("order { forward * microbatches backward * microbatches optimizer }"), 2, 1)
    jobs = [("forward@0-0", 0, 10), ("forward@1-0", 20, 10), ("backward@1-0", 40, 10), ("backward@0-0", 60, 10)]
    jobs += [("optimizer@r0-0", 80, 5), ("optimizer@r1-0", 90, 5)]
    events = [_job(name, ts, dur) for name, ts, dur in jobs]
    events += [
        _mem("Allocate", "a1", 100, 2, "op"),  # forward@0 keeps it for backward@0
        _mem("Allocate", "s1", 1000, 3, "op"),  # forward@0's scratch ...
        _mem("Allocate", "s2", 7, 4, "op"),
        _mem("Free", "s2", 7, 5, "gc-f0"),
        _mem("Free", "s1", 1000, 21, "gc-f0"),  # ... freed late, while forward@1 runs
        _mem("Allocate", "a2", 50, 22, "op"),  # forward@1 keeps it for backward@1
        _mem("Allocate", "s3", 9, 42, "op"),
        _mem("Allocate", "s4", 9, 43, "op"),
        _mem("Free", "s3", 9, 44, "gc-b1"),
        _mem("Free", "s4", 9, 45, "gc-b1"),
        _mem("Free", "a2", 50, 46, "gc-b1"),
        _mem("Allocate", "s5", 3, 61, "op"),
        _mem("Allocate", "s6", 3, 62, "op"),
        _mem("Free", "s5", 3, 63, "gc-b0"),
        _mem("Free", "s6", 3, 64, "gc-b0"),
        _mem("Free", "a1", 100, 82, "gc-b0"),  # released by backward@0, freed while the optimizer runs
    ]
    held = held_memory(expansion_spec(exp), events)
    assert [sample[1] for sample in held.samples] == [[100, 0], [100, 50], [100, 0], [0, 0], [0, 0], [0, 0]]
    assert held.peak == [100, 50]
    assert [round(sample[0] * 1e6) for sample in held.samples] == [10, 30, 50, 70, 85, 95]


@pytest.mark.e2e
def test_run_measures_held_bytes_near_the_estimate(tmp_path, in_repo):
    """The built-in model, 1F1B: the bytes each rank really holds at job boundaries (`--summary-json` peak_bytes,
    a counter track in `--profile`) against `ppdsl check --model`'s estimate: within 10%. (bench_run reports the
    same for 1F1B, ZB-H1 and ZB-V at the default size.)"""
    import json

    from typer.testing import CliRunner

    from ppdsl.cli import app
    from ppdsl.reports.trace import read_trace
    from ppdsl.runtime.memory import model_memory

    pp, m, batch = 2, 4, 16
    summary, profile = tmp_path / "s.json", tmp_path / "p.json"
    args = ["run", "1f1b", "--pp", str(pp), "-m", str(m), "--batch-size", str(batch), "--steps", "2"]
    result = CliRunner().invoke(
        app, [*args, "--summary-json", str(summary), "--profile", str(profile), "--profile-steps", "1"]
    )
    assert result.exit_code == 0, result.output
    measured = json.loads(summary.read_text())["peak_bytes"]
    estimate = check(Scenario(library_dir() / "1f1b.sched", pp, m, memory=model_memory(None, batch)))
    expected = [r.peak_activations for r in estimate.execution.ranks]
    assert len(measured) == pp and all(e > 0 for e in expected)
    assert all(abs(got / want - 1) <= 0.10 for got, want in zip(measured, expected, strict=True)), (measured, expected)
    trace = json.loads(profile.read_text())
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert {e["pid"] for e in counters} == set(range(pp)) and {e["name"] for e in counters} == {"held bytes"}
    assert max(e["args"]["bytes"] for e in counters if e["pid"] == 0) == measured[0]
    assert len(read_trace(profile).jobs) == len(counters) // pp  # one sample per rank at every job's end


@pytest.mark.e2e
def test_synth_plans_for_the_values_in_transit_the_check_counts(monkeypatch):
    """At the built-in model's bytes, a limit at 1F1B's activations alone (the search's engines count only those):
    1F1B's rank 0 then holds a gradient more than the limit. Synth searches again with the limit less what it went
    over, so the file it writes fits with what is in transit; one round only is the finding: the check refuses it."""
    from dataclasses import replace

    import ppdsl.synth.driver as driver
    from ppdsl.common.diagnostics import DiagnosticError
    from ppdsl.runtime.memory import model_memory
    from ppdsl.synth import SynthRequest, synthesize_file

    pp, m, batch = 4, 8, 16
    model = model_memory(None, batch)(Scenario(library_dir() / "1f1b.sched", pp, m).expansion())
    activations_only = replace(model, received={})
    limit = check(Scenario(library_dir() / "1f1b.sched", pp, m, memory=activations_only)).execution.ranks[0]
    limit = limit.peak_activations
    # measured as `ppdsl synth --model builtin` measures: on the search's probe, then on the written file
    request = SynthRequest(pp, m, memory=model_memory(None, batch), memory_limit=limit, time_limit=1.0)
    monkeypatch.setattr(driver, "TRANSIT_ROUNDS", 1)
    with pytest.raises(DiagnosticError) as found:
        synthesize_file(request)
    assert "S106" in found.value.diagnostics[0].message
    monkeypatch.undo()
    out = synthesize_file(request)
    assert out.check.valid and max(r.peak_activations for r in out.check.ranks) <= limit
    plain = check(Scenario(library_dir() / "1f1b.sched", pp, m, memory=model))
    assert plain.execution.ranks[0].peak_activations > limit  # (what the first round's schedule ran into)
