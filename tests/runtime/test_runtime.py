"""The Paddle runtime on one machine: every library schedule trains exactly like a plain full-batch run.

SGD is used for the equivalence: the pipelined step sums micro-batch gradients in another order than the
full-batch step, a difference of ~1e-9 that SGD keeps at that size but Adam's division by sqrt(v) can blow up
to ~1e-5 for near-zero gradients.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from ppdsl.analysis.expand import expand
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.library import library_files
from ppdsl.language.resolve import load, resolve_text

from paths import ROOT
from training_check import assert_trains_like_the_full_batch_run, trainer_for

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed (pip install -e '.[test]')"
)

STEPS = 3
# (pp, microbatches, vpp, params): two sizes per schedule, vpp = 2 where the schedule takes chunks
SIZES = {
    "1f1b": [(4, 8, 1), (2, 3, 1)],
    "fthenb": [(2, 4, 1), (2, 3, 2)],
    "eager1f1b": [(2, 4, 1), (3, 5, 1)],
    "zbh1": [(4, 8, 1), (2, 3, 1)],
    "zbh2": [(2, 3, 1), (3, 5, 1)],
    "vpp": [(2, 4, 2), (4, 4, 2), (2, 2, 2, {"split_backward": True})],
    "interleaved1f1b": [(2, 4, 2), (2, 6, 3)],
    "interleavedzb": [(2, 4, 2), (2, 6, 3)],
    "loopedbfs": [(2, 4, 2), (2, 3, 1)],
    "zbv": [(2, 4, 2), (3, 5, 2)],
    "dualpipev": [(2, 4, 2), (2, 6, 2)],
    "zbvpp": [(2, 2, 2), (3, 3, 2)],
    "1f1b_recompute": [(2, 3, 1)],
    "1f1b_selective": [(3, 5, 1)],
    "interleaved1f1b_offload": [(2, 4, 2)],
}


# The quick suite trains one schedule of each family at its smallest size (one chunk, interleaved, a V with split
# backward, a memory action); `-m e2e` trains every schedule at every size.
QUICK = {"1f1b", "interleaved1f1b", "zbv", "1f1b_recompute"}


def _cases():
    """The QUICK schedules' smallest sizes in the quick suite, everything else in the end-to-end one."""
    for stem, sizes in SIZES.items():
        smallest = min(sizes, key=lambda size: size[0] * size[1] * size[2])
        for size in sizes:
            marks = () if stem in QUICK and size is smallest else (pytest.mark.e2e,)
            yield pytest.param((stem, *size), marks=marks, id="-".join(map(str, (stem, *size[:3]))))


CASES = list(_cases())


def _lib(stem):
    return load(next(p for p in library_files() if p.stem == stem))


_trainer = trainer_for


def test_every_library_schedule_is_tested():
    assert set(SIZES) == {p.stem for p in library_files()}


@pytest.mark.parametrize("case", CASES)
def test_schedule_trains_like_the_full_batch_run(case):
    stem, pp, m, vpp, *rest = case
    assert_trains_like_the_full_batch_run(expand(_lib(stem), pp, m, vpp, rest[0] if rest else None), STEPS)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("mode", "stem", "pp", "m", "vpp"),
    [("FThenB", "fthenb", 2, 4, 1), ("1F1B", "1f1b", 4, 6, 1), ("1F1B", "1f1b", 2, 2, 1), ("VPP", "vpp", 2, 4, 2)],
)
def test_plan_job_sequence_equals_paddles_apply_pass(mode, stem, pp, m, vpp):
    """On the same program (one rank's chunks), ppdsl's plan and Paddle's `apply_pass` plan run the same jobs."""
    from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass

    from ppdsl.analysis.plan_spec import expansion_spec
    from ppdsl.plan.spec import with_stages
    from ppdsl.runtime.builtin_models import BUILTIN
    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.plan import build_plan
    from ppdsl.runtime.program import build_training_program
    from ppdsl.runtime.stages import complete_roles, op_stages, stamp_stages

    paddle = import_paddle()
    exp = expand(_lib(stem), pp, m, vpp)

    def normal(job_type: str, mb: int):
        base = job_type.rstrip("0123456789")
        return base, int(job_type[len(base) :] or 0), mb

    for rank in range(pp):
        programs = [
            build_training_program(paddle, BUILTIN, micro_batch_size=2, num_stages=vpp, microbatches=m, lr=0.1)
            for _ in range(2)
        ]
        for program in programs:
            # Paddle's VPP pass guesses backward chunk ids from neighbouring ops and cannot place
            # `embedding_grad`; give both sides the program with every op's stage written in
            complete_roles(program.main)
            stamp_stages(program.main, op_stages(program.main))
        attrs = {"num_micro_batches": m, "pp_degree": pp, "pp_stage": rank, "vpp_degree": vpp}
        theirs = apply_pass(programs[0].main, programs[0].startup, mode, attrs)
        # the rank's chunks are stages 0 .. vpp-1 of this program; other ranks' stages lie beyond
        stage_of = [[c if r == rank else vpp * (1 + r) + c for c in range(vpp)] for r in range(pp)]
        spec = with_stages(expansion_spec(exp), stage_of)
        ours = build_plan(programs[1].main, programs[1].startup, spec, rank=rank, whole_model=False)
        got = [normal(j.type(), j.micro_batch_id()) for j in ours.plan.job_list()]
        want = [normal(j.type(), j.micro_batch_id()) for j in theirs.job_list()]
        assert got == want, (rank, got[:6], want[:6])


