"""The library's PyTorch-named schedules are PyTorch's, job for job: at every size of a sweep where ppdsl accepts the
sizes, torch 2.13's own schedule class builds the same compute order on every rank; where torch refuses the
sizes, ppdsl's `require`s refuse them too (S100).

torch comes from benchmarks/torch_reference.py (the same helpers the benchmarks use); its idle steps are dropped
and DualPipeV's overlapped pairs `(a;b)OVERLAP_F_B` read as a then b, as `ppdsl import` reads them.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

import ppdsl
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.reports.formats import torch_actions

from paths import ROOT

TORCH = importlib.util.find_spec("torch") is not None
pytestmark = pytest.mark.skipif(not TORCH, reason="torch is not installed (the `bench` extra brings torch 2.13)")

# (library schedule, torch schedule class, chunks per rank to sweep)
SCHEDULES = [
    ("loopedbfs", "LoopedBFS", (1, 2, 3, 4)),
    ("interleavedzb", "InterleavedZeroBubble", (1, 2, 3, 4)),
    ("interleaved1f1b", "Interleaved1F1B", (2, 3, 4)),
    ("zbv", "ZBVZeroBubble", (2,)),
    ("dualpipev", "DualPipeV", (2,)),
]


def _torch_order(name: str, pp: int, microbatches: int, vpp: int) -> list[list[str]] | None:
    """torch's compute actions per rank, or None if torch refuses the sizes."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from torch_reference import torch_compute_schedule

    try:
        order = torch_compute_schedule(name, pp, microbatches, vpp)
    except (ValueError, AssertionError, RuntimeError):
        return None
    flat = []
    for r in range(pp):
        actions = []
        for action in order[r]:
            if action.endswith("OVERLAP_F_B"):
                actions += action[1 : action.index(")")].split(";")
            elif action:
                actions.append(action)
        flat.append(actions)
    return flat


@pytest.mark.e2e
@pytest.mark.parametrize(("stem", "name", "vpps"), SCHEDULES, ids=[s[0] for s in SCHEDULES])
def test_library_schedule_equals_torch_job_for_job(stem, name, vpps):
    schedule = ppdsl.load(stem)
    compared = 0
    for pp in (1, 2, 3, 4, 6, 8):
        for vpp in vpps:
            for m in sorted({1, 2, 3, pp - 1, pp, pp + 1, 2 * pp - 1, 2 * pp, 2 * pp + 1, 3 * pp, 4 * pp + 1} - {0}):
                theirs = _torch_order(name, pp, m, vpp)
                try:
                    ours = ppdsl.expand(schedule, pp=pp, microbatches=m, vpp=vpp)
                except DiagnosticError as err:
                    assert {d.code for d in err.diagnostics} == {"S100"}, (pp, vpp, m, err)
                    continue
                assert theirs is not None, f"torch refuses pp={pp} vpp={vpp} m={m}, {stem}.sched does not"
                assert torch_actions(ours) == theirs, (pp, vpp, m)
                compared += 1
    assert compared >= 20, f"only {compared} sizes compared"


@pytest.mark.parametrize("stem", ["loopedbfs", "interleavedzb"])
def test_new_torch_schedules_check_valid_where_they_run(stem):
    """Equal to torch is not enough: the orders are complete, ordered and deadlock-free at those sizes."""
    for pp, m, vpp in ((4, 8, 2), (2, 6, 3), (3, 3, 1), (8, 16, 2)):
        result = ppdsl.check(stem, pp=pp, microbatches=m, vpp=vpp)
        assert result.valid, (pp, m, vpp, [d.message for d in result.diagnostics])
