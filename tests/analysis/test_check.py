"""`ppdsl.analysis.check`: the checks of the whole execution (`@schedule_check`), each on a small literal order, one
with the mistake and one without."""

from __future__ import annotations

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.language.resolve import resolve_text


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