def test_stream_and_priority_rules_are_set_on_ops():
    from ppdsl.runtime.builtin_models import BUILTIN

    src = (
        'rule "pd_op.gelu" in forward { stream = "gelu_stream" priority = pp + 1 attr use_calc_stream = true '
        'attr event_to_record = "gelu_done" }\n'
        'rule "pd_op.matmul" { priority = 2 }\n'
        "order { forward * microbatches backward * microbatches optimizer }"
    )
    exp = expand(resolve_text(src), 2, 2)
    trainer = _trainer(exp, model=BUILTIN)
    gelus, matmuls = [], []
    for name, program in trainer.built.programs.items():
        for op in program.global_block().ops:
            attrs = op.attrs()
            if op.name() == "pd_op.gelu":
                gelus.append(
                    (
                        name,
                        attrs.get("execution_stream"),
                        attrs.get("scheduling_priority"),
                        attrs.get("use_calc_stream"),
                        attrs.get("event_to_record"),
                    )
                )
            if op.name() == "pd_op.matmul":
                matmuls.append(attrs.get("scheduling_priority"))
    assert gelus and all(g[0].startswith("forward@") for g in gelus)
    assert {g[1:] for g in gelus} == {("gelu_stream", 3, True, "gelu_done")}
    assert matmuls and set(matmuls) == {2}


@pytest.mark.parametrize(
    ("rule", "code"),
    [
        ({"pattern": "pd_op.softmax", "attrs": {"axis": True}}, "E055"),  # Paddle segfaulted on it
        ({"pattern": "pd_op.send_v2", "attrs": {"use_calc_stream": 1.0}}, "E056"),  # no set_float_attr
        ({"pattern": "*", "stream": "s{op_role:>3000000000}"}, "E057"),  # bad_alloc
    ],
)
def test_a_hand_edited_rule_is_refused_before_paddle_sees_it(rule, code):
    """A plan module's STREAM_RULES can be edited after `check`: the runtime checks them again."""
    from ppdsl.runtime.streams import apply_rules

    with pytest.raises(DiagnosticError) as err:
        apply_rules([], [rule])
    assert [d.code for d in err.value.diagnostics] == [code]


