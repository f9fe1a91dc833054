"""The six Paddle-named library schedules expand, job for job, to the lists Paddle's own passes build.

Sweep: pp 1..8, vpp 1..4, microbatches pp..4*pp, every rank, wherever Paddle accepts the sizes. Paddle's
FThenB, 1F1B, Eager1F1B and ZBH1 ignore vpp (their lists are single-chunk), so they are compared at vpp = 1.
"""

from __future__ import annotations

import pytest

from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load

from paddle_oracle import paddle_accepts, paddle_available, paddle_job_list

pytestmark = pytest.mark.skipif(
    not paddle_available(), reason="paddlepaddle is not installed (pip install -e '.[test]' installs it)"
)

SINGLE_CHUNK = {"FThenB": "fthenb", "1F1B": "1f1b", "Eager1F1B": "eager1f1b", "ZBH1": "zbh1"}


def _sizes(vpps):
    for pp in range(1, 9):
        for vpp in vpps:
            for m in range(pp, 4 * pp + 1):
                yield pp, vpp, m


def _compare(mode: str, file: str, pp: int, vpp: int, m: int, **attrs) -> str | None:
    """None when ppdsl and Paddle agree (or both reject the sizes); else what differs."""
    params = {k: v for k, v in attrs.items() if k == "split_backward"}
    accepted = paddle_accepts(mode, pp, m, vpp, **attrs)
    try:
        exp = expand(load(library_dir() / f"{file}.sched"), pp, m, vpp, params)
    except DiagnosticError as err:
        if accepted:
            return f"ppdsl rejects sizes Paddle accepts: {err}"
        return None
    if not accepted:
        return "ppdsl accepts sizes Paddle rejects"
    for rank in range(pp):
        want = paddle_job_list(mode, pp, rank, m, vpp, **attrs)
        got = exp.job_tuples(rank)
        if got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), min(len(got), len(want)))
            return f"rank {rank} differs at job {at}: ppdsl {got[at : at + 3]} paddle {want[at : at + 3]}"
    return None


@pytest.mark.e2e
@pytest.mark.parametrize("mode", sorted(SINGLE_CHUNK))
def test_single_chunk_schedules_match_paddle(mode):
    mismatches = [
        (pp, m, diff)
        for pp, vpp, m in _sizes([1])
        if (diff := _compare(mode, SINGLE_CHUNK[mode], pp, vpp, m)) is not None
    ]
    assert not mismatches, mismatches[:5]


@pytest.mark.e2e
@pytest.mark.parametrize("split_backward", [False, True])
def test_vpp_matches_paddle(split_backward):
    mismatches = [
        (pp, vpp, m, diff)
        for pp, vpp, m in _sizes([1, 2, 3, 4])
        if (diff := _compare("VPP", "vpp", pp, vpp, m, split_backward=split_backward)) is not None
    ]
    assert not mismatches, mismatches[:5]


@pytest.mark.e2e
def test_zbvpp_matches_paddle():
    compared = 0
    mismatches = []
    for pp, vpp, m in _sizes([1, 2, 3, 4]):
        diff = _compare("ZBVPP", "zbvpp", pp, vpp, m)
        compared += paddle_accepts("ZBVPP", pp, m, vpp)
        if diff is not None:
            mismatches.append((pp, vpp, m, diff))
    assert compared >= 24, "Paddle produced fewer ZBVPP lists than expected"
    assert not mismatches, mismatches[:5]
