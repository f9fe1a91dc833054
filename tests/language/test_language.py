"""Language features, each on a small schedule written for the test, checked against hand-derived results."""

from __future__ import annotations

import pytest

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.resolve import load, resolve_text

GPIPE = "order { forward * microbatches backward * microbatches optimizer }"
CHUNKED = (
    "order { for chunk in 0 .. vpp { forward * microbatches }"
    " for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches } optimizer }"
)


def labels(exp, rank=0):
    return [exp.label(c) for c in exp.jobs[rank]]


def codes(err: pytest.ExceptionInfo) -> list[str]:
    return [d.code for d in err.value.diagnostics]


def test_counters_give_each_job_type_the_next_micro_batch():
    exp = expand(resolve_text("order { forward forward backward forward backward backward optimizer }"), 1, 3)
    assert labels(exp) == ["F0", "F1", "B0", "F2", "B1", "B2", "optimizer"]


def test_backward_and_backward_b_share_a_counter_and_explicit_ids_do_not_advance_it():
    src = "order { forward * 3  backward_b  backward  backward_w(mb = 0)  backward_b  backward_w * 2 optimizer }"
    exp = expand(resolve_text(src), 1, 3)
    assert labels(exp) == ["F0", "F1", "F2", "I0", "B1", "W0", "I2", "W0", "W1", "optimizer"]


def test_loops_lets_conditionals_and_arithmetic():
    src = """
    order {
        let n = max(1, microbatches // 2) % 5
        for i in 0 .. n { if i % 2 == 0 { forward } else { forward(mb = microbatches - 1) } }
        let x = if rank == 0 then 1 else 0
        repeat x { backward }
        let x = x + 1
        repeat x { optimizer }
    }
    """
    exp = expand(resolve_text(src), 2, 6)
    # n = 3: F0 (counter), F5 (explicit), F1 (counter)
    assert labels(exp, 0) == ["F0", "F5", "F1", "B0", "optimizer", "optimizer"]
    assert labels(exp, 1) == ["F0", "F5", "F1", "optimizer"]


def test_chunk_variable_is_the_default_chunk():
    src = CHUNKED
    exp = expand(resolve_text(src), 2, 1, vpp=2)
    assert labels(exp) == ["F0.c0", "F0.c1", "B0.c1", "B0.c0", "optimizer"]
    assert check_expansion(exp).valid


def test_params_have_defaults_and_command_line_values():
    src = 'param extra = 1\nrequire extra >= 0 : "extra must not be negative"\norder { forward * (microbatches - extra) forward * extra backward * microbatches optimizer }'
    defn = resolve_text(src)
    assert expand(defn, 1, 4).params == {"extra": 1}
    assert expand(defn, 1, 4, params={"extra": 3}).params == {"extra": 3}
    with pytest.raises(DiagnosticError) as err:
        expand(defn, 1, 4, params={"extra": -1})
    assert codes(err) == ["S100"]
    with pytest.raises(DiagnosticError) as err:
        expand(defn, 1, 4, params={"nope": 1})
    assert codes(err) == ["E007"]


@pytest.mark.parametrize(
    ("placement", "stage_of"),
    [
        ("placement looped", [[0, 3], [1, 4], [2, 5]]),
        ("placement vshape", [[0, 5], [1, 4], [2, 3]]),
        ("placement stage = rank * vpp + chunk", [[0, 1], [2, 3], [4, 5]]),
    ],
)
def test_placements(placement, stage_of):
    src = (
        placement
        + "\norder { for chunk in 0 .. vpp { forward * microbatches } for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches } optimizer }"
    )
    exp = expand(resolve_text(src), 3, 2, vpp=2)
    assert exp.stage_of == stage_of
    assert check_expansion(exp).valid


def test_placement_must_be_one_to_one():
    with pytest.raises(DiagnosticError) as err:
        expand(resolve_text("placement stage = rank\n" + GPIPE), 2, 2, vpp=2)
    assert codes(err) == ["S109"]


def test_costs_per_rank_and_chunk_and_latency_change_the_timing():
    base = expand(resolve_text(GPIPE), 2, 2)
    assert check_expansion(base).execution.makespan == 9  # (m + p - 1)(F + B) with F=1, B=2
    slow = expand(resolve_text("cost forward = if rank == 1 then 3 else 1\n" + GPIPE), 2, 2)
    # rank 1: F0 [1, 4], F1 [4, 7], B0 [7, 9], B1 [9, 11]; rank 0: B0 [9, 11], B1 [11, 13]
    assert check_expansion(slow).execution.makespan == 13
    lat = expand(resolve_text("comm latency = 0.5\n" + GPIPE), 2, 2)
    # two link crossings on the critical path (F1 forward, B1 backward) add 2 * 0.5
    assert check_expansion(lat).execution.makespan == 10


