"""Through the command line, no output destroys a file: not an input of the command (its schedule, an include,
a cost file, a CSV, a profile), not a device, not the user's files in a run directory; and no input hangs or
exhausts the memory (a FIFO, /dev/zero)."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()
CSV = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"
COSTS = json.dumps({"costs": {"forward": 1.0, "backward": 2.0}})
GPIPE = "order { forward * microbatches  backward * microbatches  optimizer }\n"


def invoke(*args: str, seconds: float = 60):
    """The command's result; a command still running after `seconds` fails the test instead of hanging it."""
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("result", runner.invoke(app, list(args))), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"`ppdsl {' '.join(args)}` still running after {seconds} s"
    result = box["result"]
    assert "Traceback" not in result.output + result.stderr, result.stderr
    return result


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    """A directory holding one input of every kind: a schedule including another, a CSV, a cost file, a trace
    (also as a .png name, which `plot --measured` reads)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.sched").write_text(GPIPE)
    (tmp_path / "main.sched").write_text('include "parts.sched"\n')
    (tmp_path / "parts.sched").write_text(GPIPE)
    (tmp_path / "s.csv").write_text(CSV)
    (tmp_path / "c.json").write_text(COSTS)
    assert runner.invoke(app, ["trace", "1f1b", "--pp", "2", "-m", "2", "-o", "p.json"]).exit_code == 0
    (tmp_path / "t.png").write_bytes((tmp_path / "p.json").read_bytes())
    return tmp_path


OVER_INPUT = [
    ("compile", ["compile", "x.sched", "-o", "x.sched"], "x.sched"),
    ("compile-include", ["compile", "main.sched", "-o", "parts.sched"], "parts.sched"),
    ("expand", ["expand", "x.sched", "--pp", "2", "-m", "2", "-o", "x.sched"], "x.sched"),
    ("trace", ["trace", "x.sched", "--pp", "2", "-m", "2", "-o", "x.sched"], "x.sched"),
    ("trace-costs", ["trace", "1f1b", "--pp", "2", "-m", "2", "--costs", "c.json", "-o", "c.json"], "c.json"),
    ("import", ["import", "s.csv", "-o", "s.csv"], "s.csv"),
    ("calibrate", ["calibrate", "p.json", "-o", "p.json"], "p.json"),
    ("plot-measured", ["plot", "1f1b", "--pp", "2", "-m", "2", "--measured", "t.png", "-o", "t.png"], "t.png"),
    (
        "synth-costs",
        ["synth", "--pp", "2", "-m", "4", "--costs", "c.json", "--time-limit", "1", "-o", "c.json"],
        "c.json",
    ),
    ("run-summary", ["run", "x.sched", "--pp", "2", "-m", "2", "--summary-json", "x.sched"], "x.sched"),
    ("run-profile", ["run", "main.sched", "--pp", "2", "-m", "2", "--profile", "parts.sched"], "parts.sched"),
]


@pytest.mark.parametrize(("name", "args", "victim"), OVER_INPUT, ids=[c[0] for c in OVER_INPUT])
def test_an_output_over_an_input_is_refused_and_the_input_kept(name, args, victim, inputs):
    before = {p.name: p.read_bytes() for p in inputs.iterdir()}
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert f"error[E050]: the output `{victim}` is the input `{victim}`" in result.stderr
    assert {p.name: p.read_bytes() for p in inputs.iterdir()} == before, "a file changed or appeared"


def test_an_output_through_a_symlink_to_the_input_is_refused(inputs):
    (inputs / "alias.py").symlink_to("x.sched")
    result = invoke("compile", "x.sched", "-o", "alias.py")
    assert result.exit_code == 2
    assert "error[E050]: the output `alias.py` is the input `x.sched` (the same file by another name)" in result.stderr
    assert (inputs / "x.sched").read_text() == GPIPE and (inputs / "alias.py").is_symlink()


def char_device(tmp_path: Path, name: str) -> str:
    """/dev/null or /dev/full made in tmp_path where allowed (as root, a wrong writer would turn the real one into a
    regular file and break the machine), else the real one."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, {"null": 3, "full": 7}[name]))
        with open(node, "wb"):  # a file system mounted nodev refuses to open it
            pass
        return str(node)
    except OSError:
        if node.exists():
            node.unlink()
        return f"/dev/{name}"


