"""Activation memory measured on a real program, against sizes computed by hand.

tests/models/user_mlp.py: x [MB, SEQ, HIDDEN] float32, each stage `h = tanh(h @ w)`. A stage's backward needs
the matmul's input (for the weight gradient) and the tanh output (for tanh_grad): two tensors of
MB * SEQ * HIDDEN * 4 bytes. Split, backward_b runs tanh_grad and the input gradient and hands the matmul's
output gradient (one tensor) to backward_w, which also reads the matmul input.
"""

from __future__ import annotations

import importlib.util

import pytest

from ppdsl.analysis.expand import expand
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.units import format_bytes, parse_size
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load
from tests.models.user_mlp import HIDDEN, SEQ

from paths import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

MODEL = "tests.models.user_mlp:build"


def tensor_bytes(micro_batch: int) -> int:
    return micro_batch * SEQ * HIDDEN * 4


@pytest.mark.parametrize("micro_batch", [1, 3])
def test_whole_backward_frees_what_forward_keeps(micro_batch, monkeypatch):
    from ppdsl.runtime.memory import apply_model_memory

    monkeypatch.syspath_prepend(str(ROOT))
    pp, m = 3, 4
    exp = expand(load(library_dir() / "1f1b.sched"), pp, m)
    stages = apply_model_memory(exp, MODEL, micro_batch * m)
    for s in range(pp - 1):  # the last stage also keeps the loss's inputs
        assert stages[s].delta["forward"] == 2 * tensor_bytes(micro_batch)
        assert stages[s].delta["backward"] == -2 * tensor_bytes(micro_batch)
    assert stages[pp - 1].delta["forward"] > 2 * tensor_bytes(micro_batch)
    assert exp.memory_unit == "bytes"
    forward = exp.type_names.index("forward")
    assert exp.mem_delta[forward][0][0] == 2 * tensor_bytes(micro_batch)


def test_split_backward_hands_one_tensor_to_backward_w(monkeypatch):
    from ppdsl.runtime.memory import apply_model_memory

    monkeypatch.syspath_prepend(str(ROOT))
    exp = expand(load(library_dir() / "zbv.sched"), 2, 4, 2)
    stages = apply_model_memory(exp, MODEL, 8)
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
    ok = Scenario(library_dir() / "fthenb.sched", pp, m, memory=model_memory(MODEL, batch)).check()
    assert ok.valid
    # FThenB keeps every micro-batch's activations: rank 0 peaks at m * (2 tensors)
    assert ok.execution.ranks[0].peak_activations == m * 2 * one
    tight = Scenario(
        library_dir() / "fthenb.sched", pp, m, memory=model_memory(MODEL, batch), memory_limit=m * 2 * one - 1
    ).check()
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
    # The last stage keeps the most per micro-batch (its loss's inputs too). FThenB's last rank holds all m
    # micro-batches, 1F1B's last rank exactly one (its rank 0 holds pp = 2 of the smaller ones): so FThenB's
    # peak is m times 1F1B's, both on the last rank.
    limit = f"{m * 2 * one}"  # above 1F1B's peak, below FThenB's
    args = ["compare", "fthenb", "1f1b", "--pp", str(pp), "-m", str(m), "--model", MODEL, "--batch-size", str(batch)]
    result = runner.invoke(app, [*args, "--memory-limit", limit, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {r["schedule"]: r for r in json.loads(result.stdout)["rows"]}
    f, o = rows["FThenB"], rows["1F1B"]
    assert (f["peak_rank"], o["peak_rank"]) == (pp - 1, pp - 1)
    assert f["peak_activations"] == m * o["peak_activations"]
    assert 2 * one < o["peak_activations"] < m * 2 * one
    assert (f["over_limit"], o["over_limit"], o["memory_unit"]) == (True, False, "bytes")
    out = tmp_path / "t.png"
    result = runner.invoke(
        app, ["plot", "fthenb", "--pp", "2", "-m", "4", "--model", MODEL, "--batch-size", "8", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"peak memory {format_bytes(f['peak_activations'])}" in result.stdout
