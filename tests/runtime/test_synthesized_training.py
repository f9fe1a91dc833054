"""Schedules `ppdsl synth` writes train like every library schedule: to the plain full-batch run's parameters."""

from __future__ import annotations

import pytest

import ppdsl
from ppdsl.analysis.costs import CostSpec
from ppdsl.synth import SynthRequest, synthesize_file

from training_check import assert_trains_like_the_full_batch_run


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("pp", "m", "vpp", "placement", "limit"),
    [(3, 4, 1, "looped", 2.5), (2, 4, 2, "vshape", 3.0)],
    ids=["looped", "vshape"],
)
def test_a_synthesized_split_backward_schedule_trains_like_the_full_batch_run(pp, m, vpp, placement, limit, tmp_path):
    costs = CostSpec({"backward_b": 1.5, "backward_w": 0.7, "latency": 0.1})
    request = SynthRequest(pp, m, vpp, placement, costs, limit, split="yes", time_limit=1)
    path = tmp_path / "synth.sched"
    path.write_text(synthesize_file(request).text)
    exp = ppdsl.expand(path, pp=pp, microbatches=m, vpp=vpp)
    assert {name for r in range(pp) for name, _, _ in exp.job_tuples(r)} >= {"backward_b", "backward_w"}
    assert_trains_like_the_full_batch_run(exp)