DEVICE_OUTPUTS = [
    ("compile", ["compile", "1f1b"]),
    ("expand", ["expand", "1f1b", "--pp", "2", "-m", "2"]),
    ("trace", ["trace", "1f1b", "--pp", "2", "-m", "2"]),
    ("import", ["import", "s.csv"]),
    ("calibrate", ["calibrate", "p.json"]),
    ("synth", ["synth", "--pp", "2", "-m", "4", "--time-limit", "1", "--no-library"]),
]


@pytest.mark.parametrize(("name", "args"), DEVICE_OUTPUTS, ids=[c[0] for c in DEVICE_OUTPUTS])
def test_a_device_output_is_written_through_and_stays_a_device(name, args, inputs):
    device = char_device(inputs, "null")
    result = invoke(*args, "-o", device)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISCHR(os.stat(device).st_mode), f"{device} is no longer a character device"


def test_dev_full_is_a_clean_error(inputs):
    full = char_device(inputs, "full")
    result = invoke("compile", "1f1b", "-o", full)
    assert result.exit_code == 2
    assert f"error[E053]: cannot write `{full}`: No space left on device" in result.stderr
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_a_directory_output_is_a_clean_error(inputs):
    (inputs / "out").mkdir()
    result = invoke("expand", "1f1b", "--pp", "2", "-m", "2", "-o", "out")
    assert result.exit_code == 2 and "error[E053]: cannot write `out`: it is a directory" in result.stderr


def test_an_unwritable_summary_is_refused_before_training(inputs):
    """`--summary-json` into a missing directory fails in a second, not after the run (no paddle is needed)."""
    result = invoke("run", "x.sched", "--pp", "2", "-m", "2", "--summary-json", "no/such/dir/s.json", seconds=10)
    assert (
        result.exit_code == 2
        and "error[E000]: cannot write --summary-json `no/such/dir/s.json`: `no/such/dir` does not exist"
        in result.stderr
    )
    assert "training" not in result.stdout


# ---------------------------------------------------------------- inputs that are not regular files


def test_a_fifo_schedule_is_refused_at_once(inputs):
    os.mkfifo(inputs / "pipe.sched")
    result = invoke("check", "pipe.sched", "--pp", "2", "-m", "2", seconds=10)
    assert result.exit_code == 2 and "error[E051]: cannot read `pipe.sched`: a FIFO" in result.stderr


def test_an_included_fifo_or_device_is_refused_at_once(inputs):
    os.mkfifo(inputs / "pipe.sched")
    (inputs / "a.sched").write_text('include "pipe.sched"\n' + GPIPE)
    (inputs / "b.sched").write_text('include "/dev/zero"\n' + GPIPE)
    result = invoke("check", "a.sched", "--pp", "2", "-m", "2", seconds=10)
    assert result.exit_code == 2 and "error[E067]: cannot include `pipe.sched`: it is a FIFO" in result.stderr
    assert "a.sched:1" in result.stderr
    result = invoke("check", "b.sched", "--pp", "2", "-m", "2", seconds=10)
    assert (
        result.exit_code == 2 and "error[E067]: cannot include `/dev/zero`: it is not a `.sched` file" in result.stderr
    )


@pytest.mark.parametrize(
    "args",
    [
        ["import", "/dev/zero"],
        ["calibrate", "/dev/zero", "-o", "-"],
        ["check", "1f1b", "--pp", "2", "-m", "2", "--costs", "/dev/zero"],
    ],
    ids=["import", "calibrate", "costs"],
)
def test_dev_zero_as_any_input_is_refused_at_once(args, inputs):
    result = invoke(*args, seconds=10)
    assert result.exit_code == 2 and "`/dev/zero`: a character device, not a regular file" in result.stderr


def test_a_csv_with_a_byte_order_mark_imports(inputs):
    (inputs / "bom.csv").write_bytes(b"\xef\xbb\xbf" + CSV.encode())
    result = invoke("import", "bom.csv", "-o", "bom.sched")
    assert result.exit_code == 0, result.stderr
    assert invoke("check", "bom.sched", "--pp", "2", "-m", "2").exit_code == 0


# ---------------------------------------------------------------- the run directory


USERS = {"ranking.json": b'{"mine": 1}\n', "launch.log": b"my log\n", "spec.json": b"my spec\n", "rank0.npz": b"x"}


