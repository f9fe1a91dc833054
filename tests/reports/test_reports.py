"""`ppdsl trace / plot / compare / sweep`: the Chrome trace's structure and flows, pictures written, the compare
ranking and memory marks, the sweep's size syntax and table, and a measured profile read back from a trace.

Expected values come from pipeline theory (flush schedules take (m + p - 1)(F + B), 1F1B holds p - s
activations, FThenB m, Eager 1F1B 2(p - s) - 1) or from how the test builds its input, not from ppdsl's output.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import ppdsl
from ppdsl.analysis.records import JobRecord
from ppdsl.cli import app
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.reports.compare import parse_sizes
from ppdsl.reports.trace import build_trace, jobs_trace, read_trace, trace_text

from paths import LIBRARY

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output + (result.stderr or ""), result.output
    return result


def flush_makespan(p: int, m: int, f: float, b: float) -> float:
    return (m + p - 1) * (f + b)


# ----------------------------------------------------------------------------------------------------------
# trace


def load_trace(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "trace.json"
    result = invoke("trace", *args, "-o", out)
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("sched", "p", "m", "vpp"), [("1f1b", 4, 8, 1), ("zbv", 3, 6, 2), ("interleaved1f1b", 2, 4, 2)]
)
def test_trace_has_a_process_per_rank_and_compute_send_recv_threads(tmp_path, sched, p, m, vpp):
    trace = load_trace(tmp_path, sched, "--pp", p, "-m", m, "--vpp", vpp, "--cost", "latency=0.5")
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {r: f"rank {r}" for r in range(p)}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    # a rank receives from the ranks of its stages' neighbours: looped placements r - 1 and r + 1 (0 and p - 1
    # wrap around between chunks), the V of ZB-V r - 1 and r + 1 only
    wraps = vpp > 1 and sched != "zbv"
    peers = {
        r: {q for q in (r - 1, r + 1) if 0 <= q < p} | ({(r - 1) % p, (r + 1) % p} if wraps else set())
        for r in range(p)
    }
    expected = {(r, name) for r in range(p) for name in ("compute", "send")}
    expected |= {(r, f"recv from rank {q}") for r in range(p) for q in peers[r] if q != r}
    assert {(pid, name) for (pid, _), name in threads.items()} == expected
    tids = {(pid, name): tid for (pid, tid), name in threads.items()}
    assert all(
        len({t for (pid, _), t in tids.items() if pid == r}) == len([k for k in tids if k[0] == r]) for r in range(p)
    )

    compute = [e for e in events if e["ph"] == "X" and e["tid"] == tids[(e["pid"], "compute")]]
    # every job of every rank once: a chunk's forward and backward per micro-batch (ZB-V splits its backward
    # into two), the optimizer, and 1F1B's recv_forward / send_backward
    per_mb = {"1f1b": 4, "zbv": 3, "interleaved1f1b": 2}[sched]
    assert Counter(e["pid"] for e in compute) == {r: per_mb * m * vpp + 1 for r in range(p)}
    for e in compute:
        args = e["args"]
        assert set(args) >= {"type", "chunk", "microbatch", "stage"}
        assert e["cat"] == args["type"]
        if args["type"] == "forward":
            assert e["name"] == f"F{args['microbatch']}" + (f".c{args['chunk']}" if vpp > 1 else "")
    # 1 cost unit = 1 ms: a forward (cost 1 in all three schedules) lasts 1000 µs
    assert {e["dur"] for e in compute if e["args"]["type"] == "forward"} == {1000.0}


@pytest.mark.parametrize(
    ("sched", "p", "m", "vpp"),
    [("1f1b", 4, 8, 1), ("zbv", 4, 8, 2), ("interleaved1f1b", 4, 8, 2), ("dualpipev", 4, 8, 2)],
)
def test_trace_slices_on_a_track_never_overlap(tmp_path, sched, p, m, vpp):
    """Chrome / Perfetto drop slices that overlap without nesting on one track: with slow links (transfers
    longer than jobs) every track still holds one slice at a time."""
    trace = load_trace(tmp_path, sched, "--pp", p, "-m", m, "--vpp", vpp, "--cost", "latency=1.5,bandwidth=2")
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    assert len(tracks) > 2 * p
    for spans in tracks.values():
        spans.sort()
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def test_trace_flows_pair_each_send_with_its_receive(tmp_path):
    p, m = 4, 8
    trace = load_trace(tmp_path, "1f1b", "--pp", p, "-m", m, "--cost", "latency=0.5")
    events = trace["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    # one activation down and one gradient up per micro-batch and link
    assert len(starts) == len(finishes) == 2 * m * (p - 1)
    assert set(starts) == set(finishes)
    slices = [e for e in events if e["ph"] == "X"]
    for fid, s in starts.items():
        f = finishes[fid]
        assert f["bp"] == "e"
        assert abs(s["pid"] - f["pid"]) == 1  # 1F1B talks to its neighbours only
        send = [e for e in slices if e["pid"] == s["pid"] and e["tid"] == s["tid"] and e["ts"] == s["ts"]]
        recv = [
            e
            for e in slices
            if e["pid"] == f["pid"] and e["tid"] == f["tid"] and e["ts"] <= f["ts"] <= e["ts"] + e["dur"]
        ]
        assert len(send) == 1 and send[0]["name"].startswith("send ")
        assert len(recv) >= 1 and any(r["name"].startswith("recv ") for r in recv)
        assert send[0]["args"]["dst_rank"] == f["pid"] and send[0]["args"]["src_rank"] == s["pid"]
        assert send[0]["dur"] == 500.0  # latency 0.5 units
        # an activation goes down the pipeline, a gradient up
        down = f["pid"] == s["pid"] + 1
        assert send[0]["args"]["kind"] == ("activation" if down else "gradient")


def test_trace_time_unit_is_real_with_a_cost_file(tmp_path):
    """Costs from a cost file are seconds: a 2 ms forward is 2000 µs, the makespan (m + p - 1)(F + B)."""
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"costs": {"forward": 0.002, "backward": 0.004}}), encoding="utf-8")
    trace = load_trace(tmp_path, "1f1b", "--pp", 4, "-m", 8, "--costs", costs)
    compute = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["args"].get("type")]
    assert {round(e["dur"], 6) for e in compute if e["args"]["type"] == "forward"} == {2000.0}
    end = max(e["ts"] + e["dur"] for e in compute)
    assert end == pytest.approx(flush_makespan(4, 8, 2000, 4000))
    assert trace["otherData"]["us_per_unit"] == 1e6


def test_read_trace_round_trips_the_simulation(tmp_path):
    trace = load_trace(tmp_path, "zbh1", "--pp", 4, "-m", 8)
    path = tmp_path / "trace.json"
    profile = read_trace(path)
    sim = ppdsl.simulate(LIBRARY / "zbh1.sched", pp=4, microbatches=8)
    assert profile.jobs == sorted(sim.jobs(), key=lambda j: (j.rank, j.step))
    assert profile.ranks == 4 and profile.time_unit == "cost units"
    assert trace["otherData"]["makespan"] == sim.makespan


def test_read_trace_of_a_measured_profile(tmp_path):
    """A profile as `ppdsl run --profile` writes it: compute events only, no steps, in microseconds, in any
    order, in the JSON array form; steps follow the start times and times come back in ms."""
    events = []
    for rank in range(2):
        for k, (kind, mb) in enumerate([("forward", 0), ("forward", 1), ("backward", 0), ("backward", 1)]):
            ts = 1000.0 * (3 * k + rank)
            args = {"type": kind, "chunk": 0, "microbatch": mb, "stage": rank}
            events.append(
                {
                    "name": f"{kind[0].upper()}{mb}",
                    "ph": "X",
                    "pid": rank,
                    "tid": 7,
                    "ts": ts,
                    "dur": 1500.0,
                    "args": args,
                }
            )
    events.append({"name": "other tool", "ph": "X", "pid": 0, "tid": 1, "ts": 5.0, "dur": 1.0, "args": {}})
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(list(reversed(events))), encoding="utf-8")
    profile = read_trace(path)
    assert profile.ranks == 2 and profile.time_unit == "ms"
    for rank in range(2):
        jobs = [j for j in profile.jobs if j.rank == rank]
        assert [j.step for j in jobs] == [0, 1, 2, 3]
        assert [j.label for j in jobs] == ["F0", "F1", "B0", "B1"]
        assert [j.start for j in jobs] == [3.0 * k + rank for k in range(4)]
        assert all(j.end - j.start == 1.5 for j in jobs)


def test_jobs_trace_of_measured_records_round_trips_in_seconds(tmp_path):
    """What `ppdsl run --profile` does with its records (times in seconds): write them with `jobs_trace`, read
    them back unchanged, in seconds."""
    jobs = [
        JobRecord(
            rank, step, kind, 0, mb, rank, f"{kind[0].upper()}{mb}", 0.25 * step + rank, 0.25 * step + rank + 0.125
        )
        for rank in range(3)
        for step, (kind, mb) in enumerate([("forward", 0), ("forward", 1), ("backward", 0), ("backward", 1)])
    ]
    path = tmp_path / "profile.json"
    path.write_text(trace_text(jobs_trace(jobs, 3, 1e6, {"schedule": "measured"})), encoding="utf-8")
    profile = read_trace(path)
    assert profile.jobs == jobs
    assert profile.time_unit == "s" and profile.meta["schedule"] == "measured"


@pytest.mark.parametrize("text", ["{not json", '{"traceEvents": 3}', '{"traceEvents": [{"ph": "X", "pid": 0}]}'])
def test_read_trace_rejects_what_is_not_a_profile(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DiagnosticError) as info:
        read_trace(path)
    assert info.value.diagnostics[0].code == "E009"


def test_build_trace_scales_by_the_given_unit():
    sim = ppdsl.simulate(LIBRARY / "fthenb.sched", pp=2, microbatches=2)
    a, b = build_trace(sim, 1000.0), build_trace(sim, 1.0)
    xa = [e for e in a["traceEvents"] if e["ph"] == "X"]
    xb = [e for e in b["traceEvents"] if e["ph"] == "X"]
    assert [e["ts"] for e in xa] == [1000.0 * e["ts"] for e in xb]


# ----------------------------------------------------------------------------------------------------------
# plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_png_and_svg(tmp_path):
    png, svg = tmp_path / "t.png", tmp_path / "t.svg"
    result = invoke("plot", "interleaved1f1b", "--pp", 8, "-m", 32, "--vpp", 2, "-o", png)
    assert result.exit_code == 0, result.output
    width, height = png_size(png.read_bytes())
    assert width >= 1000 and height >= 500
    assert png.stat().st_size > 50_000  # 8 x 129 boxes, numbers, two panels: not a blank canvas
    assert "Interleaved1F1B" in result.stdout and "bubble" in result.stdout
    result = invoke("plot", "1f1b", "--pp", 4, "-m", 8, "-o", svg)
    assert result.exit_code == 0, result.output
    text = svg.read_text(encoding="utf-8")
    assert "<svg" in text and svg.stat().st_size > 20_000
    # the title carries the theory's makespan and bubble: (m + p - 1)(F + B) = 33, 9 / 33
    assert "makespan 33" in result.stdout and f"{9 / 33:.1%}" in result.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary files left


def test_plot_refuses_an_unknown_picture_format(tmp_path):
    out = tmp_path / "t.gif"
    result = invoke("plot", "1f1b", "--pp", 2, "-m", 2, "-o", out)
    assert result.exit_code == 2 and "E007" in result.stderr and not out.exists()


def test_plot_measured_profile_from_a_trace(tmp_path):
    """The measured picture is drawn from the profile, not from the simulation: stretch every job of a trace
    by 3 and the plotted makespan is 3 times the simulated one."""
    load_trace(tmp_path, "1f1b", "--pp", 4, "-m", 8)
    path = tmp_path / "trace.json"
    trace = json.loads(path.read_text(encoding="utf-8"))
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            e["ts"], e["dur"] = 3 * e["ts"], 3 * e["dur"]
    path.write_text(json.dumps(trace), encoding="utf-8")
    out = tmp_path / "measured.png"
    result = invoke("plot", "1f1b", "--pp", 4, "-m", 8, "--measured", path, "-o", out)
    assert result.exit_code == 0, result.output
    assert f"makespan {3 * flush_makespan(4, 8, 1, 2):g}" in result.stdout and "measured" in result.stdout
    png_size(out.read_bytes())


def test_plot_measured_bad_profile_is_a_usage_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[]", encoding="utf-8")
    result = invoke("plot", "1f1b", "--pp", 2, "-m", 2, "--measured", bad, "-o", tmp_path / "x.png")
    assert result.exit_code == 2 and "E009" in result.stderr


# ----------------------------------------------------------------------------------------------------------
# compare


def compare_json(*args) -> tuple[int, dict]:
    result = invoke("compare", *args, "--format", "json")
    return result.exit_code, json.loads(result.stdout)


def test_compare_ranks_by_makespan_then_memory_and_marks_the_limit():
    """F = B = 1: FThenB, 1F1B and Eager 1F1B all take (m + p - 1)(F + B); their peaks m, p and 2p - 1 order
    them; with a limit of p only 1F1B fits."""
    p, m = 4, 8
    code, report = compare_json(
        "fthenb", "eager1f1b", "1f1b", "--pp", p, "-m", m, "--memory-limit", p, "--cost", "forward=1,backward=1"
    )
    assert code == 0
    rows = report["rows"]
    assert [r["schedule"] for r in rows] == ["1F1B", "Eager1F1B", "FThenB"]
    assert [r["makespan"] for r in rows] == [flush_makespan(p, m, 1, 1)] * 3
    assert [r["peak_activations"] for r in rows] == [p, 2 * p - 1, m]
    assert [r["over_limit"] for r in rows] == [False, True, True]


def test_compare_orders_by_makespan(tmp_path):
    """Three copies of 1F1B whose forwards cost 3, 1 and 2: best first is the one with F = 1."""
    text = (LIBRARY / "1f1b.sched").read_text(encoding="utf-8")
    paths = []
    for f in (3, 1, 2):
        path = tmp_path / f"f{f}.sched"
        path.write_text(text.replace('schedule "1F1B"', f'schedule "F{f}"\ncost forward = {f}'), encoding="utf-8")
        paths.append(path)
    code, report = compare_json(*paths, "--pp", 3, "-m", 5)
    assert code == 0
    assert [r["schedule"] for r in report["rows"]] == ["F1", "F2", "F3"]
    assert [r["makespan"] for r in report["rows"]] == [flush_makespan(3, 5, f, 2) for f in (1, 2, 3)]


def test_compare_normalises_chunks_per_rank():
    """Without --vpp, ZB-V (two chunks) runs at vpp 2 with every cost and activation halved: half the makespan
    and half the peak that the same simulation gives per chunk (scaling all costs scales the makespan)."""
    _, report = compare_json("1f1b", "zbv", "--pp", 4, "-m", 8)
    rows = {r["schedule"]: r for r in report["rows"]}
    assert rows["ZBV"]["vpp"] == 2 and rows["1F1B"]["vpp"] == 1 and report["normalised"] is True
    zbv = ppdsl.simulate(LIBRARY / "zbv.sched", pp=4, microbatches=8, vpp=2)
    assert rows["ZBV"]["makespan"] == zbv.makespan / 2
    assert rows["ZBV"]["peak_activations"] == max(r.peak_activations for r in zbv.execution.ranks) / 2
    assert rows["1F1B"]["makespan"] == flush_makespan(4, 8, 1, 2)
    # with --vpp given, nothing is normalised and 1F1B's `require vpp == 1` rejects it
    code, report = compare_json("1f1b", "zbv", "--pp", 4, "-m", 8, "--vpp", 2)
    rows = {r["schedule"]: r for r in report["rows"]}
    assert rows["ZBV"]["makespan"] == zbv.makespan
    assert rows["1F1B"]["status"] == "rejected" and "one chunk per rank" in rows["1F1B"]["reason"]
    assert code == 1  # a schedule named on the command line did not run


def test_compare_library_lists_rejected_schedules_with_their_reason():
    """At m = 6 < 2p - 1 = 7, ZB-V's and Eager 1F1B's `require`s reject them: rows with the reason, not errors."""
    code, report = compare_json("--library", "--pp", 4, "-m", 6)
    assert code == 0
    rows = {r["file"].rsplit("/", 1)[-1]: r for r in report["rows"]}
    assert set(rows) == {p.name for p in LIBRARY.glob("*.sched")}
    for name in ("zbv.sched", "eager1f1b.sched"):
        assert rows[name]["status"] == "rejected"
        assert "2 * pp - 1" in rows[name]["reason"]
    assert rows["1f1b.sched"]["status"] == "ok"
    statuses = [r["status"] for r in report["rows"]]
    assert statuses == sorted(statuses, key=lambda s: s != "ok")  # the ranked ones first
    ok = [r["makespan"] for r in report["rows"] if r["status"] == "ok"]
    assert ok == sorted(ok)


def test_compare_csv_and_table():
    result = invoke("compare", "1f1b", "fthenb", "--pp", 2, "-m", 4, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["schedule"] for r in rows] == ["1F1B", "FThenB"]  # equal makespans, 1F1B holds less
    assert [float(r["makespan"]) for r in rows] == [flush_makespan(2, 4, 1, 2)] * 2
    result = invoke("compare", "1f1b", "fthenb", "--pp", 2, "-m", 4, "--memory-limit", 2)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    over = [line for line in lines if "FThenB" in line]
    assert over and "OVER" in over[0]  # FThenB holds m = 4 > 2
    assert "OVER" not in next(line for line in lines if "1F1B" in line)


def test_compare_usage_errors():
    assert invoke("compare", "--pp", 2, "-m", 2).exit_code == 2  # nothing to compare
    result = invoke("compare", "1f1b", "--pp", 2, "-m", 2, "--cost", "fwd=1")
    assert result.exit_code == 2 and "E007" in result.stderr


# ----------------------------------------------------------------------------------------------------------
# sweep


@pytest.mark.parametrize(
    ("text", "sizes"),
    [
        ("8", [8]),
        ("4,8", [4, 8]),
        ("8..64", [8, 16, 32, 64]),
        ("3..20", [3, 6, 12]),
        ("4..12:4", [4, 8, 12]),
        ("2,3,8..32", [2, 3, 8, 16, 32]),
        ("8..8", [8]),
        ("16, 4", [4, 16]),
    ],
)
def test_parse_sizes(text, sizes):
    assert parse_sizes(text) == sizes


@pytest.mark.parametrize("text", ["", "a", "0", "5..4", "0..4", "1..3:0", "1..", "..4", "1-4", "2..8:x"])
def test_parse_sizes_rejects(text):
    with pytest.raises(DiagnosticError) as info:
        parse_sizes(text)
    assert info.value.diagnostics[0].code == "E007"


@given(a=st.integers(1, 50), b=st.integers(1, 200), step=st.integers(1, 9))
def test_parse_sizes_ranges(a, b, step):
    if a > b:
        return
    assert parse_sizes(f"{a}..{b}:{step}") == list(range(a, b + 1, step))
    doubled = parse_sizes(f"{a}..{b}")
    assert doubled[0] == a and doubled[-1] <= b < 2 * doubled[-1]
    assert all(y == 2 * x for x, y in itertools.pairwise(doubled))


def test_sweep_table_json_and_picture(tmp_path):
    """1F1B with F = B = 1: bubble (p - 1) / (m + p - 1) at every accepted size; m < p is rejected."""
    args = ("sweep", "1f1b", "--pp", "2,8", "-m", "4..16", "--cost", "forward=1,backward=1")
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)["rows"]
    assert [(r["pp"], r["microbatches"]) for r in rows] == [(p, m) for p in (2, 8) for m in (4, 8, 16)]
    for r in rows:
        p, m = r["pp"], r["microbatches"]
        if m < p:
            assert r["status"] == "rejected" and "at least as many micro-batches" in r["reason"]
        else:
            assert r["bubble_ratio"] == pytest.approx((p - 1) / (m + p - 1))
            assert r["peak_activations"] == p
    out = tmp_path / "sweep.png"
    result = invoke(*args, "-o", out)
    assert result.exit_code == 0
    assert "rejected" in result.stdout and f"{1 / 5:.1%}" in result.stdout  # p=2, m=4
    png_size(out.read_bytes())
    assert out.stat().st_size > 20_000
    svg = tmp_path / "sweep.svg"
    assert invoke(*args, "--format", "csv", "-o", svg).exit_code == 0
    assert "<svg" in svg.read_text(encoding="utf-8")


def test_sweep_bad_sizes_are_usage_errors():
    result = invoke("sweep", "1f1b", "--pp", "4", "-m", "8..2")
    assert result.exit_code == 2 and "E007" in result.stderr
