"""Where commands write: `-o -` is stdout for every command that writes a file, and the data is all stdout holds
(messages move to stderr); `show` piped is plain text, whole and uncoloured."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()
CSV = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"


def _check_data(kind: str, data: bytes) -> None:
    if kind == "json":
        json.loads(data)
    elif kind == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    elif kind == "python":
        compile(data, "plan.py", "exec")
    elif kind == "sched":
        assert b"table" in data and b"rank 1:" in data


COMMANDS = [
    ("expand", ["expand", "1f1b", "--pp", "2", "-m", "2", "-o", "-"], "json"),
    ("import", ["import", "s.csv", "-o", "-"], "sched"),
    ("compile", ["compile", "1f1b", "-o", "-"], "python"),
    ("trace", ["trace", "1f1b", "--pp", "2", "-m", "2", "-o", "-"], "json"),
    ("plot", ["plot", "1f1b", "--pp", "2", "-m", "2", "-o", "-"], "png"),
    ("sweep", ["sweep", "1f1b", "--pp", "2", "-m", "2,4", "-o", "-"], "png"),
    ("calibrate", ["calibrate", "profile.json", "-o", "-"], "json"),
]


@pytest.mark.parametrize(("name", "args", "kind"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_dash_is_stdout_and_stdout_holds_only_the_data(name, args, kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.csv").write_text(CSV)
    assert runner.invoke(app, ["trace", "1f1b", "--pp", "2", "-m", "2", "-o", "profile.json"]).exit_code == 0
    before = {p.name for p in tmp_path.iterdir()}
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    _check_data(kind, result.stdout_bytes)  # the whole of stdout is the data: messages went to stderr
    assert {p.name for p in tmp_path.iterdir()} == before, "`-o -` must not write a file (named `-` or other)"


def test_messages_of_a_dash_output_go_to_stderr(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["sweep", "1f1b", "--pp", "2", "-m", "2,4", "-o", "-"])
    assert "makespan" in result.stderr and "wrote stdout" in result.stderr
    assert b"makespan" not in result.stdout_bytes


def test_show_piped_is_plain_whole_and_uncoloured():
    result = runner.invoke(app, ["show", "1f1b", "--pp", "4", "-m", "8", "--block", "40"])  # not a terminal
    assert result.exit_code == 0
    text = result.stdout
    assert "\x1b[" not in text and "…" not in text
    rows = [line for line in text.splitlines() if line.startswith("rank ")]
    assert {row.split()[1] for row in rows} == {"0", "1", "2", "3"}
    # every job of rank 0 appears whole, over blocks that fit 80 columns (issue 19: one line of 400 columns):
    # 8 forwards, 8 backwards, their receive and send jobs (abbreviated, with a legend), the optimizer
    jobs = [job for row in rows if row.startswith("rank 0 ") for job in row.split()[2:]]
    assert jobs[:2] == ["rf0", "F0"] and jobs[-1] == "opt" and len(jobs) == 33
    assert "rf = recv_forward, sb = send_backward" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_dash_is_utf_8_whatever_the_locale_says(tmp_path):
    """`PYTHONIOENCODING=ascii ppdsl compile x.sched -o -` with a non-ASCII comment (carried into the plan): UTF-8
    bytes on stdout, not a UnicodeEncodeError traceback."""
    import os
    import subprocess
    import sys

    schedule = tmp_path / "café.sched"
    schedule.write_text("# café ①\norder { forward * microbatches  backward * microbatches  optimizer }\n")
    done = subprocess.run(
        [sys.executable, "-c", "from ppdsl.cli import main; main()", "compile", str(schedule), "-o", "-"],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "# café ①" in done.stdout.decode("utf-8")
    compile(done.stdout, "plan.py", "exec")
