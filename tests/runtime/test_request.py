"""`RunRequest`, the one table of a run's options: every field is a flag of `ppdsl run` (name, default, help),
a key of the spec each rank process reads, and (the `train` ones) a field of `TrainConfig` and of a checkpoint's
identity; its values are checked in one place. None of this needs paddle."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from pathlib import Path

import pytest
import typer
import typer.main

import ppdsl
from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import checked_spec
from ppdsl.cli import app
from ppdsl.cli.training import command_parameters
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_dir
from ppdsl.language.resolve import load
from ppdsl.runtime.checkpoint import run_identity
from ppdsl.runtime.request import RunRequest, TrainConfig, flag, option

FIELDS = dataclasses.fields(RunRequest)


def _run_command():
    return typer.main.get_command(app).commands["run"]


def test_every_field_is_a_flag_of_ppdsl_run_with_its_default_and_help():
    params = {p.name: p for p in _run_command().params if p.name != "help"}
    assert set(params) == {f.name for f in FIELDS}
    for f in FIELDS:
        param = params[f.name]
        assert param.default == f.default, f.name
        assert param.help == f.metadata["help"], f.name
        if not f.metadata["argument"]:
            assert flag(f.name) in param.opts, (f.name, param.opts)


@dataclasses.dataclass(frozen=True)
class _Extended(RunRequest):
    warmup_steps: int = option(5, "Steps at a lower learning rate.")


def test_a_new_field_is_a_flag_and_a_spec_key_with_nothing_else_written():
    def command(**options):
        pass

    command.__signature__ = inspect.Signature(command_parameters(_Extended))  # as ppdsl/cli/training.py does
    one = typer.Typer()
    one.command()(command)
    (added,) = [p for p in typer.main.get_command(one).params if p.name == "warmup_steps"]
    assert (added.opts, added.default, added.help) == (["--warmup-steps"], 5, "Steps at a lower learning rate.")
    request = _Extended(pp=2, microbatches=2, warmup_steps=3)
    spec = json.loads(json.dumps(request.to_spec()))
    assert spec["warmup_steps"] == 3
    assert _Extended.from_spec(spec).warmup_steps == 3


def test_the_spec_gives_each_rank_the_same_request(tmp_path):
    request = RunRequest(
        schedule="zbh1",
        pp=2,
        microbatches=4,
        params=["x=1"],
        batch_size=8,
        lr=0.05,
        optimizer="sgd",
        seed=3,
        save_dir=tmp_path / "ckpt",
        save_every=2,
        nproc_per_node=2,
        run_dir=tmp_path / "run",
        comm_timeout=5.0,
    )
    spec = json.loads(json.dumps(request.to_spec()))  # what the rank reads is JSON
    assert set(spec) == {f.name for f in FIELDS}
    assert RunRequest.from_spec(spec) == request
    assert RunRequest.from_spec(spec).train_config == TrainConfig(batch_size=8, lr=0.05, optimizer="sgd", seed=3)


def test_the_train_fields_are_the_config_and_the_checkpoint_identity():
    train = [f for f in FIELDS if f.metadata["train"]]
    assert [(f.name, f.default) for f in dataclasses.fields(TrainConfig)] == [(f.name, f.default) for f in train]
    exp = expand(load(library_dir() / "1f1b.sched"), 2, 2)
    identity = run_identity(checked_spec(exp), "tiny_mlp", RunRequest(pp=2, microbatches=2, lr=0.5).train_config)
    assert {f.name: identity[f.name] for f in train} == {"batch_size": 32, "lr": 0.5, "optimizer": "adam", "seed": 0}


def test_every_bad_value_is_refused_at_once_from_python_too():
    with pytest.raises(DiagnosticError) as refused:
        RunRequest(pp=2, microbatches=2, lr=math.nan, seed=-1, comm_timeout=0.0, dry_run=True)
    messages = [d.message for d in refused.value.diagnostics]
    assert messages == [
        "--lr must be a finite number above 0, got nan",
        "--seed must be an integer from 0 to 2147483646, got -1",
        "--comm-timeout must be seconds above 0, at most 86400, got 0.0",
        "--comm-timeout, --dry-run go with --nproc-per-node: without it the run is one process and would ignore them",
    ]
    with pytest.raises(DiagnosticError, match="--steps must not be negative"):
        ppdsl.run("1f1b", pp=2, microbatches=2, steps=-1)  # refused before the schedule is read or paddle loads


def test_paths_are_paths_and_params_a_mapping_whichever_way_they_came():
    from_text = RunRequest(pp=2, microbatches=2, params=["a=1", "b = true"], summary_json="s.json")
    from_python = RunRequest(pp=2, microbatches=2, params={"a": 1, "b": True}, summary_json=Path("s.json"))
    assert from_text.summary_json == from_python.summary_json == Path("s.json")
    assert from_text.param_pairs() == ["a=1", "b=true"] and from_python.param_pairs() == ["a=1", "b=true"]


def test_a_mistyped_keyword_of_ppdsl_run_is_a_diagnostic_with_the_close_name():
    """`ppdsl.run(stepz=3)` is E007 naming `steps`, not `RunRequest.__init__() got an unexpected keyword`; nothing
    trains (the refusal comes before Paddle is imported)."""
    with pytest.raises(DiagnosticError) as err:
        ppdsl.run("1f1b", stepz=3, batchsize=8)
    first, second = err.value.diagnostics
    assert (first.code, second.code) == ("E007", "E007")
    assert "`stepz`" in first.message and "did you mean `steps`?" in first.help
    assert "`batchsize`" in second.message and "did you mean `batch_size`?" in second.help
    assert "did you mean `steps`?" in str(err.value)  # what a traceback shows: the help too
    with pytest.raises(DiagnosticError, match="takes no option `lrate`"):
        ppdsl.run(RunRequest(steps=1), lrate=0.1)
