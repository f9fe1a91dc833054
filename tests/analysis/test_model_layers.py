"""Layer profiles, partitions, and what a partition makes a stage cost and hold (`ppdsl.analysis.layers`; named
apart from tests/runtime/test_layers.py, which pytest would take for the same module)."""

from __future__ import annotations

import json
import math

import pytest

from ppdsl.analysis.check import check
from ppdsl.analysis.layers import (
    MAX_LAYERS,
    Layer,
    LayerProfile,
    Partition,
    check_partition,
    even_partition,
    megatron_layout,
    min_max_partition,
    parse_partition,
    profile_from_text,
    read_profile,
    stage_work,
)
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError

from paths import ROOT

# the shared profiles sit beside the repository (`../shared`), or beside the folder of work trees
PROFILES = (
    next((p for p in (ROOT.parent / "shared", ROOT.parents[1] / "shared") if p.is_dir()), ROOT.parent / "shared")
    / "data"
    / "profiles"
)
SHARED = [PROFILES / "llama3-8B.json", PROFILES / "nemotron-h-8B.json"]


def _codes(err: pytest.ExceptionInfo) -> list[str]:
    return [d.code for d in err.value.diagnostics]


def _own(*layers: tuple[str, float, float, float]) -> str:
    rows = [{"name": n, "forward": f, "backward_b": b, "backward_w": w} for n, f, b, w in layers]
    return json.dumps({"layers": rows}, indent=1)


# ---------------------------------------------------------------- reading profiles


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.stem)
def test_the_shared_profiles_read_as_their_patterns_say(path):
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    data = json.loads(path.read_text())
    profile = read_profile(path)
    assert profile.kinds == data["pattern"]
    for layer in profile.layers:
        assert layer.forward == data["forward_ms"][layer.kind]
        assert layer.backward_b == data["backward_ms"][layer.kind]
        assert layer.backward_w == data["weight_ms"][layer.kind]
        assert layer.activation is None and layer.held == 1.0  # no memory fields: one unit a layer


def test_the_own_form_keeps_order_and_memory():
    text = json.dumps(
        {
            "unit": "us",
            "layers": [
                {"name": "E", "forward": 2, "backward_b": 1, "backward_w": 0, "activation": 3.5, "params": 10},
                {"name": "T", "forward": 1, "backward_b": 1.5, "backward_w": 0.5},
            ],
        }
    )
    profile = profile_from_text(text, "own.json")
    assert profile.unit == "us"
    assert profile.layers == (Layer("E", 2.0, 1.0, 0.0, 3.5, 10.0), Layer("T", 1.0, 1.5, 0.5))
    assert [layer.held for layer in profile.layers] == [3.5, 1.0]


def test_compact_memory_tables_give_each_letter_its_amount():
    text = json.dumps(
        {
            "pattern": "ETL",
            "forward_ms": {"E": 1, "T": 2, "L": 3},
            "backward_ms": {"E": 1, "T": 2, "L": 3},
            "weight_ms": {"E": 0, "T": 1, "L": 0},
            "activation": {"T": 4},
        }
    )
    layers = profile_from_text(text).layers
    assert [layer.held for layer in layers] == [1.0, 4.0, 1.0]


@pytest.mark.parametrize(
    "text, code, needle",
    [
        ("{not json", "E100", None),
        ('{"layers": [{"name": "T", "forward": 1}]}', "E100", "{"),
        ('{"layers": [{"forward": 1, "backward_b": 1, "backward_w": 1, "speed": 2}]}', "E100", '"speed"'),
        ('{"layers": []}', "E100", None),
        ('{"stages": 3}', "E100", None),
        ('{"layers": [{"forward": -1, "backward_b": 1, "backward_w": 1}]}', "E101", '"forward"'),
        ('{"layers": [{"forward": "fast", "backward_b": 1, "backward_w": 1}]}', "E101", '"forward"'),
        ('{"layers": [{"forward": 1, "backward_b": 1e400, "backward_w": 1}]}', "E101", '"backward_b"'),
        ('{"layers": [{"forward": NaN, "backward_b": 1, "backward_w": 1}]}', "E100", None),
        ('{"pattern": "TT", "forward_ms": {"T": 1}, "backward_ms": {"T": 1}}', "E100", None),
        ('{"pattern": "TXT", "forward_ms": {"T": 1}, "backward_ms": {"T": 1}, "weight_ms": {"T": 1}}', "E102", "X"),
        ('{"pattern": "TT", "forward_ms": {"T": -2}, "backward_ms": {"T": 1}, "weight_ms": {"T": 1}}', "E101", None),
    ],
)
def test_bad_profiles_are_located_diagnostics(text, code, needle):
    with pytest.raises(DiagnosticError) as err:
        profile_from_text(text, "bad.json")
    assert code in _codes(err)
    diag = next(d for d in err.value.diagnostics if d.code == code)
    assert diag.span is not None and diag.span.file == "bad.json"
    if needle is not None:  # the caret is on the offending text
        line = text.splitlines()[diag.span.line - 1]
        assert line[diag.span.col - 1 :].startswith(needle), (line, diag.span)


