"""`ppdsl.analysis.checks.micro_batch_range` (S107): a job of a micro-batch the sizes do not have."""

from __future__ import annotations

from ppdsl.analysis.checks.micro_batch_range import micro_batch_range

from one_check import codes, run, said


def test_s107_a_micro_batch_the_sizes_do_not_have():
    found = run(micro_batch_range, "table { rank 0: F0 F1 F2 B0 B1 B2 optimizer }")
    assert said(found)[0] == (
        "S107",
        "micro-batch 2 does not exist on rank 0: there are 2 micro-batches (0 .. 1)",
        "step 2 runs `F2`",
    )
    assert run(micro_batch_range, "table { rank 0: F0 F1 B0 B1 optimizer }") == []


def test_the_whole_check_reports_s107():
    # through the whole check: fails if the check's module is no longer registered
    assert "S107" in codes("table { rank 0: F0 F1 F2 B0 B1 B2 optimizer }")
