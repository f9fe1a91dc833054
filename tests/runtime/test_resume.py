"""Resume finishes the job: `--steps` is the total, and rerunning the same command with `--resume` ends at that step
with the parameters and losses of the uninterrupted run. A checkpoint that cannot continue this run is refused,
saying why: of another run (schedule text, sizes, model, batch, --lr, --optimizer, --seed), without metadata, holding
NaN, past --steps, its ranks at different steps; a second run into a locked --save-dir is refused; a run whose
parameters go NaN stops, naming the step, and saves nothing of it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

pytestmark = pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="paddlepaddle is not installed")

runner = CliRunner()
COMMAND = ["run", "zbh1", "--pp", "2", "-m", "4", "--batch-size", "8", "--steps", "5", "--model", "tiny_mlp"]


def _run(*args):
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output
    return result


def _steps(n):
    return [*COMMAND[:-4], "--steps", str(n), *COMMAND[-2:]]


@pytest.mark.e2e
def test_rerunning_the_same_command_with_resume_ends_where_the_uninterrupted_run_ends(tmp_path):
    straight = _run(*COMMAND, "--summary-json", str(tmp_path / "straight.json"))
    assert straight.exit_code == 0, straight.output
    ckpt = tmp_path / "ckpt"
    # an interrupted run: it got to step 3 of 5
    assert _run(*_steps(3), "--save-dir", str(ckpt), "--save-every", "2").exit_code == 0
    rerun = _run(
        *COMMAND, "--save-dir", str(ckpt), "--resume", str(ckpt), "--summary-json", str(tmp_path / "rerun.json")
    )
    assert rerun.exit_code == 0, rerun.output
    assert "at step 3 of 5: 2 to go" in rerun.stdout, rerun.stdout
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("straight", "rerun"))
    assert (b["first_step"], len(b["losses"])) == (3, 2)
    assert a["parameters"] == b["parameters"]  # checksums, bit for bit
    assert a["losses"][3:] == b["losses"]
    # the job is done: the same command again trains nothing
    again = _run(*COMMAND, "--resume", str(ckpt))
    assert again.exit_code == 0 and "at step 5 of 5: 0 to go" in again.stdout


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A checkpoint of COMMAND after 1 step (tests copy it before they change it)."""
    directory = tmp_path_factory.mktemp("saved")
    assert _run(*_steps(1), "--save-dir", str(directory)).exit_code == 0
    return directory / "checkpoint.npz"


def _rewritten(saved: Path, tmp_path: Path, meta=None, arrays=None, drop=()) -> Path:
    """A copy of the checkpoint in tmp_path/ckpt with metadata keys and arrays replaced, arrays (or `__meta__`) dropped."""
    with np.load(saved) as data:
        contents = {k: data[k] for k in data.files}
    contents["__meta__"] = np.array(json.dumps({**json.loads(str(contents["__meta__"])), **(meta or {})}))
    contents.update(arrays or {})
    for name in drop:
        del contents[name]
    directory = tmp_path / "ckpt"
    directory.mkdir()
    np.savez(directory / "checkpoint.npz", **contents)
    return directory


