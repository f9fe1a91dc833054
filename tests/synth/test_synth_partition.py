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
from ppdsl.synth import SynthRequest, synthesize_file
from ppdsl.synth.partition import candidates

# an embedding, six blocks and a head six times a block's forward, as Llama's
LAYERS = (Layer("E", 2.0, 1.0, 0.0), *(Layer("T", 1.0, 1.0, 1.0) for _ in range(6)), Layer("L", 6.0, 4.0, 0.0))
PROFILE = LayerProfile(LAYERS, "model.json")


def _request(**changes) -> SynthRequest:
    return SynthRequest(pp=2, microbatches=4, time_limit=2.0, layers=PROFILE, **changes)


def test_the_candidates_start_with_the_dp_split_and_the_even_one():
    found = candidates(PROFILE, 2)
    assert found[0] == min_max_partition(PROFILE, 2) and found[1] == even_partition(8, 2)
    assert len({p.counts for p in found}) == len(found) and all(sum(p.counts) == 8 for p in found)


def test_the_chosen_partition_is_carried_and_proven_with_the_profile():
    found = synthesize_file(_request())
    text = found.text
    assert f"partition = [{', '.join(map(str, found.partition.counts))}]" in text
    assert "--layers model.json" in text  # the docstring's check command names the profile
    proof = found.check
    assert proof.valid and [s.layers for s in proof.stages] == list(found.partition.counts)
    assert proof.makespan == min(m for _, m in found.partitions_tried if m is not None)
    # no worse than either anchor of 1F1B (even split, DP split) at these sizes
    for partition in (even_partition(8, 2), min_max_partition(PROFILE, 2)):
        anchor = check(Scenario("1f1b", 2, 4, layers=PROFILE, partition=partition))
        assert proof.makespan <= anchor.makespan + 1e-9


def test_a_fixed_partition_is_kept_and_the_memory_limit_holds():
    fixed = Partition((3, 5))
    limit = 12.0  # layer activations: the second stage holds 5 a micro-batch in flight
    found = synthesize_file(_request(memory_limit=limit, partition=fixed))
    assert found.partition == fixed and [p for p, _ in found.partitions_tried] == [fixed]
    assert max(found.check.peak_activations) <= limit + 1e-9
    with pytest.raises(DiagnosticError) as err:
        synthesize_file(_request(partition=Partition((8, 0))))
    assert [d.code for d in err.value.diagnostics] == ["E105"]


def test_the_search_costs_are_the_stages_work():
    found = synthesize_file(_request(partition="4,4"))  # (text, as --partition gives it)
    work = stage_work(Partition((4, 4)), 2, PROFILE)
    exp = found.check.expansion
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


# ---------------------------------------------------------------- the Python API: `layers` and `partition` fields


def _profile_file(tmp_path, **memory) -> str:
    """The test model as a compact profile, with per-letter memory tables (`activation_bytes`, say)."""
    times = {"forward_ms": {"E": 2.0, "T": 1.0, "L": 6.0}, "backward_ms": {"E": 1.0, "T": 1.0, "L": 4.0}}
    data = {"pattern": "ETTTTTTL", **times, "weight_ms": {"E": 0.0, "T": 1.0, "L": 0.0}, **memory}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_the_python_api_takes_a_profile_and_a_partition_as_the_command_does(tmp_path):
    import ppdsl

    path = _profile_file(tmp_path)
    out = tmp_path / "cli.sched"
    found = ppdsl.synthesize(pp=2, microbatches=4, layers=path, partition="3,5", time_limit=2.0, output=str(out))
    assert found.partition.counts == (3, 5) and "partition = [3, 5]" in found.text
    assert f"--layers {path}" in found.text  # the docstring's check command names the profile
    cli = CliRunner().invoke(
        app,
        ["synth", "--pp", "2", "-m", "4", "--layers", path, "--partition", "3,5", "--time-limit", "2", "-o", str(out)],
    )
    assert cli.exit_code == 0, cli.output
    # the command is a mapping onto the same request: the same file but for the command line it records
    assert _without_command(out.read_text()) == _without_command(found.text)
    free = ppdsl.synthesize(pp=2, microbatches=4, layers=PROFILE, time_limit=2.0)  # a profile already read
    assert free.partition is not None and len(free.partitions_tried) >= 2
    assert free.check.makespan == min(m for _, m in free.partitions_tried if m is not None)


def _without_command(text: str) -> list[str]:
    """The file's lines but the docstring's record of the command that made it."""
    return [line for line in text.splitlines() if not line.lstrip().startswith("ppdsl synth")]