def test_split_backward_memory_accounting():
    """Zero-bubble accounting: F allocates 1, backward_b frees its declared part, backward_w the rest."""
    src = "memory backward_b frees 0.25\norder { forward * 2 backward_b * 2 backward_w * 2 optimizer }"
    stats = check_expansion(expand(resolve_text(src), 1, 2)).execution.ranks[0]
    assert stats.peak_activations == 2
    exp = expand(resolve_text(src), 1, 2)
    f, b, w = (exp.mem_delta[t][0][0] for t in (0, 2, 3))
    assert (f, b, w) == (1.0, -0.25, -0.75)


def test_memory_limit_per_rank():
    src = "memory limit = pp - rank\norder { forward * microbatches backward * microbatches optimizer }"
    result = check_expansion(expand(resolve_text(src), 2, 2))
    # both ranks hold 2 activations; rank 1's limit is 1
    assert [d.code for d in result.errors] == ["S106"]
    assert "rank 1" in result.errors[0].message


def test_include_brings_definitions_and_the_includer_overrides(tmp_path):
    (tmp_path / "common.sched").write_text(
        'param warmup = 2\ncost forward = 5\njob recv_forward : forward ops "pd_op.recv_v2" before forward receives\n'
    )
    (tmp_path / "main.sched").write_text(
        'include "common.sched"\ncost forward = 1\n'
        "order { repeat microbatches { recv_forward forward } backward * microbatches optimizer }"
    )
    exp = expand(load(tmp_path / "main.sched"), 2, 2)
    assert exp.params == {"warmup": 2}
    assert exp.cost[0][0][0] == 1.0
    assert labels(exp)[:2] == ["recv_forward0", "F0"]
    assert check_expansion(exp).valid


def test_include_cycle_is_reported(tmp_path):
    (tmp_path / "a.sched").write_text('include "b.sched"\n' + GPIPE)
    (tmp_path / "b.sched").write_text('include "a.sched"\n')
    with pytest.raises(DiagnosticError) as err:
        load(tmp_path / "a.sched")
    assert codes(err) == ["E005"]


def test_auxiliary_jobs_keep_their_side_of_the_anchor():
    src = (
        'job send_backward : backward ops "pd_op.send_v2" after backward sends\n'
        "order { forward * microbatches repeat microbatches { send_backward backward } optimizer }"
    )
    result = check_expansion(expand(resolve_text(src), 1, 2))
    assert {d.code for d in result.errors} == {"S103"}


def test_tables_are_chosen_by_size():
    src = """
    table when pp == 1 { rank 0: F0 B0 optimizer }
    table { rank 0: F0 F1 B0 B1 optimizer
            rank 1: F0 B0 F1 B1 optimizer }
    """
    defn = resolve_text(src)
    assert labels(expand(defn, 1, 1)) == ["F0", "B0", "optimizer"]
    assert check_expansion(expand(defn, 2, 2)).valid


def test_stream_rules_with_priority_expressions():
    src = (
        'rule "pd_op.send_v2" in backward { stream = "send_stream_{ring_id}" priority = pp - 1 attr use_calc_stream = true }\n'
        + GPIPE
    )
    exp = expand(resolve_text(src), 3, 3)
    (rule,) = exp.rules
    assert (rule.pattern, rule.job, rule.stream, rule.priority) == (
        "pd_op.send_v2",
        "backward",
        "send_stream_{ring_id}",
        2,
    )
    assert rule.attrs == (("use_calc_stream", True),)


def test_docstring_and_name():
    defn = resolve_text('"""My schedule.\n\nMore text."""\nschedule "Mine"\n' + GPIPE)
    assert (defn.name, defn.summary) == ("Mine", "My schedule.")
    wrapped = resolve_text('"""A summary wrapped\nover two lines.\n\nMore text."""\n' + GPIPE)
    assert wrapped.summary == "A summary wrapped over two lines."


def test_every_library_summary_is_whole_sentences():
    """`ppdsl list` and the plan modules quote the summary: it once stopped at the docstring's first line."""
    from ppdsl.language.library import library_files

    for path in library_files():
        summary = load(path).summary
        assert summary.endswith((".", ")")), f"{path.name}: {summary!r}"


@pytest.mark.parametrize(
    ("src", "code"),
    [
        ("order { let pp = 3 " + GPIPE[8:], "E003"),
        ("param rank = 1\n" + GPIPE, "E003"),
        ("job forward : forward\n" + GPIPE, "E003"),
        ("job recv2 : forward\n" + GPIPE, "E003"),
        ("job r : forward receives\n" + GPIPE, "E004"),
        ("order { forward(stage = 1) }", "E004"),
        ("order { forward * foo(1) }", "E002"),
        ("order { forward * min(1) }", "E004"),
        ("comm speed = 1\n" + GPIPE, "E002"),
        ("cost fwd = 1\n" + GPIPE, "E002"),
        ("", "E006"),
        (GPIPE + "\ntable { rank 0: F0 B0 optimizer }", "E003"),
    ],
)
def test_semantic_errors(src, code):
    with pytest.raises(DiagnosticError) as err:
        resolve_text(src)
    assert code in codes(err)
