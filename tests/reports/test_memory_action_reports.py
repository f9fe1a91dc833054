"""Reports of schedules with memory actions: the torch CSV keeps their compute and says what it drops, the trace
gives copies a track of their own, the picture draws them, and compare / sweep / show take them."""

from __future__ import annotations

import itertools
import json

from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.expand import expand
from ppdsl.cli import app
from ppdsl.language.library import library_files
from ppdsl.language.resolve import load, resolve_text
from ppdsl.reports.formats import to_torch_csv, torch_actions, torch_dropped
from ppdsl.reports.torch_csv import torch_csv_to_sched
from ppdsl.reports.trace import COPY_TID, build_trace, read_trace, trace_text

runner = CliRunner()


def invoke(*args: object):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output + (result.stderr or ""), result.output
    return result


def _lib(stem: str):
    return load(next(p for p in library_files() if p.stem == stem))


def test_the_torch_csv_keeps_the_compute_and_counts_what_it_drops(tmp_path):
    exp = expand(_lib("interleaved1f1b_offload"), 4, 8, 2)
    plain = expand(_lib("interleaved1f1b"), 4, 8, 2)
    assert torch_actions(exp) == torch_actions(plain)  # the same compute, in the same order
    dropped = torch_dropped(exp)
    assert set(dropped) == {"offload", "reload"} and dropped["offload"] == dropped["reload"] > 0
    back = resolve_text(torch_csv_to_sched(to_torch_csv(exp), "x.csv", "back"), str(tmp_path / "x.sched"))
    assert torch_actions(expand(back, 4, 8, 2)) == torch_actions(exp)
    assert torch_dropped(plain) == {}


def test_expand_warns_on_stderr_what_the_torch_csv_leaves_out(in_repo):
    result = invoke("expand", "1f1b_recompute", "--pp", 2, "-m", 2, "--format", "torch-csv")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == "0F0,0F1,0B0,0B1"
    assert "warning: PyTorch's compute-only CSV has no memory actions: left out 4 `recompute`" in result.stderr
    assert "warning" not in invoke("expand", "1f1b", "--pp", 2, "-m", 2, "--format", "torch-csv").stderr


def test_the_trace_puts_copies_on_their_own_track_and_reads_back(tmp_path):
    sim = ppdsl.simulate("interleaved1f1b_offload", pp=2, microbatches=4, vpp=2)
    trace = build_trace(sim)
    copies = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["args"].get("type") in ("offload", "reload")]
    assert copies and all(e["tid"] == COPY_TID for e in copies)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert "copy (offload / reload)" in names
    path = tmp_path / "t.json"
    path.write_text(trace_text(trace))
    jobs = read_trace(path).jobs
    assert sorted((j.rank, j.step, j.type) for j in jobs) == sorted((j.rank, j.step, j.type) for j in sim.jobs())


def test_copies_on_one_stream_never_overlap_and_compute_never_overlaps_compute():
    sim = ppdsl.simulate("interleaved1f1b_offload", pp=4, microbatches=8, vpp=2)
    for rank in range(4):
        for kinds in (("offload", "reload"), ("forward", "backward", "optimizer")):
            spans = sorted((j.start, j.end) for j in sim.jobs() if j.rank == rank and j.type in kinds)
            assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def test_plot_draws_the_copies_and_the_memory_they_leave(tmp_path):
    out = tmp_path / "o.svg"
    result = invoke("plot", "interleaved1f1b_offload", "--pp", 4, "-m", 8, "--vpp", 2, "-o", out)
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "offload" in text and "reload" in text  # the legend names them
    # the memory panel's level is the checker's: the highest rank holds 3 (interleaved 1F1B without offload: 11)
    assert "peak activations 3" in result.stdout


def test_compare_sweep_and_show_take_memory_actions(in_repo):
    result = invoke("compare", "1f1b", "1f1b_recompute", "--pp", 4, "-m", 8, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {row["schedule"]: row for row in json.loads(result.stdout)["rows"]}
    assert rows["1F1B-Recompute"]["peak_activations"] < rows["1F1B"]["peak_activations"]
    assert invoke("sweep", "1f1b_selective", "--pp", "2,4", "-m", "4,8").exit_code == 0
    shown = invoke("show", "1f1b_recompute", "--pp", 2, "-m", 2)
    assert shown.exit_code == 0 and "R0" in shown.stdout and "R = recompute" in shown.stdout


def test_check_reports_the_hosts_peak_for_schedules_that_offload(in_repo):
    result = invoke("check", "interleaved1f1b_offload", "--pp", 2, "-m", 2, "--vpp", 2, "--format", "json")
    report = json.loads(result.stdout)
    assert (report["host_peak"], report["host_limit"]) == (4.0, None)  # 2 ranks x 2 micro-batches of chunk 0
    assert "host_peak" not in json.loads(invoke("check", "1f1b", "--pp", 2, "-m", 2, "--format", "json").stdout)
    text = invoke("check", "interleaved1f1b_offload", "--pp", 2, "-m", 2, "--vpp", 2).stdout
    assert "host memory (all ranks' offloads): peak 4 at time" in text
    recomputing = invoke("check", "1f1b_recompute", "--pp", 2, "-m", 2)
    assert recomputing.exit_code == 0 and "host memory" not in recomputing.stdout  # nothing offloaded: no line


def test_a_measured_timeline_and_the_trace_measure_the_bubble_as_the_simulator_does():
    """A timeline read back (a profile, `plot --measured`) gets the bubble the simulator reports, recomputes left
    out of it, and the trace carries the recompute share beside the bubble."""
    from ppdsl.reports.plot import summary

    sim = ppdsl.simulate("1f1b_recompute", pp=4, microbatches=8)
    plain = ppdsl.simulate("1f1b", pp=4, microbatches=8)
    assert summary(list(sim.jobs()), 4) == (sim.makespan, sim.bubble_ratio)
    assert sim.bubble_ratio >= plain.bubble_ratio  # slower and as idle: not a smaller bubble
    other = build_trace(sim)["otherData"]
    assert other["bubble_ratio"] == sim.bubble_ratio and other["recompute_ratio"] == sim.execution.recompute_ratio > 0