def test_json_that_does_not_parse_is_located_where_the_reader_stopped():
    with pytest.raises(DiagnosticError) as err:
        profile_from_text('{\n  "layers": [\n    {"forward": 1,, }\n  ]\n}\n', "p.json")
    (diag,) = err.value.diagnostics
    assert diag.code == "E100" and diag.span.line == 3


def test_an_unknown_letter_is_pointed_at_in_the_pattern():
    text = '{\n  "pattern": "ETTQL",\n  "forward_ms": {"E": 1, "T": 1, "L": 1},\n'
    text += '  "backward_ms": {"E": 1, "T": 1, "L": 1},\n  "weight_ms": {"E": 1, "T": 1, "L": 1}\n}\n'
    with pytest.raises(DiagnosticError) as err:
        profile_from_text(text, "p.json")
    (diag,) = err.value.diagnostics
    assert diag.code == "E102" and "layer 3 is `Q`" in diag.message
    assert (diag.span.line, diag.span.col) == (2, len('  "pattern": "ETT') + 1)


def test_a_profile_file_is_read_under_the_files_rules(tmp_path):
    with pytest.raises(DiagnosticError) as err:
        read_profile(tmp_path)  # a directory
    assert _codes(err) == ["E051"]
    with pytest.raises(DiagnosticError) as err:
        read_profile(tmp_path / "missing.json")
    assert _codes(err) == ["E100"]


# ---------------------------------------------------------------- partitions


def test_partitions_read_as_counts_or_megatron_layouts():
    assert parse_partition("9,10, 9,6").counts == (9, 10, 9, 6)
    layout = parse_partition("Et*3|(tt|)*2,t|L")
    assert layout.counts == (4, 2, 2, 1, 1)
    assert layout.kinds == ("ETTT", "TT", "TT", "T", "L")


@pytest.mark.parametrize("text", ["", "9,,10", "Et*3|x", "Et|m|L", "3;3", "t*9999999999"])
def test_bad_partitions_are_e103(text):
    with pytest.raises(DiagnosticError) as err:
        parse_partition(text)
    assert _codes(err) == ["E103"]


def test_an_even_partition_gives_the_first_stages_the_rest():
    assert even_partition(34, 4).counts == (9, 9, 8, 8)
    assert even_partition(8, 4).counts == (2, 2, 2, 2)
    assert sum(even_partition(54, 16).counts) == 54


def test_a_partition_must_fit_the_stages_and_the_profile():
    profile = LayerProfile(tuple(Layer("T", 1, 1, 1) for _ in range(6)))
    with pytest.raises(DiagnosticError) as err:
        check_partition(Partition((3, 3)), 4, profile, "")
    assert _codes(err) == ["E104"]
    with pytest.raises(DiagnosticError) as err:
        check_partition(Partition((3, 2)), 2, profile, "")
    assert _codes(err) == ["E104"] and "places 5 layers" in err.value.diagnostics[0].message
    with pytest.raises(DiagnosticError) as err:
        check_partition(Partition((6, 0)), 2, profile, "")
    assert _codes(err) == ["E105"]
    check_partition(Partition((6, 0), allow_empty=True), 2, profile, "")  # said to be meant


def test_a_megatron_layout_must_name_the_profiles_kinds():
    profile = LayerProfile((Layer("E", 1, 1, 0), Layer("T", 1, 1, 1), Layer("T", 1, 1, 1), Layer("L", 1, 1, 0)))
    check_partition(parse_partition("Et|tL"), 2, profile, "")
    with pytest.raises(DiagnosticError) as err:
        check_partition(parse_partition("tE|tL"), 2, profile, "")
    assert _codes(err) == ["E104"]


