"""`ppdsl.analysis.checks` (each rank's order) and the checks of the whole execution in `ppdsl.analysis.check`:
each check on a small literal order, one with the mistake and one without, and the registry they declare
themselves in."""

from __future__ import annotations

import pytest

from ppdsl.analysis import checks
from ppdsl.analysis.check import SCHEDULE_CHECKS, check_expansion
from ppdsl.analysis.checks import RANK_CHECKS, Findings, index_rank, rank_check, used_types
from ppdsl.analysis.expand import expand
from ppdsl.common.codes import REGISTRY
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.explanations import EXPLANATIONS
from ppdsl.language.resolve import resolve_text

SEND_AFTER = 'job send_backward : backward ops "pd_op.send_v2" after backward sends\n'


def run(check, source: str, pp: int = 1, m: int = 2, vpp: int = 1) -> list[Diagnostic]:
    """The diagnostics of one per-rank check alone, on every rank of `source` (a `table`)."""
    exp = expand(resolve_text(source, "t.sched"), pp, m, vpp)
    used = used_types(exp)
    aux = [t for t, jt in enumerate(exp.defn.job_types) if not jt.builtin and t in used]
    out = Findings()
    for rank in range(pp):
        check(index_rank(exp, rank, aux), out)
    return out.diagnostics(exp)


def said(diagnostics: list[Diagnostic]) -> list[tuple[str, str, str | None]]:
    return [(d.code, d.message, d.label) for d in diagnostics]


def test_s107_a_micro_batch_the_sizes_do_not_have():
    found = run(checks.micro_batch_range, "table { rank 0: F0 F1 F2 B0 B1 B2 optimizer }")
    assert said(found)[0] == (
        "S107",
        "micro-batch 2 does not exist on rank 0: there are 2 micro-batches (0 .. 1)",
        "step 2 runs `F2`",
    )
    assert run(checks.micro_batch_range, "table { rank 0: F0 F1 B0 B1 optimizer }") == []


def test_s102_a_job_twice_and_a_whole_backward_beside_a_split_one():
    assert said(run(checks.duplicates, "table { rank 0: F0 F0 F1 B0 B1 optimizer }")) == [
        ("S102", "`F0` runs twice on rank 0", "again at step 1, first at step 0")
    ]
    assert said(run(checks.duplicates, "table { rank 0: F0 F1 B0 I0 W0 B1 optimizer }")) == [
        ("S102", "micro-batch 0 has both a whole backward and a split one on rank 0", "`B0` here")
    ]
    assert run(checks.duplicates, "table { rank 0: F0 F1 I0 B1 W0 optimizer }") == []


def test_s104_the_optimizer_missing_or_not_last():
    assert said(run(checks.optimizer, "table { rank 0: F0 F1 B0 B1 }")) == [
        ("S104", "rank 0 never runs the optimizer", "the order ends here")
    ]
    assert said(run(checks.optimizer, "table { rank 0: F0 F1 optimizer B0 B1 }")) == [
        ("S104", "the optimizer is not the last job on rank 0", "runs at step 2 of 5")
    ]
    assert run(checks.optimizer, "table { rank 0: F0 F1 B0 B1 optimizer }") == []


def test_s103_a_backward_before_its_forward_a_weight_before_its_input_an_auxiliary_job_on_the_wrong_side():
    assert said(run(checks.local_order, "table { rank 0: B0 F0 F1 B1 optimizer }")) == [
        (
            "S103",
            "backward of micro-batch 0 runs before its forward on rank 0",
            "`B0` runs at step 0; `F0` runs at step 1",
        )
    ]
    assert said(run(checks.local_order, "table { rank 0: F0 F1 W0 I0 I1 W1 optimizer }")) == [
        (
            "S103",
            "weight gradient of micro-batch 0 runs before its input gradient on rank 0",
            "`W0` at step 2, `I0` at step 3",
        )
    ]
    wrong_side = SEND_AFTER + "table { rank 0: F0 send_backward0 B0 F1 B1 send_backward1 optimizer }"
    assert said(run(checks.local_order, wrong_side)) == [
        ("S103", "`send_backward0` must run after `B0` on rank 0", "`send_backward0` runs at step 1; `B0` at step 2")
    ]
    right_side = SEND_AFTER + "table { rank 0: F0 B0 send_backward0 F1 B1 send_backward1 optimizer }"
    assert run(checks.local_order, right_side) == []


