"""Parameters several stages hold (issue 29): a tied embedding and LM head (`--model gpt_tied`, or a user's
`ctx.pipeline` stack whose head uses the embedding's weight) trains over processes to its one-stage parameters,
kept in step by the schedule's `sync_shared`; a schedule with no place for it is refused (E095)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from typer.testing import CliRunner

from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load
from ppdsl.runtime.shared import check_sync_places, holders

from paths import ROOT

needs_paddle = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")
runner = CliRunner()
STEPS = 2


def _with_sync_shared(tmp_path):
    """1F1B with `sync_shared` on every rank, right before its optimizer."""
    text = (library_dir() / "1f1b.sched").read_text()
    text = text.replace('schedule "1F1B"', 'schedule "1F1B-tied"').replace(
        "\n    optimizer\n", "\n    sync_shared\n    optimizer\n"
    )
    assert "sync_shared" in text
    path = tmp_path / "1f1b_tied.sched"
    path.write_text(text)
    return path


def test_a_holder_without_sync_shared_is_refused_naming_where_to_add_it(tmp_path):
    plain = checked_spec(expand(load(library_dir() / "1f1b.sched"), 2, 4, 1))
    shared = {"embedding.weight": ["embedding.weight", "embedding.weight.stage1"]}
    stage = {"embedding.weight": 0, "embedding.weight.stage1": 1}
    assert holders(shared["embedding.weight"], stage, [0, 1]) == [0, 1]
    with pytest.raises(DiagnosticError) as err:
        check_sync_places(plain, shared, stage)
    (d,) = err.value.diagnostics
    assert d.code == "E095"
    assert "`embedding.weight` is shared by stages 0, 1 (ranks 0, 1)" in d.message
    assert "the order of rank 0, rank 1 has no `sync_shared`" in d.message
    assert "add `sync_shared` to the order of every rank holding it (0, 1)" in d.help
    synced = checked_spec(expand(load(_with_sync_shared(tmp_path)), 2, 4, 1))
    check_sync_places(synced, shared, stage)  # every holder joins: nothing to say


def _one_stage(model, m):
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig, train

    exp = expand(load(library_dir() / "1f1b.sched"), 1, m, 1)
    config = TrainConfig(batch_size=2 * m, lr=0.05, optimizer="sgd", seed=3)
    return train(PipelineTrainer(checked_spec(exp), load_model(model, ROOT), config), STEPS).parameters


@needs_paddle
@pytest.mark.e2e
@pytest.mark.parametrize(
    ("model", "pp", "tied"),
    [
        ("gpt_tied", 2, "embedding.token.weight"),
        ("gpt_tied", 4, "embedding.token.weight"),
        ("tests.models.layer_stack:build_tied", 2, "embedding.weight"),
    ],
)
def test_a_tied_model_over_processes_trains_to_its_one_stage_parameters(model, pp, tied, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # where the user's model module is found, as a rank finds it
    m = 4
    want = _one_stage(model, m)
    run_dir = tmp_path / "run"
    args = ["run", str(_with_sync_shared(tmp_path)), "--model", model, "--pp", str(pp), "-m", str(m)]
    args += ["--steps", str(STEPS), "--batch-size", str(2 * m), "--lr", "0.05", "--optimizer", "sgd", "--seed", "3"]
    args += ["--nproc-per-node", str(pp), "--run-dir", str(run_dir)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output + (result.stderr or "")
    got = {}
    for r in range(pp):
        with np.load(run_dir / "launch-1" / f"rank{r}.npz") as data:
            got.update({k: data[k] for k in data.files})
    copy = f"{tied}.stage{pp - 1}"
    assert set(got) == set(want) | {copy}, "the last stage holds a copy of the tied weight"
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-7, err_msg=name)
    np.testing.assert_allclose(got[copy], want[tied], rtol=1e-5, atol=1e-7, err_msg="the copy fell out of step")
    assert not np.allclose(want[tied], _one_stage_initial(model, tied)), "the tied weight never trained"


def _one_stage_initial(model, name):
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.train import PipelineTrainer, TrainConfig

    exp = expand(load(library_dir() / "1f1b.sched"), 1, 4, 1)
    config = TrainConfig(batch_size=8, lr=0.05, optimizer="sgd", seed=3)
    return PipelineTrainer(checked_spec(exp), load_model(model, ROOT), config).parameters()[name]


@needs_paddle
@pytest.mark.e2e
def test_a_tied_model_on_a_schedule_without_sync_shared_is_refused_by_its_own_located_e095(tmp_path, in_repo):
    """Before: the ranks' E095 came back inside a generic E040 ("rank 1 failed: [E095] ..."), exit status 1."""
    args = ["run", "1f1b", "--model", "gpt_tied", "--pp", "2", "-m", "2", "--steps", "1"]
    result = runner.invoke(app, [*args, "--nproc-per-node", "2", "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output + (result.stderr or "")
    assert "error[E095]: parameter `embedding.token.weight` is shared by stages 0, 1" in result.stderr
    assert "E040" not in result.stderr
    assert "--> schedules/1f1b.sched:" in result.stderr and "`sync_shared` goes before it" in result.stderr
