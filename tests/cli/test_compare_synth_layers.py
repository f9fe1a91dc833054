"""`ppdsl compare --synth --layers FILE`: the library's schedules each under its better split of the layers (even
or DP), beside synth with the partition chosen with the order, at the same memory limit."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ppdsl.analysis.check import check
from ppdsl.analysis.layers import min_max_partition, read_profile
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import app

# an embedding, six blocks and a head six times a block's forward, as Llama's
PROFILE = {
    "pattern": "ETTTTTTL",
    "forward_ms": {"E": 2.0, "T": 1.0, "L": 6.0},
    "backward_ms": {"E": 1.0, "T": 1.0, "L": 4.0},
    "weight_ms": {"E": 0.0, "T": 1.0, "L": 0.0},
}


def _compare(tmp_path, *extra: str) -> dict:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(PROFILE))
    args = ["compare", "1f1b", "--synth", "--pp", "2", "-m", "4", "--layers", str(path), "--time-limit", "2"]
    result = CliRunner().invoke(app, [*args, *extra, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_synth_rows_choose_a_partition_and_beat_1f1b_under_its_best_split(tmp_path):
    data = _compare(tmp_path, "--memory-limit", "12")
    rows = {r["schedule"]: r for r in data["rows"]}
    synth = [r for r in data["rows"] if r["schedule"].startswith("synth")]
    assert synth and all(r["status"] == "ok" and sum(map(int, r["partition"].split(","))) == 8 for r in synth)
    one_f_one_b = rows["1F1B"]
    # 1F1B is at its better split: the DP's here, checked as `check --layers --partition` checks it
    profile = read_profile(tmp_path / "model.json")
    dp = min_max_partition(profile, 2)
    anchor = check(Scenario("1f1b", 2, 4, layers=profile, partition=dp))
    assert one_f_one_b["makespan"] <= anchor.makespan + 1e-9
    # synth with one chunk a rank, the partition free, within the limit: no slower than 1F1B under its split
    looped = rows["synth (looped)"]
    assert looped["vpp"] == 1 and looped["peak_activations"] <= 12 + 1e-9 and not looped["over_limit"]
    assert looped["makespan"] <= one_f_one_b["makespan"] + 1e-9
    # each synth row is what `check --layers --partition` measures of its schedule's partition: stages cost layers
    assert looped["peak_activations"] >= max(map(int, looped["partition"].split(",")))


def test_a_fixed_partition_is_kept_by_the_synth_rows(tmp_path):
    data = _compare(tmp_path, "--partition", "3,5", "--vpp", "1")
    synth = [r for r in data["rows"] if r["schedule"].startswith("synth")]
    assert synth and all(r["partition"] == "3,5" for r in synth)
    assert {r["partition"] for r in data["rows"] if r["status"] == "ok"} == {"3,5"}