def test_a_dry_run_names_a_new_launch_directory_and_touches_nothing(inputs):
    run_dir = inputs / "run"
    run_dir.mkdir()
    for name, data in USERS.items():
        (run_dir / name).write_bytes(data)
    (run_dir / "launch-1").mkdir()
    result = invoke("run", "1f1b", "--pp", "2", "-m", "2", "--nproc-per-node", "2", "--run-dir", "run", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert f"{Path('run') / 'launch-2' / 'spec.json'}" in result.stdout
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == USERS
    assert sorted(p.name for p in run_dir.iterdir()) == sorted([*USERS, "launch-1"])


def test_a_launch_keeps_the_users_files_in_the_run_directory(inputs):
    """A real two-process run: every file it writes is in run/launch-1, and the user's `ranking.json`,
    `launch.log`, `spec.json`, `rank0.npz` are byte-identical afterwards."""
    pytest.importorskip("paddle")
    run_dir = inputs / "run"
    run_dir.mkdir()
    for name, data in USERS.items():
        (run_dir / name).write_bytes(data)
    result = invoke(
        "run", "1f1b", "--pp", "2", "-m", "2", "--steps", "1", "--batch-size", "4",
        "--nproc-per-node", "2", "--run-dir", "run", "--summary-json", "summary.json", seconds=120,
    )  # fmt: skip
    assert result.exit_code == 0, result.output + result.stderr
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == USERS
    launch = run_dir / "launch-1"
    assert {"spec.json", "launch.log", "rank0.json", "rank1.json", "rank0.npz", "rank1.npz"} <= {
        p.name for p in launch.iterdir()
    }
    assert json.loads((launch / "spec.json").read_text())["launch_dir"] == str(launch.resolve())
    assert json.loads((inputs / "summary.json").read_text())["losses"]


OTHER = 12345  # a uid with no account: another local user (tests run as root, so they can make its files)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")


@as_root
def test_compile_without_o_does_not_follow_a_planted_symlink(inputs):
    """`ppdsl compile 1f1b` as root where another user planted `plan_1f1b.py -> precious.conf`: refused (E058),
    the root-owned target untouched."""
    precious = inputs / "precious.conf"
    precious.write_text("root's own\n")
    planted = inputs / "plan_1f1b.py"
    planted.symlink_to(precious)
    os.lchown(planted, OTHER, OTHER)
    result = invoke("compile", "1f1b")
    assert result.exit_code == 2 and "error[E058]" in result.stderr, result.stderr
    assert precious.read_text() == "root's own\n" and planted.is_symlink()


@as_root
def test_compile_in_another_users_directory_is_refused(inputs):
    os.chown(inputs, OTHER, OTHER)
    result = invoke("compile", "1f1b")
    assert result.exit_code == 2 and "error[E054]" in result.stderr, result.stderr
    assert f"is owned by uid {OTHER}" in result.stderr
    assert not (inputs / "plan_1f1b.py").exists()


@as_root
@pytest.mark.parametrize("flag", ["--run-dir", "--save-dir"])
def test_a_run_or_save_directory_another_user_can_write_is_refused_before_training(inputs, flag):
    """The ranks would read a `spec.json` that user can swap, and a resume the checkpoints they planted."""
    theirs = inputs / "theirs"
    theirs.mkdir()
    theirs.chmod(0o777)
    args = ["run", "1f1b", "--pp", "2", "-m", "2", "--steps", "1", flag, "theirs"]
    if flag == "--run-dir":
        args += ["--nproc-per-node", "2"]
    result = invoke(*args)
    assert result.exit_code == 2 and "error[E054]" in result.stderr, result.stderr
    assert f"cannot use {flag} `theirs`" in result.stderr and "can be written by every user" in result.stderr
    assert os.listdir(theirs) == []


@as_root
def test_a_planted_checkpoint_symlink_in_the_save_directory_is_not_followed(tmp_path):
    """Another user's `checkpoint.npz` link in the save directory (planted before it was made safe) is never
    followed (E058), in a sticky directory or not, whatever `fs.protected_symlinks` says."""
    np = pytest.importorskip("numpy")
    from ppdsl.common.diagnostics import DiagnosticError
    from ppdsl.runtime.checkpoint import write_checkpoint

    save_dir = tmp_path / "ckpt"
    save_dir.mkdir()
    precious = tmp_path / "precious.conf"
    precious.write_text("root's own\n")
    planted = save_dir / "checkpoint.npz"
    planted.symlink_to(precious)
    os.lchown(planted, OTHER, OTHER)
    with pytest.raises(DiagnosticError) as err:
        write_checkpoint(planted, 1, {}, {"w": np.zeros(2)})
    assert [d.code for d in err.value.diagnostics] == ["E058"]
    assert precious.read_text() == "root's own\n"
