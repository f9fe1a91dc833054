"""Schedules `ppdsl synth` writes train like every library schedule: to the plain full-batch run's parameters."""

from __future__ import annotations

import numpy as np
import pytest

import ppdsl
from ppdsl.analysis.costs import CostSpec
from ppdsl.synth import SynthRequest, synthesize_file

STEPS = 2


@pytest.mark.parametrize(
    ("pp", "m", "vpp", "placement", "limit"),
    [(3, 4, 1, "looped", 2.5), (2, 4, 2, "vshape", 3.0)],
    ids=["looped", "vshape"],
)
def test_a_synthesized_split_backward_schedule_trains_like_the_full_batch_run(pp, m, vpp, placement, limit, tmp_path):
    from ppdsl.runtime.model import BUILTIN
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, reference_run, train

    costs = CostSpec({"backward_b": 1.5, "backward_w": 0.7, "latency": 0.1})
    request = SynthRequest(pp, m, vpp, placement, costs, limit, split="yes", time_limit=1)
    outcome = synthesize_file(request)
    path = tmp_path / "synth.sched"
    path.write_text(outcome.text)
    exp = ppdsl.expand(path, pp=pp, microbatches=m, vpp=vpp)
    assert {name for r in range(pp) for name, _, _ in exp.job_tuples(r)} >= {"backward_b", "backward_w"}

    trainer = PipelineTrainer(exp, BUILTIN, TrainConfig(batch_size=2 * m, lr=0.05, optimizer="sgd", seed=3))
    initial = trainer.state()
    run = train(trainer, STEPS)
    ref_params, ref_losses = reference_run(
        BUILTIN,
        num_stages=exp.nstages,
        microbatches=m,
        config=trainer.config,
        steps=STEPS,
        initial=initial,
        batches=trainer.batch,
    )
    assert set(run.parameters) == set(ref_params) and ref_params
    for name, value in ref_params.items():
        np.testing.assert_allclose(run.parameters[name], value, atol=1e-5, rtol=0, err_msg=name)
    assert any(not np.array_equal(initial[n], v) for n, v in ref_params.items()), "training changed nothing"
    np.testing.assert_allclose(np.stack(run.losses), np.stack(ref_losses), atol=1e-5, rtol=0)
    assert len(trainer.built.job_names) == sum(len(j) for j in exp.jobs)