# ---------------------------------------------------------------- stage work


def test_a_stage_costs_the_sum_of_its_layers():
    layers = tuple(Layer(str(i), i + 1.0, 2.0 * i, 0.5, activation=float(i)) for i in range(6))
    work = stage_work(Partition((1, 3, 2)), 3, LayerProfile(layers))
    assert work.forward == (1.0, 2 + 3 + 4.0, 5 + 6.0)
    assert work.backward_b == (0.0, 2 + 4 + 6.0, 8 + 10.0)
    assert work.backward_w == (0.5, 1.5, 1.0)
    assert work.activation == (0.0, 1 + 2 + 3.0, 4 + 5.0)
    assert work.critical == 2 and math.isclose(work.time(1), 9 + 12 + 1.5)


def test_without_a_profile_every_layer_is_alike():
    work = stage_work(Partition((1, 3)), 2, None)
    assert work.forward == (1.0, 3.0) and work.activation == (1.0, 3.0) and not work.profiled


def test_the_checker_times_and_counts_a_partition():
    even = check(Scenario("1f1b", 4, 8))
    tripled = check(Scenario("1f1b", 4, 8, partition="3,3,3,3"))
    assert tripled.valid and tripled.makespan == pytest.approx(3 * even.makespan)
    assert tripled.peak_activations == [3 * p for p in even.peak_activations]
    uneven = check(Scenario("1f1b", 4, 8, partition="2,2,2,6"))
    assert uneven.makespan > tripled.makespan  # the heavy last stage is the critical one
    assert [s.critical for s in uneven.stages] == [False, False, False, True]
    assert [s.layers for s in uneven.stages] == [2, 2, 2, 6]
    assert uneven.to_dict()["stages"][3]["time"] == pytest.approx(6 * (1 + 2))


def test_a_profile_sets_each_stages_costs_in_the_expansion():
    layers = tuple(Layer("T", 1.0 + i, 2.0, 1.0) for i in range(8))
    profile = LayerProfile(layers)
    exp = Scenario("zbh1", 2, 4, layers=profile, partition="3,5").expansion()
    names = exp.type_names
    forward = exp.cost[names.index("forward")]
    assert forward == [[1 + 2 + 3.0], [4 + 5 + 6 + 7 + 8.0]]
    assert exp.cost[names.index("backward_b")] == [[6.0], [10.0]]
    assert exp.cost[names.index("backward_w")] == [[3.0], [5.0]]
    assert exp.mem_delta[names.index("forward")] == [[3.0], [5.0]]
    # the schedule's own fraction (backward_b frees half) holds per layer
    assert exp.mem_delta[names.index("backward_b")] == [[-1.5], [-2.5]]


def test_a_profile_without_a_partition_is_split_evenly():
    profile = LayerProfile(tuple(Layer("T", 1, 1, 1) for _ in range(10)))
    exp = Scenario("interleaved1f1b", 2, 4, vpp=2, layers=profile).expansion()
    assert exp.stage_work.partition.counts == (3, 3, 2, 2)
    f = exp.type_names.index("forward")
    assert [exp.cost[f][r][c] for r, c in exp.rank_of_stage()] == [3.0, 3.0, 2.0, 2.0]


def test_a_schedule_file_carries_its_partition(tmp_path):
    path = tmp_path / "split.sched"
    path.write_text('include "' + str(ROOT / "schedules" / "1f1b.sched") + '"\npartition = [1, 2, 3, 2]\n')
    result = check(Scenario(path, 4, 8))
    assert result.valid and [s.layers for s in result.stages] == [1, 2, 3, 2]
    given = check(Scenario(path, 4, 8, partition="2,2,2,2"))  # the command line's wins
    assert [s.layers for s in given.stages] == [2, 2, 2, 2]
    path.write_text(path.read_text().replace("[1, 2, 3, 2]", "[1, 0, 3, 2]"))
    empty = check(Scenario(path, 4, 8))
    assert [d.code for d in empty.diagnostics] == ["E105"] and empty.diagnostics[0].span.line == 2
    path.write_text(path.read_text().replace("[1, 0, 3, 2]", "[1, 0, 3, 2] allow empty"))
    assert check(Scenario(path, 4, 8)).valid


