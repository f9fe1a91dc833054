"""`ctx.pipeline`: an nn.Layer stack on the stages, split by count, by parameters or at given blocks; traced from
eagerly built layers; trains like the plain run, split backward included (tests/models/layer_stack.py)."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from typer.testing import CliRunner

from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load
from ppdsl.runtime.layers import block_stages

from paths import ROOT

needs_paddle = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

BLOCKS = [552, 76, 76, 76, 76, 76]  # parameters of tests/models/layer_stack.py's blocks; embedding and head 128


@pytest.mark.parametrize(
    ("stages", "split", "want"),
    [
        (2, "uniform", [0, 0, 0, 1, 1, 1]),
        (3, "uniform", [0, 0, 1, 1, 2, 2]),
        (4, "uniform", [0, 0, 1, 2, 2, 3]),
        # stage 0 = embedding + block 0 = 680, stage 1 = 5 * 76 + 128 = 508; cutting later would pass 680
        (2, "params", [0, 1, 1, 1, 1, 1]),
        # the embedding alone (128) | block 0 (552) | 5 * 76 + 128 = 508: no stage can hold less than block 0
        (3, "params", [1, 2, 2, 2, 2, 2]),
        (4, [1, 3, 5], [0, 1, 1, 2, 2, 3]),
        (3, [0, 6], [1, 1, 1, 1, 1, 1]),  # the embedding alone on stage 0, the head alone on stage 2
    ],
)
def test_block_stages(stages, split, want):
    assert block_stages(stages, 128, BLOCKS, 128, split) == want


@pytest.mark.parametrize(
    ("stages", "split", "fragment"),
    [
        (2, "by-magic", "unknown split `by-magic`"),
        (4, [1, 3], "needs 3 block indices for 4 stages"),
        (3, [4, 2], "not ascending block indices in 0 .. 6"),
        (3, [3, 3], "stage 1 of 3 holds no layer"),
        (9, "uniform", "holds no layer"),
    ],
)
def test_bad_splits_are_diagnosed(stages, split, fragment):
    with pytest.raises(DiagnosticError) as err:
        block_stages(stages, 128, BLOCKS, 128, split)
    assert [d.code for d in err.value.diagnostics] == ["E039"]
    assert fragment in err.value.diagnostics[0].message


@pytest.mark.parametrize("stages", [3, 4, 5, 8, 16])
def test_the_uniform_splits_advice_works_when_followed(stages):
    """E039's help names the fewest blocks that fill every stage: that many do, one fewer does not (2 blocks at
    pp 4 once advised "at least 2 blocks")."""
    with pytest.raises(DiagnosticError) as err:
        block_stages(stages, 128, [64], 128, "uniform")
    advice = err.value.diagnostics[0].help
    fewest = int(re.search(r"at least (\d+) blocks with the uniform split", advice).group(1))
    assert sorted(set(block_stages(stages, 128, [64] * fewest, 128, "uniform")) | {0, stages - 1}) == list(
        range(stages)
    )
    with pytest.raises(DiagnosticError):
        block_stages(stages, 128, [64] * (fewest - 1), 128, "uniform")


@needs_paddle
@pytest.mark.parametrize(
    ("build", "stem", "pp", "vpp", "first_blocks"),
    [
        ("build_params", "1f1b", 2, 1, {0: 0, 1: 1}),  # block 0 alone with the embedding
        ("build_cuts", "zbv", 2, 2, {0: 0, 1: 1, 3: 2, 5: 3}),  # split backward: backward_b / backward_w jobs
    ],
)
def test_pipelined_layer_stack_trains_like_the_plain_run(build, stem, pp, vpp, first_blocks, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, reference_run, train

    m = 4
    exp = expand(load(library_dir() / f"{stem}.sched"), pp, m, vpp)
    model = load_model(f"tests.models.layer_stack:{build}")
    trainer = PipelineTrainer(checked_spec(exp), model, TrainConfig(batch_size=2 * m, lr=0.05, optimizer="sgd", seed=3))
    stage_of = trainer.program.param_stage
    assert stage_of["embedding.weight"] == 0 and stage_of["head.out.weight"] == exp.nstages - 1
    for block, stage in first_blocks.items():
        assert stage_of[f"blocks.{block}.fc1.weight"] == stage, block
    if stem == "zbv":
        assert trainer.built.split_matmuls > 0 and any(n.startswith("backward_w@") for n in trainer.built.programs)
    initial = trainer.state()
    run = train(trainer, 2)
    want, losses = reference_run(
        model,
        num_stages=exp.nstages,
        microbatches=m,
        config=trainer.config,
        steps=2,
        initial=initial,
        batches=trainer.batch,
    )
    assert set(want) == set(run.parameters)
    for name, value in want.items():
        np.testing.assert_allclose(run.parameters[name], value, atol=1e-5, rtol=0, err_msg=name)
    np.testing.assert_allclose(np.stack(run.losses), np.stack(losses), atol=1e-5, rtol=0)


@needs_paddle
@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        ("build_tied", "parameter `embedding.weight` is used on stages 0, 1: one process trains a shared"),
        ("build_bad_split", "unknown split `by-magic`"),
    ],
)
def test_a_model_that_cannot_be_placed_is_diagnosed(build, fragment, monkeypatch, in_repo):
    monkeypatch.syspath_prepend(str(ROOT))
    args = ["run", "1f1b", "--pp", "2", "-m", "2", "--batch-size", "4", "--steps", "1"]
    result = CliRunner().invoke(app, [*args, "--model", f"tests.models.layer_stack:{build}"])
    assert result.exit_code == 2, result.output
    assert "error[E039]" in result.stderr and fragment in result.stderr
    assert "Traceback" not in result.output
