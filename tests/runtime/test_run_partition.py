"""`ppdsl run --partition`: the built-in GPT split by a partition trains to the even split's parameters, and the
bytes each rank holds follow the partition as `ppdsl check --model` predicts; `ppdsl calibrate --layers` writes a
layer profile of the run that `synth --layers` reads."""

from __future__ import annotations

import importlib.util
import json

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.check import check
from ppdsl.analysis.layers import read_profile
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.runtime.memory import model_memory

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

runner = CliRunner()
# the built-in GPT at pp 2: the embedding, 4 blocks and the head, 6 layers; the even split is 3,3
SIZES = {"pp": 2, "microbatches": 4, "batch_size": 8, "steps": 2, "seed": 3}


def _predicted_peaks(partition: str | None) -> list[float]:
    scenario = Scenario("1f1b", 2, 4, partition=partition, memory=model_memory(None, SIZES["batch_size"]))
    return [r.peak_activations for r in check(scenario).execution.ranks]


def test_an_uneven_partition_trains_the_even_splits_parameters_and_holds_what_check_predicts(tmp_path):
    even = ppdsl.run("1f1b", **SIZES, summary_json=tmp_path / "even.json")
    uneven = ppdsl.run("1f1b", **SIZES, partition="2,4", summary_json=tmp_path / "uneven.json")
    assert set(uneven.parameters) == set(even.parameters) and len(even.parameters) > 10
    for name, sums in even.parameters.items():
        for key, value in sums.items():
            assert uneven.parameters[name][key] == pytest.approx(value, abs=1e-6, rel=1e-6), name
    assert [x for s in uneven.losses for x in s] == pytest.approx([x for s in even.losses for x in s], abs=1e-6)
    predicted = _predicted_peaks("2,4")
    assert uneven.peak_bytes == pytest.approx(predicted, rel=0.10)
    assert even.peak_bytes == pytest.approx(_predicted_peaks(None), rel=0.10)
    # the layer moved from rank 0 to rank 1 moves its bytes: the split is not the even one under another name
    assert uneven.peak_bytes[0] < even.peak_bytes[0] and uneven.peak_bytes[1] > even.peak_bytes[1]


def test_a_partition_that_does_not_fit_the_model_is_a_diagnostic():
    with pytest.raises(DiagnosticError) as wrong_total:
        ppdsl.run("1f1b", **SIZES, partition="3,4")
    (diag,) = wrong_total.value.diagnostics
    assert diag.code == "E104" and "has 6" in diag.message
    with pytest.raises(DiagnosticError) as by_hand:
        ppdsl.run("1f1b", **SIZES, partition="3,3", model="tiny_mlp")
    assert [d.code for d in by_hand.value.diagnostics] == ["E104"] and "ctx.pipeline" in by_hand.value.diagnostics[
        0
    ].message
    result = runner.invoke(app, ["run", "1f1b", "--pp", "2", "-m", "4", "--partition", "2,2,2"])
    assert result.exit_code == 2 and "error[E104]" in result.stderr and "Traceback" not in result.output


def test_an_empty_stage_the_file_allows_is_refused_by_the_runtime_naming_the_partition(tmp_path):
    """The checker accepts a stage without layers when the file says `allow empty`; the runtime cannot yet run a
    stage that only passes values on (E064). Before: its help sent the user to `ctx.stage`, which they never
    wrote; now it names the partition as what to change."""
    sched = tmp_path / "gap.sched"
    sched.write_text(
        'schedule "gap"\npartition = [2, 0, 2, 2] allow empty\n'
        "order { forward * microbatches backward * microbatches optimizer }\n"
    )
    with pytest.raises(DiagnosticError) as refused:
        ppdsl.run(str(sched), pp=4, microbatches=4, batch_size=8, steps=1)
    (diag,) = refused.value.diagnostics
    assert diag.code == "E064" and diag.message.startswith("stage 1 of 4 holds no op")
    assert "the partition 2,0,2,2 gives stage 1 no layer" in diag.help and "ctx.stage" not in diag.help


@pytest.mark.e2e
def test_one_process_per_rank_trains_the_same_parameters_under_a_partition(tmp_path):

    summaries = {}
    for name, extra in (("one", []), ("ranks", ["--nproc-per-node", "2", "--run-dir", str(tmp_path / "runs")])):
        path = tmp_path / f"{name}.json"
        args = ["run", "1f1b", "--pp", "2", "-m", "4", "--batch-size", "8", "--steps", "2", "--seed", "3"]
        result = runner.invoke(app, [*args, "--partition", "Et|t*3L", "--summary-json", str(path), *extra])
        assert result.exit_code == 0, result.output + (result.stderr or "")
        summaries[name] = json.loads(path.read_text())
    one, ranks = summaries["one"]["parameters"], summaries["ranks"]["parameters"]
    assert set(one) == set(ranks)
    for name, sums in one.items():
        for key, value in sums.items():
            assert ranks[name][key] == pytest.approx(value, abs=1e-6, rel=1e-6), name
    launch = next((tmp_path / "runs").iterdir())
    held = [json.loads((launch / f"rank{r}.json").read_text())["held_peak_bytes"] for r in range(2)]
    assert held[1] > held[0] > 0  # the rank with four layers holds more


@pytest.mark.e2e
def test_calibrate_layers_writes_a_profile_synth_reads_and_check_proves(tmp_path):

    trace, layers, out = tmp_path / "trace.json", tmp_path / "layers.json", tmp_path / "synth.sched"
    args = ["run", "zbh1", "--pp", "2", "-m", "4", "--batch-size", "8", "--steps", "3", "--partition", "2,4"]
    assert runner.invoke(app, [*args, "--profile", str(trace)]).exit_code == 0
    made = runner.invoke(app, ["calibrate", str(trace), "-o", str(tmp_path / "costs.json"), "--layers", str(layers)])
    assert made.exit_code == 0, made.output + (made.stderr or "")
    profile = read_profile(layers)
    assert profile.kinds == "ETTTTL"
    assert all(layer.forward > 0 and layer.backward_b > 0 and layer.held > 0 for layer in profile.layers)
    synth = runner.invoke(app, ["synth", "--pp", "2", "-m", "4", "--layers", str(layers), "-o", str(out)])
    assert synth.exit_code == 0, synth.output + (synth.stderr or "")
    checked = runner.invoke(app, ["check", str(out), "--pp", "2", "-m", "4", "--layers", str(layers)])
    assert checked.exit_code == 0 and "ok:" in checked.stdout
