"""`ppdsl.analysis.checks.missing_jobs` (S101): jobs a rank owns and never runs."""

from __future__ import annotations

from ppdsl.analysis.checks.missing_jobs import missing_jobs

from one_check import codes, run, said


def test_s101_jobs_that_never_run_at_the_statement_that_stopped_short():
    assert said(run(missing_jobs, "table { rank 0: F0 F1 B0 optimizer }")) == [
        ("S101", "1 `backward` job never runs on rank 0", "the last `backward` of the rank runs here: `B1` never runs")
    ]
    assert said(run(missing_jobs, "table { rank 0: F0 F1 optimizer }")) == [
        ("S101", "rank 0 never runs `backward`", "the order ends here: `B0`, `B1` never run")
    ]
    assert run(missing_jobs, "table { rank 0: F0 F1 I0 I1 W0 W1 optimizer }") == []


def test_the_whole_check_reports_s101():
    # through the whole check: fails if the check's module is no longer registered
    assert "S101" in codes("table { rank 0: F0 F1 B0 optimizer }")
