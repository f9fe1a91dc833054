"""`ppdsl.analysis.scenario`: the one way in (a schedule at sizes, with parameters, costs, memory and a limit), and
`check(scenario)` on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppdsl.analysis.check import check
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MemoryModel
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.common.sizes import check_batch_size
from ppdsl.language.resolve import resolve_text

from paths import LIBRARY

GPIPE = resolve_text("order { forward * microbatches backward * microbatches optimizer }", "gpipe.sched")


def test_a_schedule_is_a_name_a_path_or_a_loaded_definition():
    by_name = Scenario("1f1b", pp=2, microbatches=4)
    by_path = Scenario(LIBRARY / "1f1b.sched", pp=2, microbatches=4)
    assert Path(by_name.path).resolve() == Path(by_path.path).resolve() == (LIBRARY / "1f1b.sched").resolve()
    assert by_name.expansion().jobs == by_path.expansion().jobs
    assert Scenario(GPIPE, pp=2, microbatches=2).definition() is GPIPE


def test_cost_pairs_become_a_cost_spec_and_reach_the_expansion():
    scenario = Scenario(GPIPE, pp=2, microbatches=2, costs={"backward": 3, "latency": 0.5})
    assert scenario.costs == CostSpec({"backward": 3, "latency": 0.5})
    exp = scenario.expansion()
    assert exp.cost[GPIPE.type_index("backward")] == [[3.0], [3.0]] and exp.latency == 0.5


def test_with_changes_fields_and_keeps_the_loaded_schedule():
    scenario = Scenario(LIBRARY / "1f1b.sched", pp=2, microbatches=4)
    defn = scenario.definition()
    other = scenario.with_(microbatches=8)
    assert other.definition() is defn and other.expansion().microbatches == 8
    assert scenario.microbatches == 4


def test_a_memory_model_value_gives_an_expansion_in_bytes_and_the_limit_in_bytes_too():
    memory = MemoryModel({s: {"forward": 100, "backward": -100} for s in range(2)})
    result = check(Scenario(GPIPE, pp=2, microbatches=2, memory=memory, memory_limit=150))
    assert result.expansion.memory_unit == "bytes" and result.expansion.memory_limit == [150, 150]
    # GPipe holds both micro-batches' 100 bytes before its first backward, on both ranks
    (over,) = result.diagnostics
    assert (over.code, over.message) == ("S106", "ranks 0-1 hold more than their limit of 150 B")
    assert over.label == "`F1` (step 1) takes rank 0 to 200 B at time 2"
    assert over.notes[-1] == "the limit is `--memory-limit`'s"


def test_memory_measured_on_the_orders_is_measured_before_the_expansion_is_built():
    seen: list[Expansion] = []

    def measure(exp: Expansion) -> MemoryModel:
        seen.append(exp)
        return MemoryModel({s: {"forward": 10 * (s + 1)} for s in range(exp.nstages)})

    exp = Scenario(GPIPE, pp=2, microbatches=2, memory=measure, memory_limit=5).expansion()
    (measured_on,) = seen
    # measured on the same orders, in activations and without the limit; built with what it returned
    assert measured_on.jobs == exp.jobs and measured_on.memory_unit == "activations"
    assert measured_on.memory_limit == [None, None]
    assert exp.mem_delta[GPIPE.type_index("forward")] == [[10.0], [20.0]] and exp.memory_limit == [5, 5]


def test_check_never_raises_for_a_bad_schedule_or_bad_sizes():
    missing = check(Scenario("no/such/file.sched", pp=2, microbatches=2))
    assert not missing.valid and missing.diagnostics and missing.diagnostics[0].code.startswith("E")
    zero = check(Scenario(GPIPE, pp=0, microbatches=2))
    assert [d.code for d in zero.diagnostics] == ["E007"] and zero.exit_code == 2
    assert check(Scenario(GPIPE, pp=2, microbatches=2)).exit_code == 0


def test_the_results_errors_are_its_diagnostics_not_a_copy():
    result = check(Scenario(GPIPE, pp=0, microbatches=2))
    assert result.errors is result.diagnostics


def test_a_batch_must_split_into_the_micro_batches():
    check_batch_size(32, 8)
    for batch, m, code in ((30, 8, "E036"), (0, 8, "E007")):
        with pytest.raises(DiagnosticError) as err:
            check_batch_size(batch, m)
        assert [d.code for d in err.value.diagnostics] == [code]


def test_checking_a_resolved_schedule_does_not_print_it(monkeypatch):
    """`check` named a resolved schedule by its str(), the repr of every compiled item (20 ms on zbvpp, on
    each of the language server's checks): it names it by its path."""
    from ppdsl.analysis.check import check
    from ppdsl.language.ir import ScheduleDef
    from ppdsl.language.library import library_dir
    from ppdsl.language.resolve import load

    defn = load(library_dir() / "1f1b.sched")

    def refuse(self):
        raise AssertionError("the schedule was printed")

    monkeypatch.setattr(ScheduleDef, "__repr__", refuse)
    result = check(Scenario(defn, 4, 8))
    assert result.valid and result.path == defn.path
