"""Memory actions in the language: `recompute` (R), `offload` (O), `reload` (L) are built-in job types that a
schedule holds only when it names them, so every other schedule's job types and codes stay as they were."""

from __future__ import annotations

import pytest

from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.resolve import resolve_text
from ppdsl.plan.kinds import ALWAYS, RECOMPUTE_STAGE_INPUT, action_names
from ppdsl.synth.problem import build_problem

PLAIN = "order { forward * microbatches  backward * microbatches  optimizer }"
RECOMPUTE = "order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }"


def _codes(text: str) -> list[str]:
    with pytest.raises(DiagnosticError) as err:
        resolve_text(text, "t.sched")
    return [d.code for d in err.value.diagnostics]


def test_a_schedule_without_memory_actions_keeps_its_five_built_in_types_and_its_own_after_them():
    defn = resolve_text("job recv_forward : forward before forward receives\n" + PLAIN)
    assert [jt.name for jt in defn.job_types] == [*(jt.name for jt in ALWAYS), "recv_forward"]


@pytest.mark.parametrize(
    "text",
    [
        RECOMPUTE,
        "order { forward * microbatches  R * microbatches  backward * microbatches  optimizer }",
        "table { rank 0: F0 O0 L0 B0 optimizer }",
        "cost offload = 0.2\n" + PLAIN,
        "comm offload bandwidth = 4\n" + PLAIN,
        "memory host limit = 3\n" + PLAIN,
    ],
)
def test_naming_any_memory_action_adds_all_three_right_after_the_built_in_five(text):
    names = [jt.name for jt in resolve_text(text).job_types]
    assert names[: len(ALWAYS) + 3] == [*(jt.name for jt in ALWAYS), *action_names()]


def test_the_letters_and_counters_are_those_of_every_job_type():
    exp = expand(
        resolve_text("order { forward * 2  recompute(mb = 1)  recompute  L * 0  backward * 2  optimizer }"), 1, 2
    )
    assert " ".join(map(exp.label, exp.jobs[0])) == "F0 F1 R1 R0 B0 B1 optimizer"


def test_a_fraction_is_a_property_of_the_job_type_and_a_reload_shares_its_offloads():
    defn = resolve_text("memory recompute fraction = 0.25\nmemory offload fraction = 0.5\n" + RECOMPUTE)
    fraction = {jt.name: jt.fraction for jt in defn.job_types}
    assert (fraction["recompute"], fraction["offload"], fraction["reload"], fraction["forward"]) == (
        0.25,
        0.5,
        0.5,
        None,
    )
    plan_row = next(jt.to_dict() for jt in defn.job_types if jt.name == "reload")
    assert plan_row["fraction"] == 0.5
    assert "fraction" not in defn.job_types[0].to_dict()  # other types' plan rows are as they were


def test_memory_declarations_set_what_a_recompute_keeps_and_an_offload_moves():
    exp = expand(
        resolve_text("memory forward allocates 2\nmemory recompute keeps 0.5\nmemory offload moves 1.5\n" + RECOMPUTE),
        1,
        1,
    )
    names = exp.type_names
    delta = {name: exp.mem_delta[names.index(name)][0][0] for name in ("forward", "recompute", "offload", "reload")}
    assert delta == {"forward": 2.0, "recompute": 1.5, "offload": -1.5, "reload": 1.5}


def test_without_declarations_a_fraction_sets_the_amounts():
    """A recompute's fraction is of what its forward does not keep as the stage input (what the runtime's fraction
    picks among); an offload's of the whole forward."""
    exp = expand(resolve_text("memory recompute fraction = 0.25\nmemory offload fraction = 0.5\n" + RECOMPUTE), 1, 1)
    names = exp.type_names
    rebuilt = 0.25 * (1 - RECOMPUTE_STAGE_INPUT)
    got = [exp.mem_delta[names.index(n)][0][0] for n in ("recompute", "offload", "reload")]
    assert got == pytest.approx([rebuilt, -0.5, 0.5])


def test_a_recompute_without_a_fraction_keeps_its_stage_input_as_synth_counts_it():
    """One default: `check` read a recompute without a fraction as keeping nothing of its forward, synth's
    `--recompute-fraction 0.9` as keeping a tenth; both now keep the stage input, with the same tables."""
    exp = expand(resolve_text(RECOMPUTE), 1, 1)
    names = exp.type_names
    forward, recompute = (exp.mem_delta[names.index(n)][0][0] for n in ("forward", "recompute"))
    assert forward - recompute == pytest.approx(RECOMPUTE_STAGE_INPUT)
    problem = build_problem(1, 1, memory_actions=True)
    probe = problem.expansion
    assert probe.mem_delta[probe.type_names.index("recompute")][0][0] == pytest.approx(recompute)
    assert probe.cost[probe.type_names.index("recompute")] == exp.cost[names.index("recompute")]


