"""`ppdsl.analysis.checks.registry`: the checks declare themselves with their codes and renderers, and run (and are
listed) in the order the package imports them."""

from __future__ import annotations

import pytest

from ppdsl.analysis.check import SCHEDULE_CHECKS
from ppdsl.analysis.checks import RANK_CHECKS, rank_check
from ppdsl.common.codes import REGISTRY
from ppdsl.common.explanations import EXPLANATIONS

from one_check import codes


def test_every_check_declares_codes_the_registry_explains():
    declared = [c.code for c in RANK_CHECKS] + [code for c in SCHEDULE_CHECKS for code in c.codes]
    collectives = {"E074", "E092", "E093", "E094"}  # where each rank joins its collectives, and their deadlock
    assert {
        "S101",
        "S102",
        "S103",
        "S104",
        "S105",
        "S106",
        "S107",
        *(f"S11{i}" for i in range(5, 10)),
    } | collectives == set(declared)
    for code in declared:
        assert code in REGISTRY and code in EXPLANATIONS, code
    renderers = [r for c in RANK_CHECKS for r in c.renders]
    assert len(renderers) == len(set(renderers)) == 16  # each kind of finding belongs to one check


def test_a_renderer_belongs_to_one_check():
    taken = RANK_CHECKS[0].renders[0]
    with pytest.raises(ValueError, match="renders the findings of two checks"):
        rank_check("S999", taken)(lambda view, out: None)
    assert all(c.code != "S999" for c in RANK_CHECKS)


def test_the_checks_run_and_are_listed_in_the_order_of_their_codes_in_the_package():
    assert [c.code for c in RANK_CHECKS] == [
        "S107",
        "S102",
        "S104",
        "S103",
        "S101",
        "S115",
        "S116",
        "S117",
        "S118",
        "E092",
        "E093",
        "E094",
    ]
    # a backward before its forward (S103) and a missing optimizer (S104): S104's check is registered first
    assert codes("table { rank 0: B0 F0 F1 B1 }") == ["S104", "S103"]
