"""The shipped library: every schedule checks valid at the sizes it accepts, and its expansion is golden."""

from __future__ import annotations

import pytest

import ppdsl
from ppdsl.analysis.expand import expand
from ppdsl.language.library import library_files
from ppdsl.language.resolve import load

from paths import GOLDEN

EXPECTED = {
    "1f1b",
    "dualpipev",
    "eager1f1b",
    "fthenb",
    "interleaved1f1b",
    "vpp",
    "zbh1",
    "zbv",
    "zbvpp",
}
# (pp, microbatches, vpp) per schedule: a small and a larger size, vpp = 2 where the schedule takes chunks.
SIZES = {
    "1f1b": [(4, 8, 1), (3, 5, 1)],
    "dualpipev": [(4, 8, 2), (2, 6, 2)],
    "eager1f1b": [(4, 8, 1), (2, 5, 1)],
    "fthenb": [(4, 8, 1), (2, 3, 2)],
    "interleaved1f1b": [(4, 8, 2), (2, 6, 3)],
    "vpp": [(4, 8, 2), (2, 5, 2)],
    "zbh1": [(4, 8, 1), (3, 6, 1)],
    "zbv": [(4, 8, 2), (2, 5, 2)],
    "zbvpp": [(4, 4, 2), (3, 3, 3)],
}


def test_the_library_has_every_schedule_the_field_uses():
    assert {p.stem for p in library_files()} == EXPECTED


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_library_schedule_is_documented_and_constrained(stem):
    defn = load(next(p for p in library_files() if p.stem == stem))
    assert defn.summary, f"{stem}.sched needs a docstring with a one-line summary"
    assert defn.name != stem or stem == "fthenb", "a library schedule names itself with `schedule`"


@pytest.mark.parametrize(("stem", "size"), [(s, z) for s in sorted(SIZES) for z in SIZES[s]])
def test_library_schedule_is_valid_and_golden(stem, size, golden):
    pp, m, vpp = size
    path = next(p for p in library_files() if p.stem == stem)
    result = ppdsl.check(path, pp=pp, microbatches=m, vpp=vpp)
    assert result.valid, [d.message for d in result.diagnostics]
    exp = result.expansion
    text = "\n".join(f"rank {r}: " + " ".join(map(exp.label, jobs)) for r, jobs in enumerate(exp.jobs)) + "\n"
    golden(GOLDEN / "expand" / f"{stem}-pp{pp}-m{m}-v{vpp}.txt", text)


def _sweep(stem: str):
    """(pp, m, vpp, CheckResult) for every size in a small sweep that the schedule's `require`s accept."""
    from ppdsl.analysis.check import check_expansion
    from ppdsl.common.diagnostics import DiagnosticError

    defn = load(next(p for p in library_files() if p.stem == stem))
    for pp in range(1, 7):
        for vpp in (1, 2, 3):
            for m in range(1, 3 * pp + 2):
                try:
                    exp = expand(defn, pp, m, vpp)
                except DiagnosticError as err:
                    assert all(d.code == "S100" for d in err.diagnostics), (pp, m, vpp, err)
                    continue
                yield pp, m, vpp, check_expansion(exp)


@pytest.mark.parametrize("stem", sorted(EXPECTED - {"zbvpp", "vpp"}))
def test_library_schedule_valid_over_a_sweep(stem):
    """Every size the schedule accepts (its `require`s) checks complete, ordered and deadlock-free."""
    accepted = 0
    for pp, m, vpp, result in _sweep(stem):
        assert result.valid, (stem, pp, m, vpp, [d.message for d in result.diagnostics][:3])
        accepted += 1
    assert accepted >= 10, f"{stem} accepted only {accepted} sizes"


def test_paddle_vpp_deadlocks_only_when_pp_does_not_divide_microbatches():
    """vpp.sched is Paddle's order; the checker finds its hangs, and only where pp does not divide m."""
    hangs = []
    for pp, m, vpp, result in _sweep("vpp"):
        if m % pp == 0:
            assert result.valid, (pp, m, vpp, [d.message for d in result.diagnostics][:3])
        elif not result.valid:
            assert [d.code for d in result.errors] == ["S105"], (pp, m, vpp)
            hangs.append((pp, vpp, m))
    assert (4, 2, 6) in hangs
