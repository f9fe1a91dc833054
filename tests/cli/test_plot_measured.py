"""`ppdsl plot --measured` (issue 19): the schedule and sizes come from the profile when left out, and a profile of
another run is refused (E076) instead of being drawn under the wrong title."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()


def _profile(tmp_path, *args: str):
    path = tmp_path / "profile.json"
    result = runner.invoke(app, ["trace", *args, "-o", str(path)])
    assert result.exit_code == 0, result.stderr
    return path


def test_a_profile_of_another_schedule_and_sizes_is_refused(tmp_path):
    """Before: a 1F1B pp=4 profile drawn as `ZBV pp=2`, exit 0."""
    profile = _profile(tmp_path, "1f1b", "--pp", "4", "-m", "8")
    result = runner.invoke(
        app,
        [
            "plot",
            "zbv",
            "--pp",
            "2",
            "-m",
            "4",
            "--vpp",
            "2",
            "--measured",
            str(profile),
            "-o",
            str(tmp_path / "x.png"),
        ],
    )
    assert result.exit_code == 2 and "error[E076]" in result.stderr
    assert "schedule 1F1B (the plot's: ZBV), pp 4 (the plot's: 2)" in result.stderr
    assert "leave the schedule and sizes out" in result.stderr
    assert not (tmp_path / "x.png").exists()


def test_the_readme_form_takes_schedule_and_sizes_from_the_profile(tmp_path):
    """Before: `ppdsl plot --measured out.json` failed, a schedule and --pp being required."""
    profile = _profile(tmp_path, "zbv", "--pp", "2", "-m", "4", "--vpp", "2")
    result = runner.invoke(app, ["plot", "--measured", str(profile), "-o", str(tmp_path / "x.png")])
    assert result.exit_code == 0, result.stderr
    assert "ZBV (measured (profile.json))   pp=2  vpp=2  microbatches=4" in result.stdout
    assert (tmp_path / "x.png").stat().st_size > 0


def test_a_profile_without_sizes_is_checked_by_its_jobs(tmp_path):
    profile = _profile(tmp_path, "1f1b", "--pp", "2", "-m", "4")
    data = json.loads(profile.read_text(encoding="utf-8"))
    del data["otherData"]  # a trace from another tool says nothing of what it measured
    profile.write_text(json.dumps(data), encoding="utf-8")
    out = str(tmp_path / "x.png")
    bare = runner.invoke(app, ["plot", "--measured", str(profile), "-o", out])
    assert bare.exit_code == 2 and "plot needs a schedule, --pp, -m" in bare.stderr
    assert "does not say what it measured" in bare.stderr
    other = runner.invoke(app, ["plot", "fthenb", "--pp", "2", "-m", "3", "--measured", str(profile), "-o", out])
    assert other.exit_code == 2 and "error[E076]" in other.stderr and "is not a run of `FThenB`" in other.stderr
    same = runner.invoke(app, ["plot", "1f1b", "--pp", "2", "-m", "4", "--measured", str(profile), "-o", out])
    assert same.exit_code == 0, same.stderr