def test_s101_jobs_that_never_run_at_the_statement_that_stopped_short():
    assert said(run(checks.missing_jobs, "table { rank 0: F0 F1 B0 optimizer }")) == [
        ("S101", "1 `backward` job never runs on rank 0", "the last `backward` of the rank runs here: `B1` never runs")
    ]
    assert said(run(checks.missing_jobs, "table { rank 0: F0 F1 optimizer }")) == [
        ("S101", "rank 0 never runs `backward`", "the order ends here: `B0`, `B1` never run")
    ]
    assert run(checks.missing_jobs, "table { rank 0: F0 F1 I0 I1 W0 W1 optimizer }") == []


def test_one_diagnostic_names_every_rank_a_statement_is_wrong_on():
    found = run(checks.optimizer, "order { forward * microbatches backward * microbatches }", pp=2, m=1)
    assert said(found) == [("S104", "ranks 0-1 never run the optimizer", "the order ends here")]


def test_s105_ranks_waiting_for_each_other():
    # rank 1 waits for rank 0's F1, which rank 0 runs after its B0, which waits for rank 1's B0
    exp = expand(resolve_text("table { rank 0: F0 B0 F1 B1 optimizer\n rank 1: F1 F0 B0 B1 optimizer }"), 2, 2)
    (found,) = check_expansion(exp).diagnostics
    assert (found.code, found.message) == ("S105", "deadlock: ranks 0 -> 1 -> 0 wait for each other")
    ok = expand(resolve_text("table { rank 0: F0 F1 B0 B1 optimizer\n rank 1: F0 B0 F1 B1 optimizer }"), 2, 2)
    assert check_expansion(ok).valid


def test_s103_a_rank_waiting_for_its_own_later_job():
    # one rank holds both stages: chunk 1's forward needs chunk 0's, which it runs later
    exp = expand(resolve_text("table { rank 0: F0.c1 F0.c0 B0.c1 B0.c0 optimizer }"), 1, 1, 2)
    (found,) = check_expansion(exp).diagnostics
    assert (found.code, found.message) == ("S103", "rank 0 waits for itself: `F0.c1` needs `F0.c0`, which runs later")


def test_s106_a_rank_over_its_memory_limit():
    exp = expand(resolve_text("memory limit = 1\ntable { rank 0: F0 F1 B0 B1 optimizer }", "t.sched"), 1, 2)
    (found,) = check_expansion(exp).diagnostics
    assert (found.code, found.message, found.label) == (
        "S106",
        "rank 0 holds more than its limit of 1 activation",
        "`F1` (step 1) takes rank 0 to 2 activations at time 2",
    )
    assert check_expansion(
        expand(resolve_text("memory limit = 1\ntable { rank 0: F0 B0 F1 B1 optimizer }"), 1, 2)
    ).valid


def test_every_check_declares_codes_the_registry_explains():
    declared = [c.code for c in RANK_CHECKS] + [code for c in SCHEDULE_CHECKS for code in c.codes]
    assert {"S101", "S102", "S103", "S104", "S105", "S106", "S107", *(f"S11{i}" for i in range(5, 10))} == set(declared)
    for code in declared:
        assert code in REGISTRY and code in EXPLANATIONS, code
    renderers = [r for c in RANK_CHECKS for r in c.renders]
    assert len(renderers) == len(set(renderers)) == 13  # each kind of finding belongs to one check


def test_a_renderer_belongs_to_one_check():
    taken = RANK_CHECKS[0].renders[0]
    with pytest.raises(ValueError, match="renders the findings of two checks"):
        rank_check("S999", taken)(lambda view, out: None)
    assert all(c.code != "S999" for c in RANK_CHECKS)
