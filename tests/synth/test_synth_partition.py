"""`ppdsl synth --layers`: the partition chosen with the order, the file carrying it and proven with the profile."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ppdsl.analysis.check import check
from ppdsl.analysis.layers import Layer, LayerProfile, Partition, even_partition, min_max_partition, stage_work
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.synth import SynthRequest
from ppdsl.synth.partition import candidates, synthesize_partitioned

# an embedding, six blocks and a head six times a block's forward, as Llama's
LAYERS = (Layer("E", 2.0, 1.0, 0.0), *(Layer("T", 1.0, 1.0, 1.0) for _ in range(6)), Layer("L", 6.0, 4.0, 0.0))
PROFILE = LayerProfile(LAYERS, "model.json")


def _request(**changes) -> SynthRequest:
    return SynthRequest(pp=2, microbatches=4, time_limit=2.0, **changes)


def test_the_candidates_start_with_the_dp_split_and_the_even_one():
    found = candidates(PROFILE, 2)
    assert found[0] == min_max_partition(PROFILE, 2) and found[1] == even_partition(8, 2)
    assert len({p.counts for p in found}) == len(found) and all(sum(p.counts) == 8 for p in found)


def test_the_chosen_partition_is_carried_and_proven_with_the_profile():
    found = synthesize_partitioned(_request(), PROFILE, "--layers model.json")
    text = found.outcome.text
    assert f"partition = [{', '.join(map(str, found.partition.counts))}]" in text
    assert "--layers model.json" in text  # the docstring's check command names the profile
    proof = found.outcome.check
    assert proof.valid and [s.layers for s in proof.stages] == list(found.partition.counts)
    assert proof.makespan == min(m for _, m in found.tried if m is not None)
    # no worse than either anchor of 1F1B (even split, DP split) at these sizes
    for partition in (even_partition(8, 2), min_max_partition(PROFILE, 2)):
        anchor = check(Scenario("1f1b", 2, 4, layers=PROFILE, partition=partition))
        assert proof.makespan <= anchor.makespan + 1e-9


def test_a_fixed_partition_is_kept_and_the_memory_limit_holds():
    fixed = Partition((3, 5))
    limit = 12.0  # layer activations: the second stage holds 5 a micro-batch in flight
    found = synthesize_partitioned(_request(memory_limit=limit), PROFILE, "--layers model.json", fixed)
    assert found.partition == fixed and [p for p, _ in found.tried] == [fixed]
    assert max(found.outcome.check.peak_activations) <= limit + 1e-9
    with pytest.raises(DiagnosticError) as err:
        synthesize_partitioned(_request(), PROFILE, "", Partition((8, 0)))
    assert [d.code for d in err.value.diagnostics] == ["E105"]


def test_the_search_costs_are_the_stages_work():
    found = synthesize_partitioned(_request(), PROFILE, "", Partition((4, 4)))
    work = stage_work(Partition((4, 4)), 2, PROFILE)
    exp = found.outcome.check.expansion
    f = exp.type_names.index("forward")
    assert [exp.cost[f][r][0] for r in range(2)] == list(work.forward)


def test_the_command_writes_a_file_that_checks_with_the_profile(tmp_path):
    profile = tmp_path / "model.json"
    rows = [
        {"name": x.kind, "forward": x.forward, "backward_b": x.backward_b, "backward_w": x.backward_w} for x in LAYERS
    ]
    profile.write_text(json.dumps({"layers": rows}))
    out = tmp_path / "found.sched"
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "synth",
            "--pp",
            "2",
            "-m",
            "4",
            "--layers",
            str(profile),
            "--time-limit",
            "2",
            "-o",
            str(out),
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert sum(report["partition"]) == 8 and report["partitions_tried"]
    checked = runner.invoke(
        app, ["check", str(out), "--pp", "2", "-m", "4", "--layers", str(profile), "--format", "json"]
    )
    data = json.loads(checked.stdout)
    assert data["valid"] and data["makespan"] == pytest.approx(report["makespan"])
    assert [s["layers"] for s in data["stages"]] == report["partition"]
    refused = runner.invoke(app, ["synth", "--pp", "2", "-m", "4", "--partition", "4,4", "-o", str(out)])
    assert refused.exit_code == 2 and "--layers" in refused.stderr
