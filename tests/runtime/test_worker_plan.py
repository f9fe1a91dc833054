"""A rank process builds everything from the plan specification its launch wrote (`plan.json`): it never reads the
`.sched` file nor imports `ppdsl.language`, and it refuses a plan of another source (E090) or a damaged one (E091).
A generated plan module's orders, which no check merged, still run on one process."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ppdsl.analysis.check import check
from ppdsl.analysis.expand import expand
from ppdsl.analysis.plan_spec import plan_spec
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.resolve import load
from ppdsl.plan.spec import source_fingerprint
from ppdsl.runtime.launch_spec import LaunchSpec, load_plan, read_launch_spec, write_launch
from ppdsl.runtime.request import RunRequest

from paths import LIBRARY, ROOT

WORKER = ROOT / "ppdsl" / "runtime" / "worker.py"
needs_paddle = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")


def _launch(
    tmp_path: Path, pp: int = 1, m: int = 2, fingerprint: str | None = None, plan_text: str | None = None
) -> tuple[Path, LaunchSpec, str]:
    """What `ppdsl run --nproc-per-node` writes into a launch's directory, for a copy of 1f1b.sched in tmp_path:
    the schedule, the spec as a rank reads it, and the sha256 its command line carries."""
    sched = tmp_path / "mine.sched"
    sched.write_text((LIBRARY / "1f1b.sched").read_text())
    spec = plan_spec(check(Scenario(str(sched), pp, m), record_visits=True))
    request = RunRequest(
        str(sched),
        pp=pp,
        microbatches=m,
        batch_size=2 * m,
        lr=0.05,
        optimizer="sgd",
        seed=3,
        steps=1,
        nproc_per_node=pp,
    )
    launch = LaunchSpec(request=request, model_dir=str(tmp_path))
    spec_path, digest = write_launch(tmp_path, launch, plan_text or spec.to_json(), fingerprint or spec.fingerprint)
    return sched, read_launch_spec(spec_path, digest), digest


@needs_paddle
def test_a_rank_trains_from_its_plan_without_reading_the_sched_or_importing_the_language(tmp_path):
    """The rank's own entry (worker.py as the launcher starts it, one rank of pp = 1), with every `open` recorded."""
    sched, _, digest = _launch(tmp_path)
    code = f"""
import runpy, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
sys.argv = ["worker.py", {str(tmp_path / "spec.json")!r}, {digest!r}]
try:
    runpy.run_path({str(WORKER)!r}, run_name="__main__")
except SystemExit as end:
    print("EXIT", end.code)
print("LANGUAGE", sorted(m for m in sys.modules if m.startswith("ppdsl.language")))
print("OPENED", [p for p in opened if p.endswith(".sched")])
print("PLAN", {str(tmp_path / "plan.json")!r} in opened)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ")[0].isupper())
    assert lines.get("EXIT") == "0", done.stdout + done.stderr
    assert lines["LANGUAGE"] == "[]"
    assert lines["OPENED"] == "[]", f"the rank opened {lines['OPENED']}, not only {sched.name}'s plan"
    assert lines["PLAN"] == "True"
    report = json.loads((tmp_path / "rank0.json").read_text())
    assert report["jobs"] == sum(1 for _ in expand(load(sched), 1, 2).jobs[0])
    assert len(report["losses"]) == 1 and all(np.isfinite(report["losses"][0]))


def test_a_rank_refuses_a_plan_of_another_source_naming_both_fingerprints(tmp_path):
    other = source_fingerprint(["order { forward backward optimizer }"])
    _, launch, _ = _launch(tmp_path, fingerprint=other)
    with pytest.raises(DiagnosticError) as err:
        load_plan(launch)
    (d,) = err.value.diagnostics
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert d.code == "E090"
    assert plan["fingerprint"][:16] in d.message and other[:16] in d.message
    assert "run `ppdsl run` again" in d.help


def test_a_rank_refuses_a_damaged_plan(tmp_path):
    """Written so by the launcher (its sha256 in the spec): not a plan (E091). One written after is E045."""
    _, launch, _ = _launch(tmp_path, plan_text='{"format": 1, "pp": 1}')
    with pytest.raises(DiagnosticError) as err:
        load_plan(launch)
    assert [d.code for d in err.value.diagnostics] == ["E091"]
    assert f"`{tmp_path / 'plan.json'}` is not a ppdsl plan specification" in err.value.diagnostics[0].message


@pytest.mark.e2e
@needs_paddle
def test_a_plan_modules_orders_run_on_one_process_merged_by_the_values_each_job_reads():
    """A plan module hands `build_plan` the spec of its own data (no check merged its orders): every job runs, in an
    order the executor accepts, and the step computes what the checked spec's plan computes."""
    from ppdsl.analysis.plan_spec import expansion_spec
    from ppdsl.plan.spec import plan_module_spec
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.model import synthetic_batch
    from ppdsl.runtime.plan import build_plan
    from ppdsl.runtime.program import build_training_program

    paddle = import_paddle()
    exp = expand(load(LIBRARY / "zbh1.sched"), 2, 4)
    module_spec = plan_module_spec(
        [jt.to_dict() for jt in exp.defn.job_types],  # a plan module's JOB_TYPES
        exp.stage_of,
        [exp.job_tuples(r) for r in range(exp.pp)],
        [],
        4,
    )
    assert module_spec.merged is None
    losses = []
    for spec in (plan_spec(check(Scenario(LIBRARY / "zbh1.sched", 2, 4), record_visits=True)), module_spec):
        program = build_training_program(paddle, BUILTIN, micro_batch_size=2, num_stages=2, microbatches=4, lr=0.1)
        built = build_plan(program.main, program.startup, spec)
        assert len(built.job_names) == sum(len(j) for j in exp.jobs)
        scope = paddle.static.Scope()
        program.run_startup(paddle, scope)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe._set_plan(built.plan)
        batch = synthetic_batch(program.inputs, 8, 0, 3)
        with paddle.static.scope_guard(scope):
            out = exe.run(program.main, feed=batch, fetch_list=[built.loss_value])
        losses.append(np.asarray(out[0]).reshape(-1))
    np.testing.assert_array_equal(losses[0], losses[1])
    assert expansion_spec(exp).merged is None
