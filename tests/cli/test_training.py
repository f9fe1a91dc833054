"""`ppdsl run`'s flags: every numeric one is refused out of range, and every output that could not be written at the
end of the run is refused before it starts (these fail before any model is built, so they need no paddle)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ppdsl.cli import app

runner = CliRunner()
RUN = ["run", "1f1b", "--pp", "2", "-m", "2", "--batch-size", "4", "--steps", "1", "--model", "tiny_mlp"]


def _refused(*args: str):
    result = runner.invoke(app, [*RUN, *args])
    output = result.output + (result.stderr or "")
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    assert "jobs per step" not in output, "refused only after the trainer was built"
    return result


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        # a NaN or infinite learning rate made every parameter NaN after step 1, exit 0
        (["--lr", "nan"], "--lr must be a finite number above 0, got nan"),
        (["--lr", "inf"], "--lr must be a finite number above 0, got inf"),
        (["--lr", "-inf"], "--lr must be a finite number above 0, got -inf"),
        (["--lr", "0"], "--lr must be a finite number above 0, got 0.0"),
        (["--lr", "-0.1"], "--lr must be a finite number above 0, got -0.1"),
        (["--seed", "-1"], "--seed must be an integer from 0 to 2147483646, got -1"),
        (["--seed", str(2**31 - 1)], "--seed must be an integer from 0 to 2147483646, got 2147483647"),
        (["--seed", str(10**30)], "--seed must be an integer from 0 to 2147483646"),
        (["--steps", "-1"], "--steps must not be negative, got -1"),
        # --steps 10**30 was accepted and trained without end
        (["--steps", str(10**30)], "--steps must be at most 1000000000"),
        (["--batch-size", "0"], "--batch-size must be positive, got 0"),
        (["--batch-size", str(2**40)], f"--batch-size must be at most 1048576, got {2**40}"),
        (["--save-every", "-2", "--save-dir", "x"], "--save-every must not be negative, got -2"),
        (["--profile-steps", "0"], "--profile-steps must be at least 1, got 0"),
        (["--nproc-per-node", "2", "--comm-timeout", "nan"], "--comm-timeout must be seconds above 0"),
        (["--nproc-per-node", "2", "--comm-timeout", "0"], "--comm-timeout must be seconds above 0"),
        (["--nproc-per-node", "2", "--comm-timeout", "1e300"], "at most 86400, got 1e+300"),
        (["--pp", "0"], "`pp` must be an integer from 1"),
        (["-m", "-3"], "`microbatches` must be an integer from 1"),
    ],
)
def test_numeric_flags_out_of_range_are_refused_up_front(args, fragment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _refused(*args)
    assert "error[E007]" in result.stderr and fragment in result.stderr, result.stderr
    assert not (tmp_path / "x").exists()


def test_every_bad_flag_is_reported_at_once():
    result = _refused("--lr", "nan", "--seed", "-1", "--profile-steps", "0")
    assert result.stderr.count("error[E007]") == 3


@pytest.mark.parametrize(
    ("flag", "target", "code", "fragment"),
    [
        (
            "--summary-json",
            "a_file/summary.json",
            "E000",
            "cannot write --summary-json `{d}/a_file/summary.json`: `{d}/a_file` is not a directory",
        ),
        ("--summary-json", "no_dir/summary.json", "E000", "`{d}/no_dir` does not exist"),
        # one check of an output for every command (ppdsl.common.files.check_output): a directory is E053 there
        ("--summary-json", ".", "E053", "cannot write --summary-json `{d}`: it is a directory"),
        ("--profile", "no_dir/trace.json", "E000", "cannot write --profile `{d}/no_dir/trace.json`"),
        ("--profile", "a_dir", "E053", "cannot write --profile `{d}/a_dir`: it is a directory"),
        ("--save-dir", "a_file", "E000", "cannot use --save-dir `{d}/a_file`: `{d}/a_file` is not a directory"),
        ("--save-dir", "a_file/sub", "E000", "cannot use --save-dir `{d}/a_file/sub`: `{d}/a_file` is not a directory"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_training(flag, target, code, fragment, tmp_path):
    """These failed only after every step had run (the summary, the profile) or at the first save."""
    (tmp_path / "a_file").write_text("keep me\n")
    (tmp_path / "a_dir").mkdir()
    result = _refused(flag, str(tmp_path / target))
    assert f"error[{code}]" in result.stderr, result.stderr
    assert fragment.format(d=tmp_path) in result.stderr, result.stderr
    assert (tmp_path / "a_file").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_dir", "a_file"], "the probe left a file behind"


def test_summary_shows_the_host_store_apart_and_says_it_is_emulated():
    """A run whose offloads made a host store: `host_peak_bytes` beside `peak_bytes` (device-resident), the
    summary says that on CPU the split is an emulation, and the table shows it; a run without offloads has
    neither (null, the same keys)."""
    from ppdsl.runtime.profile import HeldMemory
    from ppdsl.runtime.run import held_figures

    figures = held_figures(HeldMemory([], [100, 50], [300, 0]))
    assert (figures["peak_bytes"], figures["host_peak_bytes"]) == ([100, 50], [300, 0])
    assert "emulated on CPU" in figures["host_store"]
    assert held_figures(HeldMemory([], [100, 50], [0, 0])) == {
        "peak_bytes": [100, 50],
        "host_peak_bytes": None,
        "host_store": None,
    }
    assert set(held_figures(None)) == set(figures)
