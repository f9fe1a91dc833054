"""`ppdsl.analysis.checks.local_order` (S103): a backward before its forward, a weight gradient before its
input gradient, an auxiliary job on the wrong side of its anchor."""

from __future__ import annotations

from ppdsl.analysis.checks.local_order import local_order

from one_check import SEND_AFTER, codes, run, said


def test_s103_a_backward_before_its_forward_a_weight_before_its_input_an_auxiliary_job_on_the_wrong_side():
    assert said(run(local_order, "table { rank 0: B0 F0 F1 B1 optimizer }")) == [
        (
            "S103",
            "backward of micro-batch 0 runs before its forward on rank 0",
            "`B0` runs at step 0; `F0` runs at step 1",
        )
    ]
    assert said(run(local_order, "table { rank 0: F0 F1 W0 I0 I1 W1 optimizer }")) == [
        (
            "S103",
            "weight gradient of micro-batch 0 runs before its input gradient on rank 0",
            "`W0` at step 2, `I0` at step 3",
        )
    ]
    wrong_side = SEND_AFTER + "table { rank 0: F0 send_backward0 B0 F1 B1 send_backward1 optimizer }"
    assert said(run(local_order, wrong_side)) == [
        ("S103", "`send_backward0` must run after `B0` on rank 0", "`send_backward0` runs at step 1; `B0` at step 2")
    ]
    right_side = SEND_AFTER + "table { rank 0: F0 B0 send_backward0 F1 B1 send_backward1 optimizer }"
    assert run(local_order, right_side) == []


def test_the_whole_check_reports_s103():
    # through the whole check: fails if the check's module is no longer registered
    assert "S103" in codes("table { rank 0: F0 F1 W0 I0 I1 W1 optimizer }")
