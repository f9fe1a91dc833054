"""Resume finishes the job: `--steps` is the total, and rerunning the same command with `--resume` ends at that step
with the parameters and losses of the uninterrupted run. A checkpoint of another run is refused."""

from __future__ import annotations

import importlib.util
import json

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


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (["--schedule", "1f1b"], "schedule `ZBH1` (this run: `1F1B`)"),
        (["-m", "2"], "microbatches `4` (this run: `2`)"),
        (["--model", "builtin"], "model `tiny_mlp` (this run: `gpt`)"),
        (["--batch-size", "16"], "batch_size `8` (this run: `16`)"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused(tmp_path, change, fragment):
    ckpt = tmp_path / "ckpt"
    assert _run(*_steps(1), "--save-dir", str(ckpt)).exit_code == 0
    args = list(COMMAND)
    if change[0] == "--schedule":
        args[1] = change[1]
    else:
        i = args.index(change[0])
        args[i + 1] = change[1]
    result = _run(*args, "--resume", str(ckpt))
    assert result.exit_code == 2
    assert "error[E037]" in result.stderr and fragment in result.stderr, result.stderr
