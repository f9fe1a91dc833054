"""`ppdsl.analysis.costs` as tables: `--cost` pairs and cost files applied over the schedule's own costs, as new
tables (what a cost file may hold is tested in test_costs.py)."""

from __future__ import annotations

import json

import pytest

import ppdsl
from ppdsl.analysis.costs import CostSpec, CostTable, apply_costs, load_costs, parse_cost_pairs
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.units import US_PER_COST_UNIT
from ppdsl.language.resolve import resolve_text

from paths import LIBRARY

NAMES = ["forward", "backward"]
STAGES = [[0, 2], [1, 3]]  # pp=2, vpp=2, looped


def codes(fn) -> list[str]:
    with pytest.raises(DiagnosticError) as err:
        fn()
    return [d.code for d in err.value.diagnostics]


def base() -> CostTable:
    return CostTable([[[1.0, 1.0], [1.0, 1.0]], [[2.0, 2.0], [2.0, 2.0]]], 0.0, None)


def test_cost_pairs_are_read_from_the_command_line():
    assert parse_cost_pairs("forward=1, backward=2.5,latency=0.1") == {"forward": 1.0, "backward": 2.5, "latency": 0.1}
    assert parse_cost_pairs(None) is None and parse_cost_pairs("") is None
    assert codes(lambda: parse_cost_pairs("forward")) == ["E007"]
    assert codes(lambda: parse_cost_pairs("forward=fast")) == ["E007"]


def test_a_cost_file_goes_per_type_then_per_stage_then_links_into_a_new_table():
    before = base()
    table = apply_costs(
        before, {"costs": {"forward": 3}, "stages": {"3": {"forward": 7, "backward": 4}}}, NAMES, STAGES
    )
    assert table.jobs == [[[3.0, 3.0], [3.0, 7.0]], [[2.0, 2.0], [2.0, 4.0]]]  # stage 3 is rank 1, chunk 1
    assert before == base()  # the table it started from is not changed
    links = apply_costs(before, {"latency": 0.25, "bandwidth": 4}, NAMES, STAGES)
    assert (links.latency, links.bandwidth, links.jobs) == (0.25, 4.0, before.jobs)
    assert apply_costs(links, {"bandwidth": 0}, NAMES, STAGES).bandwidth is None  # 0: unlimited


def test_the_command_lines_pairs_go_over_the_file():
    spec = CostSpec({"forward": 5, "latency": 1}, {"costs": {"forward": 3, "backward": 4}, "latency": 0.5})
    table = spec.apply(base(), NAMES, STAGES)
    assert table.jobs == [[[5.0, 5.0], [5.0, 5.0]], [[4.0, 4.0], [4.0, 4.0]]] and table.latency == 1.0


def test_a_pair_naming_no_job_type_is_an_error_naming_the_known_ones():
    spec = CostSpec({"fwd": 1, "latency": 2})
    with pytest.raises(DiagnosticError) as err:
        spec.check_names(resolve_text("order { forward * microbatches backward * microbatches optimizer }"))
    (diag,) = err.value.diagnostics
    assert (diag.code, diag.message) == ("E007", "`--cost` names no job type `fwd`")
    assert "`forward`" in diag.help and "`latency`" in diag.help


def test_a_cost_file_sets_the_time_unit():
    assert CostSpec({"forward": 1}).us_per_unit == US_PER_COST_UNIT and not CostSpec().measured
    assert CostSpec(file={"unit": "ms"}).us_per_unit == 1000 and CostSpec(file={}).us_per_unit == 1_000_000
    assert codes(lambda: CostSpec(file={"unit": "minutes"}).us_per_unit) == ["E008"]


def test_a_cost_file_that_is_not_an_object_or_not_json_is_a_diagnostic(tmp_path):
    path = tmp_path / "costs.json"
    path.write_text("[1, 2]", encoding="utf-8")
    assert codes(lambda: load_costs(path)) == ["E008"]
    assert codes(lambda: load_costs(tmp_path / "missing.json")) == ["E008"]
    path.write_text("[1, 2", encoding="utf-8")
    assert codes(lambda: ppdsl.expand(LIBRARY / "1f1b.sched", pp=2, microbatches=2, costs=path)) == ["E008"]


def test_cost_file_overrides_the_schedule_and_sets_links(tmp_path):
    """A cost file (what `ppdsl calibrate` writes): per-type costs, a per-stage override, latency."""
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"costs": {"forward": 1, "backward": 1}, "latency": 0.5}), encoding="utf-8")
    result = ppdsl.check(LIBRARY / "fthenb.sched", pp=4, microbatches=8, costs=path)
    # FThenB: m (F + B) + (p - 1)(F + B + 2 L), with F = B = 1, L = 0.5
    assert result.makespan == 8 * 2 + 3 * (2 + 1)
    # one slow stage: the last one's forward takes 2, so the forwards leave it every 2 units
    path.write_text(json.dumps({"costs": {"forward": 1, "backward": 1}, "stages": {"3": {"forward": 2}}}), "utf-8")
    result = ppdsl.check(LIBRARY / "fthenb.sched", pp=4, microbatches=8, costs=path)
    # micro-batch 0 reaches stage 3 at 3, its 8 forwards end at 3 + 16, then 8 backwards and 3 more stages
    assert result.makespan == 3 + 8 * 2 + 8 * 1 + 3 * 1
    assert [r.busy for r in result.ranks] == [16, 16, 16, 24]
