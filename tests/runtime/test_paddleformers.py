"""A model nobody here wrote: PaddleFormers' LlamaForCausalLM (examples/paddleformers_llama.py), pipelined with 1F1B
and ZB-V, trains to the parameters of the same model trained the ordinary way: in dygraph, on the full batch,
with its own forward and loss.

PaddleFormers comes with the `test` extra (`pip install -e '.[test]'`); this test does not skip without it.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load

from paths import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

MODEL = "examples.paddleformers_llama:build"
STEPS, SEED, LR = 2, 3, 0.05


def _dygraph_run(batches):
    """LlamaForCausalLM built as the example builds it (same seed), trained with SGD on the full batch."""
    import paddle

    from examples.paddleformers_llama import llama
    from ppdsl.runtime.layers import eager

    with eager(paddle, SEED):
        model = llama()
        model.train()
        opt = paddle.optimizer.SGD(LR, parameters=model.parameters())
        losses = []
        for step in range(STEPS):
            batch = batches(step)
            loss = model(paddle.to_tensor(batch["tokens"]), labels=paddle.to_tensor(batch["labels"]))[0]
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
        return {name: p.numpy() for name, p in model.named_parameters()}, losses


@pytest.mark.e2e
@pytest.mark.parametrize(("stem", "pp", "m", "vpp"), [("1f1b", 2, 4, 1), ("zbv", 2, 4, 2)])
def test_llama_pipelined_trains_like_the_dygraph_model(stem, pp, m, vpp, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train

    exp = expand(load(library_dir() / f"{stem}.sched"), pp, m, vpp)
    trainer = PipelineTrainer(
        checked_spec(exp), load_model(MODEL), TrainConfig(batch_size=2 * m, lr=LR, optimizer="sgd", seed=SEED)
    )
    if stem == "zbv":
        assert trainer.built.split_matmuls > 0  # its weight gradients really run as backward_w jobs
    run = train(trainer, STEPS)
    want, losses = _dygraph_run(trainer.batch)
    assert set(run.parameters) == set(want)  # the model's own parameter names, every one trained
    for name, value in want.items():
        np.testing.assert_allclose(run.parameters[name], value, atol=1e-5, rtol=0, err_msg=name)
    # the mean of the micro-batch losses is the full batch's loss (every micro-batch has as many tokens)
    np.testing.assert_allclose([loss.mean() for loss in run.losses], losses, atol=1e-5, rtol=0)
    assert losses[-1] < losses[0]
