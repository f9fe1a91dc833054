"""The shipped library: every schedule checks valid at the sizes it accepts, and its expansion is golden."""

from __future__ import annotations

import pytest

import ppdsl
from ppdsl.analysis.expand import expand
from ppdsl.language.library import library_files
from ppdsl.language.resolve import load

from paths import GOLDEN, LIBRARY

EXPECTED = {
    "1f1b",
    "1f1b_recompute",
    "1f1b_selective",
    "dualpipev",
    "eager1f1b",
    "fthenb",
    "interleaved1f1b",
    "interleavedzb",
    "interleaved1f1b_offload",
    "loopedbfs",
    "vpp",
    "zbh1",
    "zbh2",
    "zbv",
    "zbvpp",
}
# (pp, microbatches, vpp) per schedule: a small and a larger size, vpp = 2 where the schedule takes chunks.
SIZES = {
    "1f1b": [(4, 8, 1), (3, 5, 1)],
    "1f1b_recompute": [(4, 8, 1), (3, 5, 1)],
    "1f1b_selective": [(4, 8, 1), (3, 5, 1)],
    "dualpipev": [(4, 8, 2), (2, 6, 2)],
    "eager1f1b": [(4, 8, 1), (2, 5, 1)],
    "fthenb": [(4, 8, 1), (2, 3, 2)],
    "interleaved1f1b": [(4, 8, 2), (2, 6, 3)],
    "interleavedzb": [(4, 8, 2), (2, 6, 3)],
    "interleaved1f1b_offload": [(4, 8, 2), (2, 6, 3)],
    "loopedbfs": [(4, 8, 2), (2, 3, 3)],
    "vpp": [(4, 8, 2), (2, 5, 2)],
    "zbh1": [(4, 8, 1), (3, 6, 1)],
    "zbh2": [(4, 8, 1), (3, 5, 1)],
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


def _unit(schedule: str, pp: int, m: int, **costs: float):
    """A check at unit costs (the zero-bubble paper's F = B = W), or the costs given."""
    costs = {"forward": 1, "backward_b": 1, "backward_w": 1, **costs}
    result = ppdsl.check(schedule, pp=pp, microbatches=m, costs=costs)
    assert result.valid, [d.message for d in result.diagnostics]
    return result


def _span_idle(result, rank: int) -> float:
    """Idle time between a rank's first job and its last (the paper's bubble: the stagger of the stages' starts is
    not counted, as successive iterations overlap it)."""
    ex, jobs = result.execution, result.expansion.jobs[rank]
    return ex.end[rank][len(jobs) - 1] - ex.start[rank][0] - ex.ranks[rank].busy


@pytest.mark.parametrize(("pp", "m"), [(2, 3), (3, 5), (4, 8), (4, 12), (6, 11), (8, 32)])
def test_zbh2_is_the_papers_zero_bubble_parallelogram(pp, m):
    """Qi et al. 2024, section 2.2: with F = B = W no rank idles between its first job and its last; rank r starts
    at r * F, so the makespan is microbatches * (F + B + W) + (pp - 1) * F; peak (2p - 1) M_B on the first stage."""
    result = _unit("zbh2", pp, m)
    assert [_span_idle(result, r) for r in range(pp)] == [0] * pp
    assert result.makespan == 3 * m + (pp - 1)
    # in-flight micro-batches between a forward and its input gradient (M_W = 0): 2 * (pp - r) - 1 on rank r
    counted = ppdsl.check(_zbh2_freeing_at_b(), pp=pp, microbatches=m)
    assert [r.peak_activations for r in counted.ranks] == [2 * (pp - r) - 1 for r in range(pp)]


def _zbh2_freeing_at_b() -> str:
    """zbh2.sched with a micro-batch's activations freed by its input gradient (the paper's M_B count)."""
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp())
    (folder / "zbh2_mb.sched").write_text(f'include "{LIBRARY / "zbh2.sched"}"\nmemory backward_b frees 1\n')
    return str(folder / "zbh2_mb.sched")


@pytest.mark.parametrize(("f", "b", "w"), [(2, 1, 1), (1, 3, 1), (2, 2, 1), (3, 2, 1), (1.5, 0.5, 0.5), (2, 1, 2)])
def test_zbh2_bubble_is_the_papers_formula(f, b, w):
    """The first stage's bubble is (p - 1)(F + B - 2W) (zero if negative); the last stage, which starts (p - 1) F
    late, never idles. Checked where the paper's handcrafted analysis holds, W <= F."""
    for pp, m in ((3, 7), (4, 8), (5, 12)):
        result = _unit("zbh2", pp, m, forward=f, backward_b=b, backward_w=w)
        assert _span_idle(result, 0) == (pp - 1) * max(0, f + b - 2 * w)
        assert _span_idle(result, pp - 1) == 0
        assert result.makespan == m * (f + b + w) + (pp - 1) * max(f, f + b - 2 * w)


def test_zbh1_idles_as_its_docstring_says():
    """zbh1.sched is Paddle's ZBH1 order: 2 * pp - 3 idle per rank with F = B = W, not the paper's pp - 1."""
    for pp in range(2, 7):
        for m in (pp, pp + 1, 2 * pp, 3 * pp + 1):
            result = _unit("zbh1", pp, m)
            assert {r.idle for r in result.ranks} == {2 * pp - 3}, (pp, m)
    assert "every rank idles 2 * pp - 3" in ppdsl.load("zbh1").doc
