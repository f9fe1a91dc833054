"""`ppdsl fmt`: rewriting in place, `--check`, `--diff`, stdin, and bad inputs (each refused, the rest formatted)."""

from __future__ import annotations

import os
import stat

from typer.testing import CliRunner

from ppdsl.cli import app

from paths import LIBRARY

runner = CliRunner()
UGLY = "order{forward*microbatches  backward*microbatches\noptimizer}"
PRETTY = "order {\n    forward * microbatches backward * microbatches\n    optimizer\n}\n"


def fmt(*args: str, stdin: str | None = None):
    return runner.invoke(app, ["fmt", *args], input=stdin)


def test_files_are_rewritten_in_place_keeping_their_mode(tmp_path):
    path = tmp_path / "a.sched"
    path.write_text(UGLY)
    path.chmod(0o640)
    result = fmt(str(path))
    assert result.exit_code == 0, result.output
    assert path.read_text() == PRETTY
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "1 file reformatted, 0 files left unchanged" in result.stderr
    again = fmt(str(path))
    assert again.exit_code == 0 and "0 files reformatted, 1 file left unchanged" in again.stderr


def test_check_lists_what_would_change_and_writes_nothing(tmp_path):
    (tmp_path / "ugly.sched").write_text(UGLY)
    (tmp_path / "pretty.sched").write_text(PRETTY)
    result = fmt("--check", str(tmp_path))
    assert result.exit_code == 1
    assert result.stdout == f"would reformat {tmp_path / 'ugly.sched'}\n"
    assert (tmp_path / "ugly.sched").read_text() == UGLY
    assert fmt("--check", str(tmp_path / "pretty.sched")).exit_code == 0


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path):
    path = tmp_path / "a.sched"
    path.write_text(UGLY)
    result = fmt("--diff", str(path))
    assert result.exit_code == 1
    assert result.stdout.startswith(f"--- {path}\n+++ {path} (formatted)\n@@ ")
    assert "-order{forward*microbatches  backward*microbatches\n" in result.stdout
    assert "+    optimizer\n" in result.stdout
    assert path.read_text() == UGLY


def test_stdin_is_formatted_to_stdout():
    result = fmt("-", stdin=UGLY)
    assert result.exit_code == 0 and result.stdout == PRETTY


def test_a_file_that_does_not_parse_is_reported_and_the_others_are_formatted(tmp_path):
    (tmp_path / "bad.sched").write_text("order { forward ")
    (tmp_path / "good.sched").write_text(UGLY)
    result = fmt(str(tmp_path))
    assert result.exit_code == 2
    assert "error[E001]: the file ends inside a block" in result.stderr
    assert "Traceback" not in result.output
    assert "1 file reformatted, 0 files left unchanged, 1 file refused" in result.stderr
    assert (tmp_path / "good.sched").read_text() == PRETTY
    assert (tmp_path / "bad.sched").read_text() == "order { forward "


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "pipe.sched"
    os.mkfifo(fifo)
    result = fmt(str(fifo))  # opening it to read would wait for a writer for ever
    assert result.exit_code == 2
    assert "error[E051]" in result.stderr and "FIFO" in result.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_paths_without_schedules_are_an_error(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "a.sched").write_text(UGLY)
    result = fmt(str(tmp_path))
    assert result.exit_code == 2
    assert f"error[E096]: no `.sched` file in `{tmp_path}`" in result.stderr
    assert (tmp_path / ".hidden" / "a.sched").read_text() == UGLY


def test_the_library_is_formatted():
    """CI runs the same: `ppdsl fmt --check schedules`."""
    result = fmt("--check", str(LIBRARY))
    assert result.exit_code == 0, result.stdout
    assert f"{len(list(LIBRARY.glob('*.sched')))} files left unchanged" in result.stderr


def test_a_symlink_out_of_the_tree_is_reported_and_never_written(tmp_path):
    """`ppdsl fmt DIR` writes under DIR only: a `.sched` symlink leading out of it (another user's, say) is
    refused with E059, and its target is neither rewritten nor given another owner."""
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "precious.sched"
    target.write_text(UGLY)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "own.sched").write_text(UGLY)
    (tree / "link.sched").symlink_to(target)
    if os.geteuid() == 0:
        os.chown(target, 12345, 12345)
    before = target.stat()
    result = fmt(str(tree))
    assert result.exit_code == 2, result.output
    assert "error[E059]" in result.stderr and f"`{tree / 'link.sched'}`" in result.stderr
    assert "1 file reformatted, 0 files left unchanged, 1 file refused" in result.stderr
    assert target.read_text() == UGLY and (target.stat().st_uid, target.stat().st_ino) == (before.st_uid, before.st_ino)
    assert (tree / "own.sched").read_text() == PRETTY and (tree / "link.sched").is_symlink()


def test_a_symlink_within_the_tree_is_skipped_and_its_file_formatted_once(tmp_path):
    (tmp_path / "real.sched").write_text(UGLY)
    (tmp_path / "alias.sched").symlink_to(tmp_path / "real.sched")
    result = fmt(str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "1 file reformatted, 0 files left unchanged" in result.stderr
    assert (tmp_path / "real.sched").read_text() == PRETTY and (tmp_path / "alias.sched").is_symlink()


def test_stdin_takes_what_a_file_takes(tmp_path):
    """One reader for both: bytes that are not UTF-8 are refused from stdin as from a file, naming the line."""
    bad = UGLY.encode() + b"\n# caf\xe9\n"
    (tmp_path / "bad.sched").write_bytes(bad)
    from_file = fmt(str(tmp_path / "bad.sched"))
    from_stdin = runner.invoke(app, ["fmt", "-"], input=bad)
    assert from_file.exit_code == from_stdin.exit_code == 2
    assert "not UTF-8 text (byte 0xe9 on line 3)" in from_file.stderr
    assert "error[E000]: cannot read the schedule from stdin: not UTF-8 text (byte 0xe9 on line 3)" in from_stdin.stderr
    assert from_stdin.stdout == ""


def test_stdout_in_ascii_is_utf_8_not_a_traceback(tmp_path):
    """`PYTHONIOENCODING=ascii ppdsl fmt -` on a schedule with a non-ASCII comment: UTF-8 bytes on stdout."""
    import subprocess
    import sys

    text = "# café ①\n" + UGLY
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run(
        [sys.executable, "-c", "from ppdsl.cli import main; main()", "fmt", "-"],
        input=text.encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode("utf-8") == "# café ①\n" + PRETTY
    diff = subprocess.run(
        [sys.executable, "-c", "from ppdsl.cli import main; main()", "fmt", "--diff", "-"],
        input=text.encode(),
        capture_output=True,
        env=env,
    )
    assert diff.returncode == 1 and "Traceback" not in diff.stderr.decode(), diff.stderr.decode()
    assert "+    optimizer" in diff.stdout.decode("utf-8")