def test_the_request_refuses_a_partition_without_a_profile_and_a_bad_profile_or_partition(tmp_path):
    assert [d.code for d in SynthRequest(pp=2, microbatches=4, partition="4,4").problems()] == ["E007"]
    assert "E103" in [d.code for d in _request(partition="4,x").problems()]
    bad = tmp_path / "bad.json"
    bad.write_text('{"layers": [{"forward": -1, "backward_b": 1, "backward_w": 1}]}')
    found = SynthRequest(pp=2, microbatches=4, layers=str(bad)).problems()
    assert [d.code for d in found] == ["E101"] and found[0].span is not None and found[0].span.line == 1
    with pytest.raises(DiagnosticError) as err:
        synthesize_file(SynthRequest(pp=2, microbatches=4, layers=str(bad)))
    assert err.value.diagnostics[0].code == "E101"


# ---------------------------------------------------------------- a memory limit in bytes from the profile

MIB = 2**20


def test_a_profile_of_activation_bytes_takes_a_limit_in_bytes(tmp_path):
    import ppdsl

    path = _profile_file(tmp_path, activation_bytes={"E": 64 * MIB, "T": 128 * MIB, "L": 512 * MIB})
    unlimited = ppdsl.synthesize(pp=2, microbatches=4, layers=path, time_limit=2.0)
    assert unlimited.check.expansion.memory_unit == "bytes"
    peak = max(unlimited.check.peak_activations)
    limit = 0.75 * peak  # below what the unlimited schedule holds: the limit must bind
    found = ppdsl.synthesize(pp=2, microbatches=4, layers=path, memory_limit=f"{limit / MIB:.0f}MiB", time_limit=2.0)
    work = stage_work(found.partition, 2, found.request.profile())
    assert work.memory_unit == "bytes" and sum(work.activation) == pytest.approx(64 * MIB + 6 * 128 * MIB + 512 * MIB)
    assert max(found.check.peak_activations) <= round(limit / MIB) * MIB + 1e-6
    # the written file checks in bytes with the profile, as a user runs it, and its check command holds the limit
    (command,) = [line for line in found.text.splitlines() if line.startswith("Check:")]
    assert f"--memory-limit {round(limit / MIB) * MIB}B" in command and "bytes of the layer profile" in found.text
    out = tmp_path / "found.sched"
    out.write_text(found.text)
    runner = CliRunner()
    args = ["check", str(out), "--pp", "2", "-m", "4", "--layers", path, "--memory-limit", f"{limit / MIB:.0f}MiB"]
    checked = runner.invoke(app, [*args, "--format", "json"])
    data = json.loads(checked.stdout)
    assert data["valid"] and data["makespan"] == pytest.approx(found.check.makespan)
    # a number without its unit is refused: the profile counts bytes
    bare = runner.invoke(app, ["synth", "--pp", "2", "-m", "4", "--layers", path, "--memory-limit", "3", "-o", "-"])
    assert bare.exit_code == 2 and "E088" in bare.output and "has no unit" in bare.output


def test_a_byte_limit_without_activation_bytes_is_refused(tmp_path):
    import ppdsl

    path = _profile_file(tmp_path)  # no memory fields: a layer holds one unit
    runner = CliRunner()
    for command in ("synth", "check"):
        args = [command, *(["1f1b"] if command == "check" else []), "--pp", "2", "-m", "4", "--layers", path]
        result = runner.invoke(app, [*args, "--memory-limit", "3GiB", *(["-o", "-"] if command == "synth" else [])])
        assert result.exit_code == 2 and "E088" in result.output and "activation_bytes" in result.output, command
    with pytest.raises(DiagnosticError) as err:
        ppdsl.synthesize(pp=2, microbatches=4, layers=path, memory_limit="3GiB")
    assert err.value.diagnostics[0].code == "E088"


def test_a_profile_gives_one_unit_of_activation(tmp_path):
    from ppdsl.analysis.layers import read_profile

    mixed = _profile_file(tmp_path, activation={"T": 1.0}, activation_bytes={"E": 1, "T": 2, "L": 3})
    with pytest.raises(DiagnosticError) as err:
        read_profile(mixed)
    assert err.value.diagnostics[0].code == "E100" and "one unit" in err.value.diagnostics[0].message
    partial = _profile_file(tmp_path, activation_bytes={"E": 1, "T": 2})  # the head gives none
    with pytest.raises(DiagnosticError) as err:
        read_profile(partial)
    assert "not for layer 7" in err.value.diagnostics[0].message
    assert read_profile(_profile_file(tmp_path, activation={"T": 2.0})).memory_unit == "activations"
