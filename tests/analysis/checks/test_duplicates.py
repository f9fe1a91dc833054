"""`ppdsl.analysis.checks.duplicates` (S102): a job twice, a whole backward beside a split one."""

from __future__ import annotations

from ppdsl.analysis.checks.duplicates import duplicates

from one_check import codes, run, said


def test_s102_a_job_twice_and_a_whole_backward_beside_a_split_one():
    assert said(run(duplicates, "table { rank 0: F0 F0 F1 B0 B1 optimizer }")) == [
        ("S102", "`F0` runs twice on rank 0", "again at step 1, first at step 0")
    ]
    assert said(run(duplicates, "table { rank 0: F0 F1 B0 I0 W0 B1 optimizer }")) == [
        ("S102", "micro-batch 0 has both a whole backward and a split one on rank 0", "`B0` here")
    ]
    assert run(duplicates, "table { rank 0: F0 F1 I0 B1 W0 optimizer }") == []


def test_the_whole_check_reports_s102():
    # through the whole check: fails if the check's module is no longer registered
    assert "S102" in codes("table { rank 0: F0 F0 F1 B0 B1 optimizer }")
