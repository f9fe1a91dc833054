"""`ppdsl.analysis.checks.optimizer` (S104): the optimizer missing or not last."""

from __future__ import annotations

from ppdsl.analysis.checks.optimizer import optimizer

from one_check import codes, run, said


def test_s104_the_optimizer_missing_or_not_last():
    assert said(run(optimizer, "table { rank 0: F0 F1 B0 B1 }")) == [
        ("S104", "rank 0 never runs the optimizer", "the order ends here")
    ]
    assert said(run(optimizer, "table { rank 0: F0 F1 optimizer B0 B1 }")) == [
        ("S104", "the optimizer is not the last job on rank 0", "runs at step 2 of 5")
    ]
    assert run(optimizer, "table { rank 0: F0 F1 B0 B1 optimizer }") == []


def test_one_diagnostic_names_every_rank_a_statement_is_wrong_on():
    found = run(optimizer, "order { forward * microbatches backward * microbatches }", pp=2, m=1)
    assert said(found) == [("S104", "ranks 0-1 never run the optimizer", "the order ends here")]


def test_the_whole_check_reports_s104():
    # through the whole check: fails if the check's module is no longer registered
    assert "S104" in codes("table { rank 0: F0 F1 B0 B1 }")