@pytest.mark.e2e
def test_checkpoint_and_resume_are_bit_identical(tmp_path):
    from ppdsl.runtime.train import train

    exp = expand(_lib("zbh1"), 2, 4)
    straight = _trainer(exp, optimizer="adam")
    first = train(straight, 4)

    half = _trainer(exp, optimizer="adam")
    train(half, 2, save_dir=tmp_path, save_every=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.npz"]  # no temporary files left
    resumed = _trainer(exp, optimizer="adam")
    assert resumed.resume(tmp_path) == 2
    second = train(resumed, 4)  # to step 4 in all
    for name, value in first.parameters.items():
        assert np.array_equal(value, second.parameters[name]), name
    assert all(np.array_equal(a, b) for a, b in zip(first.losses[2:], second.losses, strict=True))


LOSS_JOB = """
schedule "LossJob"
job loss : forward ops "pd_op.mean", "pd_op.cross_entropy_with_softmax" after forward
order {
    forward * (pp - rank)
    loss * (pp - rank)
    repeat microbatches - pp + rank { backward forward loss }
    backward * (pp - rank)
    optimizer
}
"""


def test_a_job_type_of_the_users_that_holds_the_loss_trains_like_the_full_batch_run():
    # the loss is published by a `shadow_output` of the forward region: it must run with the user's job that
    # computes the loss, not in `forward`, which runs before it (this crashed Paddle's executor, SIGSEGV)
    exp = expand(resolve_text(LOSS_JOB, "loss_job.sched"), 2, 4)
    assert {t for t, _, _ in exp.job_tuples(1)} >= {"loss"}
    assert_trains_like_the_full_batch_run(exp, 2)


def test_a_job_that_reads_a_later_jobs_value_is_refused_before_anything_runs():
    head = LOSS_JOB.replace(
        'loss : forward ops "pd_op.mean", "pd_op.cross_entropy_with_softmax"', 'loss : forward ops "pd_op.matmul"'
    )
    with pytest.raises(DiagnosticError) as err:
        _trainer(expand(resolve_text(head, "head_job.sched"), 2, 4))
    (diagnostic,) = err.value.diagnostics
    assert diagnostic.code == "E043"
    assert "job `forward` of stage 0 reads the result of `pd_op.matmul`, which job `loss` computes after it" in (
        diagnostic.message
    )
    assert "rank 0, micro-batch 0" in diagnostic.message


def test_split_backward_needs_a_splittable_model():
    from ppdsl.runtime.builtin_models import load_model

    sys.path.insert(0, str(ROOT))
    with pytest.raises(DiagnosticError) as err:
        _trainer(expand(_lib("zbh1"), 2, 2), model=load_model("tests.models.elementwise:build"))
    assert [d.code for d in err.value.diagnostics] == ["E034"]
    # the same model trains with a schedule that does not split backwards
    from ppdsl.runtime.train import train

    assert (
        len(train(_trainer(expand(_lib("1f1b"), 2, 2), model=load_model("tests.models.elementwise:build")), 1).losses)
        == 1
    )


runner = CliRunner()


def _run(*args):
    result = runner.invoke(app, ["run", *args])
    assert "Traceback" not in result.output
    return result


def test_cli_run_user_model_and_summary_json(tmp_path, in_repo, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    summary = tmp_path / "s.json"
    result = _run(
        "zbv",
        "--pp",
        "2",
        "-m",
        "4",
        "--vpp",
        "2",
        "--steps",
        "3",
        "--batch-size",
        "8",
        "--model",
        "tests.models.user_mlp:build",
        "--summary-json",
        str(summary),
        "--optimizer",
        "sgd",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text())
    assert (data["schedule"], data["pp"], data["vpp"], data["microbatches"]) == ("ZBV", 2, 2, 4)
    assert len(data["losses"]) == 3 and all(len(step) == 4 for step in data["losses"])
    assert len(data["step_seconds"]) == 3
    assert set(data["parameters"]) == {"user.w0", "user.w1", "user.w2", "user.w3"}
    assert all(v["sum_sq"] > 0 for v in data["parameters"].values())


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (["1f1b", "--pp", "4", "-m", "2"], 1, "error[S100]"),
        (["tests/ui/deadlock.sched", "--pp", "2", "-m", "4"], 1, "error[S105]"),
        (
            ["1f1b", "--pp", "2", "-m", "4", "--batch-size", "10"],
            2,
            "batch size 10 does not split into 4 micro-batches",
        ),
        (["1f1b", "--pp", "2", "-m", "2", "--model", "no_such_module:build"], 2, "cannot import model module"),
        (["1f1b", "--pp", "2", "-m", "2", "--model", "tests.models.user_mlp:nope"], 2, "has no function `nope`"),
        (["zbh1", "--pp", "2", "-m", "2", "--model", "tests.models.elementwise:build"], 2, "cannot be split"),
        (["1f1b", "--pp", "2", "-m", "2", "--resume", "no/such/dir"], 2, "cannot resume"),
    ],
)
def test_cli_run_bad_input(args, code, fragment, in_repo, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    result = _run(*args, "--steps", "1")
    assert result.exit_code == code, result.output
    assert fragment in result.stderr


def test_cli_run_without_paddle_says_how_to_install(tmp_path):
    """A process where `import paddle` fails: the message names the install command, no traceback."""
    code = (
        "import sys; sys.modules['paddle'] = None\n"
        "from ppdsl.cli import main; sys.argv = ['ppdsl', 'run', '1f1b', '--pp', '2', '-m', '2', '--steps', '1']\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "PaddlePaddle is not available" in proc.stderr and "pip install 'ppdsl[paddle]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_default_run_trains(in_repo):
    result = _run("--steps", "3")
    assert result.exit_code == 0, result.output
    assert "1F1B" in result.stdout and "132 jobs per step" in result.stdout
    assert "simulated bubble" in result.stdout
