"""The runtime's correctness oracle, shared by the tests that train a schedule: the same model trained the plain
way (one full-batch program) ends at the same parameters, with the same per-micro-batch losses."""

from __future__ import annotations

import numpy as np

STEPS = 2


def trainer_for(exp, optimizer: str = "sgd", model=None, batch_size: int | None = None):
    from ppdsl.analysis.plan_spec import checked_spec
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig

    config = TrainConfig(batch_size=batch_size or 2 * exp.microbatches, lr=0.05, optimizer=optimizer, seed=3)
    return PipelineTrainer(checked_spec(exp), model or BUILTIN, config)


def assert_trains_like_the_full_batch_run(exp, steps: int = STEPS) -> None:
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.train import reference_run, train

    m = exp.microbatches
    trainer = trainer_for(exp)
    initial = trainer.state()
    run = train(trainer, steps)
    ref_params, ref_losses = reference_run(
        BUILTIN,
        num_stages=exp.nstages,
        microbatches=m,
        config=trainer.config,
        steps=steps,
        initial=initial,
        batches=trainer.batch,
    )
    assert set(run.parameters) == set(ref_params) and ref_params
    for name, value in ref_params.items():
        np.testing.assert_allclose(run.parameters[name], value, atol=1e-5, rtol=0, err_msg=name)
    assert any(not np.array_equal(initial[n], v) for n, v in ref_params.items()), "training changed nothing"
    assert [loss.shape for loss in run.losses] == [(m,)] * steps
    np.testing.assert_allclose(np.stack(run.losses), np.stack(ref_losses), atol=1e-5, rtol=0)
    # every job of the schedule ran: one plan job per expanded job
    assert len(trainer.built.job_names) == sum(len(j) for j in exp.jobs)
