"""Commands whose output grows with the sizes refuse, up front and at once, what would not fit their budget (E068,
exit 2), and run what fits; each budget is raised by its flag. Issue 15: `trace fthenb --pp 64 -m 16384` died of
MemoryError at 7.5 GB after 95 s, `synth --pp 512 -m 512 --time-limit 1` ran 65 s in 1.5 GB."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.expand import least_jobs
from ppdsl.cli import app
from ppdsl.cli.budget import BYTES_PER_JOB, DEFAULT_MAX_MEMORY, SYNTH_MAX_JOBS

runner = CliRunner()
REFUSE_WITHIN = 5.0  # seconds; about 0.1 s on a quiet machine (benchmarks/bench_check.py prints the figure)


def timed(*args: str):
    start = time.perf_counter()
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.output + (result.stderr or "")
    return result, time.perf_counter() - start


BIG = ["fthenb", "--pp", "64", "-m", "16384"]  # 2,097,216 jobs


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("trace", ["trace", *BIG, "-o", "big.json"]),
        ("expand", ["expand", *BIG, "-o", "big.json"]),
        ("show", ["show", *BIG]),
        ("plot", ["plot", *BIG, "-o", "big.png"]),
    ],
)
def test_output_over_the_memory_budget_is_refused_at_once(command, args, in_repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result, seconds = timed(*args)
    assert result.exit_code == 2, result.output
    assert "error[E068]" in result.stderr
    need = 2_097_216 * BYTES_PER_JOB[command]
    assert f"`{command}` of at least 2,097,216 jobs" in result.stderr
    assert f"--max-memory {-(-need // 2**30)}GiB" in result.stderr  # what to type to go on
    assert seconds < REFUSE_WITHIN
    assert not (tmp_path / "big.json").exists() and not (tmp_path / "big.png").exists()


def test_max_memory_moves_the_budget_both_ways(in_repo, tmp_path):
    small = ["trace", "fthenb", "--pp", "8", "-m", "64", "-o", str(tmp_path / "t.json")]
    assert runner.invoke(app, small).exit_code == 0  # 1,032 jobs fit the default
    refused = runner.invoke(app, [*small, "--max-memory", "1MiB"])
    assert refused.exit_code == 2 and "error[E068]" in refused.stderr
    assert runner.invoke(app, [*BIG[:0], "trace", "--help"]).stdout.count("--max-memory") == 1
    assert DEFAULT_MAX_MEMORY == 2 * 2**30


def test_the_jobs_a_schedule_really_has_are_counted_once_it_runs(in_repo, tmp_path):
    """zbh1 splits its backwards, so it has more jobs than the fewest any schedule needs, which is what is
    counted up front. A budget between the two passes the first count and is refused on the second."""
    jobs = sum(map(len, ppdsl.expand("zbh1", pp=4, microbatches=8).jobs))
    least = least_jobs(4, 1, 8)
    assert jobs > least
    between = (least + jobs) * BYTES_PER_JOB["trace"] // 2
    result = runner.invoke(
        app, ["trace", "zbh1", "--pp", "4", "-m", "8", "-o", str(tmp_path / "t.json"), "--max-memory", str(between)]
    )
    assert result.exit_code == 2 and f"`trace` of {jobs} jobs" in result.stderr
    assert not (tmp_path / "t.json").exists()


def test_bad_max_memory_is_a_usage_error(in_repo):
    for bad in ("lots", "0", "-1GiB"):
        result = runner.invoke(app, ["expand", "1f1b", "--pp", "2", "-m", "2", "--max-memory", bad])
        assert result.exit_code == 2 and "error[E007]" in result.stderr, bad


def test_synth_refuses_a_problem_it_cannot_set_up_within_its_time_limit(in_repo, tmp_path):
    args = ["synth", "--pp", "512", "-m", "512", "--time-limit", "1", "-o", str(tmp_path / "s.sched")]
    result, seconds = timed(*args)
    assert result.exit_code == 2 and "error[E068]" in result.stderr
    assert "524,800 jobs, over its budget of 65,536" in result.stderr
    assert "--max-problem 524800" in result.stderr
    assert seconds < REFUSE_WITHIN
    assert not (tmp_path / "s.sched").exists()
    # a longer time limit buys a larger problem; --max-problem sets it outright (here: below a tiny problem)
    low = runner.invoke(app, ["synth", "--pp", "2", "-m", "4", "-o", str(tmp_path / "s.sched"), "--max-problem", "5"])
    assert low.exit_code == 2 and "over its budget of 5:" in low.stderr
    assert SYNTH_MAX_JOBS == 65_536


def test_sweep_refuses_points_that_need_too_many_jobs_in_all(in_repo):
    result, seconds = timed("sweep", "1f1b", "--pp", "2..1024", "-m", "8..65536")
    assert result.exit_code == 2 and "error[E068]" in result.stderr
    assert "the sweep's 140 points need at least 536,342,532 jobs in all" in result.stderr
    assert seconds < REFUSE_WITHIN