@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_a_partial_recompute_costs_its_fraction_of_the_forward_in_check_and_in_synth(fraction):
    text = f"cost forward = 3\nmemory recompute fraction = {fraction}\n" + RECOMPUTE
    exp = expand(resolve_text(text), 1, 1)
    assert exp.cost[exp.type_names.index("recompute")][0][0] == pytest.approx(3 * fraction)
    probe = build_problem(1, 1, costs={"forward": 3}, memory_actions=True, recompute_fraction=fraction).expansion
    assert probe.cost[probe.type_names.index("recompute")][0][0] == pytest.approx(3 * fraction)


def test_a_recompute_costs_its_forward_unless_declared_and_a_host_link_times_the_copies():
    text = "cost forward = 3\ncomm offload bandwidth = 4\ncomm offload latency = 0.5\nmemory forward allocates 2\n"
    exp = expand(resolve_text(text + RECOMPUTE), 1, 1)
    names = exp.type_names
    assert exp.cost[names.index("recompute")][0][0] == 3.0
    assert exp.cost[names.index("offload")][0][0] == exp.cost[names.index("reload")][0][0] == 0.5 + 2 / 4
    assert not exp.copy_duplex
    assert expand(resolve_text("comm offload duplex = true\n" + RECOMPUTE), 1, 1).copy_duplex


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("memory recompute allocates 1\n" + RECOMPUTE, "E080"),
        ("memory forward keeps 1\n" + RECOMPUTE, "E080"),
        ("memory reload moves 1\n" + RECOMPUTE, "E080"),
        ("memory reload fraction = 0.5\n" + RECOMPUTE, "E081"),
        ("memory host fraction = 0.5\n" + PLAIN, "E081"),
        ("memory recompute fraction = 0\n" + RECOMPUTE, "E082"),
        ("memory recompute fraction = pp\n" + RECOMPUTE, "E082"),
        ("job recompute : forward\n" + PLAIN, "E003"),
        ("comm offload speed = 1\n" + PLAIN, "E002"),
    ],
)
def test_wrong_memory_declarations_are_located_errors(text, code):
    assert _codes(text) == [code]


def test_memory_setting_words_stay_free_as_names():
    defn = resolve_text(
        "param fraction = 1\nparam limit = 1\nparam keeps = 0\norder { forward(mb = fraction + keeps - limit) }"
    )
    assert set(defn.params) == {"fraction", "limit", "keeps"}


@pytest.mark.parametrize("decl", ["memory recompute keeps 2", "memory offload moves 1.5"])
def test_an_action_cannot_keep_or_move_more_than_the_forward_allocates(decl):
    with pytest.raises(DiagnosticError) as err:
        expand(resolve_text(decl + "\n" + RECOMPUTE, "t.sched"), 1, 1)
    (found,) = err.value.diagnostics
    assert found.code == "E075" and "outside 0 .. the forward's 1" in found.message


OFFLOAD = "order { forward * microbatches  offload * microbatches  reload * microbatches  backward * microbatches  optimizer }"


@pytest.mark.parametrize(
    ("decl", "order", "number", "what"),
    [
        ("memory forward allocates -3", PLAIN, "-3", "the memory of `forward` is negative (-3)"),
        ("memory backward_b frees 0 - 0.5", PLAIN, "0 - 0.5", "the memory of `backward_b` is negative (-0.5)"),
        ("memory recompute keeps -0.1", RECOMPUTE, "-0.1", "the memory of `recompute` is negative (-0.1)"),
        ("memory offload moves -1", OFFLOAD, "-1", "the memory of `offload` is negative (-1)"),
        ("memory limit = 0 - 1", PLAIN, "0 - 1", "the memory limit of rank 0 is negative (-1)"),
        ("memory host limit = -2", OFFLOAD, "-2", "the host memory limit is negative (-2)"),
    ],
)
def test_every_declared_amount_of_memory_is_refused_when_negative_at_the_number(decl, order, number, what):
    """The verb gives memory its direction; the number after it is an amount. A negative one made a forward free
    memory, so `check --memory-limit 2` proved an order holding 8 activations within the limit."""
    defn = resolve_text(decl + "\n" + order, "t.sched")
    with pytest.raises(DiagnosticError) as err:
        expand(defn, 1, 2)
    (found,) = err.value.diagnostics
    assert found.code == "E075" and what in found.message, found.message
    assert found.span is not None and found.span.line == 1 and decl[found.span.col - 1 :] == number


def test_a_zero_amount_is_an_amount():
    expand(resolve_text("memory forward allocates 0\nmemory limit = 0\n" + PLAIN, "t.sched"), 1, 2)