# ---------------------------------------------------------------- Megatron layouts


def test_a_layout_is_written_with_runs_and_read_back():
    profile = LayerProfile((Layer("E", 1, 1, 0), *(Layer("T", 1, 1, 1) for _ in range(8)), Layer("L", 1, 1, 0)))
    text = megatron_layout(Partition((4, 3, 3)), profile, looped=True)
    assert text == "Et*3|t*3|ttL"
    back = parse_partition(text)
    assert back.counts == (4, 3, 3) and "".join(back.kinds) == profile.kinds


def test_a_layout_is_refused_for_other_kinds_and_placements():
    hybrid = LayerProfile((Layer("E", 1, 1, 0), Layer("M", 1, 1, 1), Layer("L", 1, 1, 0)))
    with pytest.raises(DiagnosticError) as err:
        megatron_layout(Partition((2, 1)), hybrid, looped=True)
    assert _codes(err) == ["E106"] and "`M`" in err.value.diagnostics[0].message
    with pytest.raises(DiagnosticError) as err:
        megatron_layout(Partition((2, 1)), None, looped=False)
    assert _codes(err) == ["E106"]


def test_megatron_cores_parser_reads_an_exported_layout():
    layout_module = pytest.importorskip(
        "megatron.core.transformer.pipeline_parallel_layer_layout",
        reason="megatron-core is not installed (the bench extra has it: pip install -e .[test,bench]): its parser cannot be asked",
    )
    from ppdsl.reports.formats import to_megatron_layout

    for pp, vpp, partition in ((4, 1, "9,9,8,8"), (2, 2, "5,9,10,10")):
        schedule = "1f1b" if vpp == 1 else "interleaved1f1b"
        exp = Scenario(schedule, pp, 2 * pp, vpp=vpp, partition=partition).expansion()
        text = to_megatron_layout(exp)
        parsed = layout_module.PipelineParallelLayerLayout(text, pp)
        parsed.validate_layer_layout(num_layers=34 - 2, mtp_num_layers=None)
        assert parsed.virtual_pipeline_model_parallel_size == vpp
        # Megatron's layer count per (rank, chunk) is the partition's count at that rank's stage
        for r in range(pp):
            for c in range(vpp):
                assert len(parsed.layout[r][c]) == exp.stage_work.partition.counts[exp.stage_of[r][c]]


def test_partitions_are_bounded():
    with pytest.raises(DiagnosticError):
        parse_partition(",".join(["1"] * (MAX_LAYERS + 1)))


def _brute_force_bottleneck(works: list[float], stages: int) -> float:
    """The least bottleneck over every contiguous split (small cases only)."""
    import itertools

    n, best = len(works), math.inf
    for cuts in itertools.combinations(range(1, n), stages - 1):
        bounds = (0, *cuts, n)
        best = min(best, max(sum(works[a:b]) for a, b in itertools.pairwise(bounds)))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_the_min_max_split_is_the_least_bottleneck(seed):
    import random

    rng = random.Random(seed)
    n, stages = rng.randint(2, 10), 0
    stages = rng.randint(1, n)
    layers = tuple(Layer("T", rng.uniform(0, 5), rng.uniform(0, 5), rng.choice([0.0, 1.0])) for _ in range(n))
    split = min_max_partition(LayerProfile(layers), stages)
    assert len(split.counts) == stages and sum(split.counts) == n and min(split.counts) >= 1
    works = [x.forward + x.backward_b + x.backward_w for x in layers]
    work = stage_work(split, stages, LayerProfile(layers))
    bottleneck = max(work.time(s) for s in range(stages))
    assert bottleneck == pytest.approx(_brute_force_bottleneck(works, stages))


def test_the_min_max_split_unloads_a_heavy_head():
    layers = (Layer("E", 3.5, 2.1, 0), *(Layer("T", 1.7, 2.0, 1.1) for _ in range(32)), Layer("L", 10.4, 7.5, 0))
    split = min_max_partition(LayerProfile(layers), 4)
    assert split.counts[-1] < split.counts[1]  # the stage with the head holds fewer blocks
    with pytest.raises(ValueError):
        min_max_partition(LayerProfile(layers[:3]), 4)
