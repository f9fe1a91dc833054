"""A rank trusts only what its launcher wrote (issue 26, critical 1): `spec.json` is bound to the launch by the sha256
on the rank's command line, `plan.json` and the `--model` module's source files by the sha256s in the spec; each
is read once (no symlink in its place, a regular file, a capped size) and checked before it is parsed, and the model
runs from the bytes checked. Before, the rank read whatever `spec.json` said: another user who could write the run
directory swapped it while the launcher started, and every rank imported their module."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ppdsl.analysis.check import check
from ppdsl.analysis.plan_spec import plan_spec
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.runtime.launch_spec import (
    LaunchSpec,
    ModuleSource,
    load_bound_model,
    load_plan,
    model_sources,
    read_launch_spec,
    sha256,
    write_launch,
)
from ppdsl.runtime.request import RunRequest

from paths import LIBRARY, ROOT

WORKER = ROOT / "ppdsl" / "runtime" / "worker.py"
MODEL = """
import pathlib

pathlib.Path(__file__).with_name("imported").open("a").write("x")  # one line each time the module's code runs


def build(ctx):
    return None
"""
EVIL = 'import pathlib\npathlib.Path(__file__).with_name("pwned").write_text("ran")\n\ndef build(ctx):\n    pass\n'


def _code(err: pytest.ExceptionInfo) -> tuple[str, str]:
    (d,) = err.value.diagnostics
    return d.code, d.message


def _launch(tmp_path: Path, model: str | None = None, sources=()) -> tuple[Path, str]:
    """A launch of 1f1b at pp 2 written as `ppdsl run --nproc-per-node 2` writes it: spec path and its sha256."""
    plan = plan_spec(check(Scenario(str(LIBRARY / "1f1b.sched"), 2, 4), record_visits=True))
    request = RunRequest("1f1b", pp=2, microbatches=4, model=model, nproc_per_node=2, steps=1)
    launch = LaunchSpec(request=request, model_dir=str(tmp_path), model_sources=tuple(sources))
    directory = tmp_path / "launch-1"
    directory.mkdir()
    return write_launch(directory, launch, plan.to_json(), plan.fingerprint)


def test_the_spec_a_launch_wrote_reads_back_whole(tmp_path):
    spec_path, digest = _launch(tmp_path)
    launch = read_launch_spec(spec_path, digest)
    assert launch.request.pp == 2 and launch.launch_dir == str(spec_path.parent.resolve())
    assert load_plan(launch).pp == 2


def test_a_swapped_spec_is_refused_before_it_is_parsed(tmp_path):
    spec_path, digest = _launch(tmp_path)
    data = json.loads(spec_path.read_text())
    data["options"]["model"], data["model_dir"] = "evil:build", str(tmp_path)
    spec_path.write_text(json.dumps(data))
    with pytest.raises(DiagnosticError) as err:
        read_launch_spec(spec_path, digest)
    code, message = _code(err)
    assert code == "E045" and "is not the file its launcher wrote: its sha256 is" in message, message


def test_a_symlink_in_place_of_the_spec_is_refused_even_to_the_same_bytes(tmp_path):
    spec_path, digest = _launch(tmp_path)
    copy = tmp_path / "copy.json"
    copy.write_bytes(spec_path.read_bytes())
    spec_path.unlink()
    spec_path.symlink_to(copy)
    with pytest.raises(DiagnosticError) as err:
        read_launch_spec(spec_path, digest)
    assert _code(err) == (
        "E045",
        f"cannot read the launch spec `{spec_path}`: a symbolic link, not the file the launcher wrote",
    )


def test_a_fifo_in_place_of_the_spec_is_refused_without_waiting(tmp_path):
    spec_path, digest = _launch(tmp_path)
    spec_path.unlink()
    os.mkfifo(spec_path)
    with pytest.raises(DiagnosticError) as err:
        read_launch_spec(spec_path, digest)
    assert _code(err)[0] == "E045" and "a FIFO, not a regular file" in _code(err)[1]


def test_a_rank_without_the_digest_is_refused(tmp_path):
    spec_path, _ = _launch(tmp_path)
    with pytest.raises(DiagnosticError) as err:
        read_launch_spec(spec_path, None)
    assert _code(err)[0] == "E045" and "without the sha256 of its launch spec" in _code(err)[1]


def test_a_replaced_plan_is_refused_though_its_fingerprint_matches(tmp_path):
    spec_path, digest = _launch(tmp_path)
    plan = spec_path.parent / "plan.json"
    plan.write_text(plan.read_text().replace('"schedule"', '"schedule" ', 1))  # the same plan, other bytes
    with pytest.raises(DiagnosticError) as err:
        load_plan(read_launch_spec(spec_path, digest))
    assert (
        _code(err)[0] == "E045" and f"the plan `{plan.resolve()}` is not the file its launcher wrote" in _code(err)[1]
    )


def test_a_spec_with_a_field_of_the_wrong_kind_is_refused_by_the_typed_reader(tmp_path):
    for change, fragment in (
        ({"resume_step": "3"}, "`resume_step` is str"),
        ({"fail": {"rank": 0, "job": True, "step": 0, "mode": "raise"}}, "`job` is True"),
        ({"plan_sha256": "0" * 63}, "`plan_sha256` is not a sha256"),
        ({"surprise": 1}, "unknown field `surprise`"),
        ({"transport": "gloo"}, "unknown field `transport`"),  # a key no launch writes
    ):
        text = json.dumps(
            {**json.loads(LaunchSpec(RunRequest(), model_dir="/").to_json()), "plan_sha256": "0" * 64, **change}
        )
        with pytest.raises(DiagnosticError) as err:
            LaunchSpec.from_json(text, "`spec.json`")
        assert _code(err)[0] == "E045" and fragment in _code(err)[1], (change, _code(err))


def test_the_model_runs_from_the_bytes_checked_opened_once(tmp_path, monkeypatch):
    (tmp_path / "bound_model_a.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    import bound_model_a  # noqa: F401  (what `load_model` did in the launcher)

    sources = model_sources("bound_model_a:build")
    monkeypatch.delitem(sys.modules, "bound_model_a")  # a rank has not imported it
    assert [(s.name, s.package) for s in sources] == [("bound_model_a", False)]
    spec_path, digest = _launch(tmp_path, "bound_model_a:build", sources)
    launch = read_launch_spec(spec_path, digest)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])  # a rank's path: not the folder
    opened = []
    sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
    model = load_bound_model(launch)
    assert model.name == "bound_model_a:build" and callable(model.build)
    assert opened.count(str(tmp_path / "bound_model_a.py")) == 1
    assert (tmp_path / "imported").read_text() == "xx", "the launcher's import, then the rank's run of the bytes"
    assert sys.modules["bound_model_a"].__file__ == str(tmp_path / "bound_model_a.py")


def test_a_model_file_changed_after_the_launch_is_refused_and_not_run(tmp_path, monkeypatch):
    (tmp_path / "bound_model_b.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    import bound_model_b  # noqa: F401

    sources = model_sources("bound_model_b:build")
    monkeypatch.delitem(sys.modules, "bound_model_b")  # a rank has not imported it
    spec_path, digest = _launch(tmp_path, "bound_model_b:build", sources)
    (tmp_path / "bound_model_b.py").write_text(EVIL)
    with pytest.raises(DiagnosticError) as err:
        load_bound_model(read_launch_spec(spec_path, digest))
    code, message = _code(err)
    assert code == "E049" and f"the `--model` module `{tmp_path / 'bound_model_b.py'}` is not the file" in message
    assert not (tmp_path / "pwned").exists()
    assert "bound_model_b" not in sys.modules


def test_a_package_model_binds_each_file_with_code(tmp_path, monkeypatch):
    package = tmp_path / "bound_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("SEEN = True\n")
    (package / "mod.py").write_text("from . import SEEN\n\ndef build(ctx):\n    return SEEN\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import bound_pkg.mod  # noqa: F401

    sources = model_sources("bound_pkg.mod:build")
    for name in ("bound_pkg", "bound_pkg.mod"):
        monkeypatch.delitem(sys.modules, name)
    assert [(s.name, s.package) for s in sources] == [("bound_pkg", True), ("bound_pkg.mod", False)]
    spec_path, digest = _launch(tmp_path, "bound_pkg.mod:build", sources)
    model = load_bound_model(read_launch_spec(spec_path, digest))
    assert model.build(None) is True


def test_a_rank_handed_a_swapped_spec_writes_its_error_and_runs_nothing_of_it(tmp_path):
    """The worker as the launcher starts it: the spec rewritten after the launch to run another user's module."""
    spec_path, digest = _launch(tmp_path)
    (tmp_path / "evil.py").write_text(EVIL)
    data = json.loads(spec_path.read_text())
    data["options"]["model"], data["model_dir"] = "evil:build", str(tmp_path)
    spec_path.write_text(json.dumps(data))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PADDLE_TRAINER_ID": "0"}
    done = subprocess.run(
        [sys.executable, str(WORKER), str(spec_path), digest], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1, done.stdout + done.stderr
    error = (spec_path.parent / "rank0.error").read_text()
    assert error.startswith("rank 0 failed: [E045] the launch spec"), error
    assert not (tmp_path / "pwned").exists()


def test_a_launch_spec_round_trips(tmp_path):
    launch = LaunchSpec(
        # as a rank reads it back: the paths of the options absolute
        request=RunRequest.from_spec(RunRequest(pp=2, nproc_per_node=2, nnodes=1).to_spec()),
        model_dir="/x",
        model_sources=(ModuleSource("m", "/x/m.py", sha256(b""), False),),
        resume_files={1: "/c/checkpoint.step2.rank1.npz"},
        resume_step=2,
        plan_sha256=sha256(b"plan"),
    )
    assert LaunchSpec.from_json(launch.to_json(), "spec") == dataclasses.replace(launch)