def _refused(*args):
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert "jobs per step" not in result.stdout, "refused only after the trainer was built"
    return result.stderr


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (["--schedule", "1f1b"], "schedule `ZBH1` (this run: `1F1B`)"),
        (["-m", "2"], "microbatches `4` (this run: `2`)"),
        (["--pp", "4"], "pp `2` (this run: `4`)"),
        (["--model", "builtin"], "model `tiny_mlp` (this run: `gpt`)"),
        (["--batch-size", "16"], "batch_size `8` (this run: `16`)"),
        # these three resumed silently: the learning rate even came from the checkpoint
        (["--seed", "1"], "seed `0` (this run: `1`)"),
        (["--lr", "0.02"], "lr `0.01` (this run: `0.02`)"),
        (["--optimizer", "sgd"], "optimizer `adam` (this run: `sgd`)"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused(saved, change, fragment):
    args = list(COMMAND)
    if change[0] == "--schedule":
        args[1] = change[1]
    elif change[0] in args:
        i = args.index(change[0])
        args[i + 1] = change[1]
    else:
        args += change
    stderr = _refused(*args, "--resume", str(saved.parent))
    assert "error[E037]" in stderr and fragment in stderr, stderr


def test_a_checkpoint_restores_state_never_the_learning_rate_flag(saved, tmp_path):
    """Before: a checkpoint's `learning_rate` array (0 here) was restored over `--lr`: nothing trained, exit 0, and
    the summary said lr 0.01. The identity check compares metadata only; the array is the flag's, not state."""
    with np.load(saved) as data:
        names = sorted({*data.files, "learning_rate"} - {"__meta__"})
    listed = {"arrays": len(names), "arrays_sha256": hashlib.sha256("\n".join(names).encode()).hexdigest()}
    # as an older ppdsl wrote it, the learning rate among the arrays (and listed in the metadata), but 0
    tampered = _rewritten(saved, tmp_path, meta=listed, arrays={"learning_rate": np.array(0.0, dtype=np.float32)})
    reports = {}
    for name, directory in (("plain", saved.parent), ("tampered", tampered)):
        summary = tmp_path / f"{name}.json"
        result = _run(*_steps(3), "--resume", str(directory), "--summary-json", str(summary))
        assert result.exit_code == 0, result.output
        reports[name] = json.loads(summary.read_text())
    plain, tampered_run = reports["plain"], reports["tampered"]
    assert tampered_run["lr"] == plain["lr"] == 0.01
    with np.load(saved) as data:
        head_at_step_1 = float(data["head"].sum(dtype=np.float64))
    assert tampered_run["parameters"]["head"]["sum"] != pytest.approx(head_at_step_1, rel=1e-9, abs=0), "nothing moved"
    assert tampered_run["parameters"] == plain["parameters"]  # trained at --lr, bit for bit
    assert tampered_run["losses"] == plain["losses"]


def test_the_summary_states_the_learning_rate_the_run_trained_with(saved, tmp_path, monkeypatch):
    """The summary's `lr` is read from the optimizer's variable, not copied from the flag. Before, with the learning
    rate restored from a file again (as before FLAG_STATE), a 0 there trained nothing and the summary said 0.01."""
    from ppdsl.runtime import checkpoint

    with np.load(saved) as data:
        names = sorted({*data.files, "learning_rate"} - {"__meta__"})
    listed = {"arrays": len(names), "arrays_sha256": hashlib.sha256("\n".join(names).encode()).hexdigest()}
    tampered = _rewritten(saved, tmp_path, meta=listed, arrays={"learning_rate": np.array(0.0, dtype=np.float32)})
    monkeypatch.setattr(checkpoint, "FLAG_STATE", frozenset())  # a restore that sets the learning rate again
    summary = tmp_path / "summary.json"
    result = _run(*_steps(3), "--resume", str(tampered), "--summary-json", str(summary))
    assert result.exit_code == 0, result.output
    assert json.loads(summary.read_text())["lr"] == 0.0


def test_a_checkpoint_of_an_edited_schedule_is_refused_naming_both_fingerprints(saved, tmp_path):
    """Same name, same sizes, but another text: the job order, and so the sums, may differ (E090)."""
    from ppdsl.language.library import library_dir
    from ppdsl.plan.spec import source_fingerprint

    text = (library_dir() / "zbh1.sched").read_text()
    edited = tmp_path / "zbh1.sched"
    edited.write_text(text + "# edited\n")
    stderr = _refused("run", str(edited), *COMMAND[2:], "--resume", str(saved.parent))
    was, now = source_fingerprint([text])[:16], source_fingerprint([text + "# edited\n"])[:16]
    assert "error[E090]" in stderr and f"checkpoint `{saved}` was saved under a schedule" in stderr, stderr
    assert f"hashes to {was}, but `ZBH1` now hashes to {now}" in stderr, stderr


def test_a_checkpoint_with_an_older_ppdsls_fingerprint_is_refused_as_unknown_not_as_edited(saved, tmp_path):
    """Before the plan specification the fingerprint was 16 hex digits of another hash: nothing says the text
    changed, only that it cannot be compared."""
    directory = _rewritten(saved, tmp_path, meta={"schedule_fingerprint": "0123456789abcdef"})
    stderr = _refused(*COMMAND, "--resume", str(directory))
    assert "error[E037]" in stderr and "by an older ppdsl's fingerprint" in stderr, stderr


def test_a_checkpoint_holding_nan_is_refused(saved, tmp_path):
    with np.load(saved) as data:
        head = data["head"].copy()
    head[0, 0] = np.nan
    ckpt = _rewritten(saved, tmp_path, arrays={"head": head})
    stderr = _refused(*COMMAND, "--resume", str(ckpt))
    assert f"error[E060]: checkpoint `{ckpt / 'checkpoint.npz'}` holds NaN or infinite values in `head`" in stderr


def test_a_checkpoint_without_metadata_is_refused(saved, tmp_path):
    """It used to restart at step 0 with the saved weights."""
    ckpt = _rewritten(saved, tmp_path, drop=["__meta__"])
    stderr = _refused(*COMMAND, "--resume", str(ckpt))
    assert f"error[E061]: checkpoint `{ckpt / 'checkpoint.npz'}` has no metadata" in stderr, stderr


@pytest.mark.parametrize("step", [10, 10**9])
def test_a_checkpoint_past_steps_is_refused(saved, tmp_path, step):
    """It printed `at step 10 of 5: 0 to go`, exit 0."""
    ckpt = _rewritten(saved, tmp_path, meta={"step": step})
    stderr = _refused(*COMMAND, "--resume", str(ckpt))
    assert f"is at step {step}, past the end of this run (--steps 5)" in stderr, stderr
    assert f"give --steps {step} or more" in stderr


def test_a_second_run_into_a_locked_save_dir_is_refused(tmp_path):
    from ppdsl.runtime.checkpoint import lock_save_dir

    with lock_save_dir(tmp_path / "ckpt"):  # as a run still training holds it
        stderr = _refused(*COMMAND, "--save-dir", str(tmp_path / "ckpt"))
    assert f"error[E063]: another run is saving checkpoints into `{tmp_path / 'ckpt'}`" in stderr, stderr
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [".ppdsl.lock"]


def test_a_diverging_run_stops_naming_the_step_and_the_parameter_and_saves_nothing_of_it(tmp_path):
    """With a learning rate this large the parameters overflow within two steps; the loss Paddle computes from NaN
    logits is a finite ln(64), so only the parameters show it. The run used to go on to exit 0."""
    ckpt, summary = tmp_path / "ckpt", tmp_path / "summary.json"
    result = _run(
        *_steps(4),
        "--optimizer",
        "sgd",
        "--lr",
        "1e30",
        "--save-dir",
        str(ckpt),
        "--save-every",
        "1",
        "--summary-json",
        str(summary),
    )
    assert result.exit_code == 2, result.output
    found = re.search(
        r"error\[E060\]: training diverged at step (\d) of 4: parameter `[\w.@]+` holds NaN", result.stderr
    )
    assert found, result.stderr
    assert not summary.exists()
    from ppdsl.runtime.checkpoint import read_checkpoint

    saved = read_checkpoint(ckpt / "checkpoint.npz")  # whole and finite, of the last good step
    assert saved.step == int(found[1]) - 1


def test_a_copied_checkpoint_directory_resumes(saved, tmp_path):
    """The lock file a run leaves in its --save-dir does not stop a later run."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(saved.parent, ckpt)
    result = _run(*_steps(1), "--resume", str(ckpt), "--save-dir", str(ckpt))
    assert result.exit_code == 0 and "at step 1 of 1: 0 to go" in result.stdout, result.output


@pytest.mark.e2e
def test_ranks_resume_from_the_newest_step_all_of_them_saved_or_are_refused_naming_their_steps(saved, tmp_path):
    """A kill -9 left ranks' checkpoints at steps 27 and 26, and they were resumed out of step. Each rank now keeps its
    files of its two newest steps, and a resume takes the newest step every rank has. The ranks' files here are
    made from the one-process checkpoint (the whole state, as a rank's file holds it), at the steps a kill leaves."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    with np.load(saved) as data:
        state = {k: data[k] for k in data.files if k != "__meta__"}
        meta = json.loads(str(data["__meta__"]))

    def rank_file(step, rank):
        text = json.dumps({**meta, "step": step, "rank": rank})
        np.savez(ckpt / f"checkpoint.step{step}.rank{rank}.npz", __meta__=np.array(text), **state)

    cluster = [*COMMAND[:-4], "--nproc-per-node", "2", "--run-dir", str(tmp_path / "run"), "--model", "tiny_mlp"]
    # killed while saving: rank 0 got to step 2, rank 1 was still at step 1, and each kept only its newest
    rank_file(2, 0)
    rank_file(1, 1)
    stderr = _refused(*cluster, "--steps", "3", "--resume", str(ckpt))
    assert f"error[E062]: `{ckpt}` has no step that every rank saved (rank 0: step 2; rank 1: step 1)" in stderr

    # the same with rank 0's file of step 1 kept: both continue from step 1, and then keep steps 2 and 3 alone
    rank_file(1, 0)
    result = _run(*cluster, "--steps", "3", "--resume", str(ckpt), "--save-dir", str(ckpt), "--save-every", "1")
    assert result.exit_code == 0, result.output + result.stderr
    assert f"resumed from `{ckpt}` at step 1 of 3: 2 to go" in result.stdout
    names = [f"checkpoint.step{s}.rank{r}.npz" for s in (2, 3) for r in (0, 1)]
    assert sorted(p.name for p in ckpt.iterdir()) == sorted([".ppdsl.lock", *names])
    reports = [json.loads((tmp_path / "run" / "launch-1" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [len(rep["step_seconds"]) for rep in reports] == [2, 2]  # steps 2 and 3 ran
    # the summary's lr is what the ranks' optimizers trained with, as each read it from its scope (not the flag)
    assert {rep["learning_rate"] for rep in reports} == {0.01}


def test_a_cluster_states_a_learning_rate_only_when_its_ranks_agree():
    """The multi-process summary's `lr` comes from the ranks' reports: one value, or none at all when they differ
    (a rank restored from elsewhere): then the summary falls back to the flag, as a one-process run without an
    optimizer variable does."""
    from ppdsl.runtime.launch import ClusterResult

    def result(*rates):
        return ClusterResult([], [], {}, {}, [{"rank": r, "learning_rate": x} for r, x in enumerate(rates)])

    assert result(0.01, 0.01).learning_rate == 0.01
    assert result(0.0, 0.0).learning_rate == 0.0
    assert result(0.01, 0.0).learning_rate is None
