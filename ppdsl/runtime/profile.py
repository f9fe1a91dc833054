"""Measured job timings and memory, from Paddle's host profiler.

Timings: the profiler records every job the standalone executor runs as an event named `<job type>-<micro-batch>`
(e.g. `forward@2-5`); that works on CPU, where the executor's own `enable_job_schedule_profiler` (CUDA events)
prints nothing. Events become ppdsl JobRecords (rank, job, start, end in seconds), the same records a simulation
produces, so one trace format and one plot serve both.

Memory (`held_memory`): with `profile_memory` the profiler also records every allocation and free of the host
allocator (address, bytes, time, thread). This is the allocator's view, a cross-check of what `ppdsl run` reports
(`held.plan_held_bytes`, an account of the named variables the plan keeps), not the figure itself: on CPU each job's
collector frees on its own thread, a little after the op that let go of a buffer, so which boundary a free falls
before depends on thread timing (identical runs differed by 1.47x on a busy machine), and the least of a few steps is
what agrees with the account (`tests/runtime/test_held.py`). A buffer that outlives the job that allocated it is
held for a later job: the job that releases it, its last reader (`held_memory` says how a free is tied to its job).
So at each job boundary (a job's end) the bytes a rank holds are the buffers alive across that moment whose last
reader runs on that rank. Buffers nobody frees during the profiled step count for the rank that allocated them.
Parameters, gradient accumulators and optimizer state live from the startup program on and are not in these figures.
"""

from __future__ import annotations

import bisect
import glob
import json
import re
import tempfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.records import JobRecord

# Paddle appends the duration to the name: `forward@2-5[314.963 us]`
_JOB_EVENT = re.compile(r"^(?P<type>[A-Za-z_]+)@(?P<where>r?\d+)-(?P<mb>\d+)(\[[^\]]*\])?$")


@contextmanager
def host_profiler(memory: bool = False):
    """Profile the host while the block runs (with `memory`, every allocation and free too); yields a list that
    receives the Chrome trace events after it."""
    import paddle.profiler as profiler

    events: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ppdsl-profile-") as tmp:
        prof = profiler.Profiler(
            targets=[profiler.ProfilerTarget.CPU],
            on_trace_ready=profiler.export_chrome_tracing(tmp),
            profile_memory=memory,
        )
        prof.start()
        try:
            yield events
        finally:
            prof.stop()
            for path in sorted(glob.glob(f"{tmp}/*.json")):
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                events.extend(data["traceEvents"] if isinstance(data, dict) else data)


def _job_events(exp: Expansion, events: list[dict]) -> list[tuple[float, float, int, int, int, int, int]]:
    """(ts, dur in µs, rank, type index, chunk, micro-batch, stage) of every job event, in time order."""
    rank_of_stage = {s: (r, c) for r, row in enumerate(exp.stage_of) for c, s in enumerate(row)}
    index = {name: t for t, name in enumerate(exp.type_names)}
    found = []
    for e in events:
        if e.get("ph") != "X":
            continue
        m = _JOB_EVENT.match(e.get("name", ""))
        if not m or m.group("type") not in index:
            continue
        t, where, mb = index[m.group("type")], m.group("where"), int(m.group("mb"))
        if where.startswith("r"):  # the optimizer runs per rank
            rank, chunk, stage = int(where[1:]), 0, exp.stage_of[int(where[1:])][0]
        else:
            stage = int(where)
            rank, chunk = rank_of_stage[stage]
        found.append((float(e["ts"]), float(e["dur"]), rank, t, chunk, mb, stage))
    found.sort()
    return found


def job_records(exp: Expansion, events: list[dict]) -> list[JobRecord]:
    """The jobs among profiler events, on the ranks the schedule puts them, times in seconds from the first."""
    found = _job_events(exp, events)
    if not found:
        return []
    t0 = min(f[0] for f in found)
    steps: dict[int, int] = {}
    out = []
    for ts, dur, rank, t, chunk, mb, stage in found:
        position = steps.get(rank, 0)
        steps[rank] = position + 1
        out.append(
            JobRecord(
                rank,
                position,
                exp.type_names[t],
                chunk,
                mb,
                stage,
                exp.label(exp.encode(t, chunk, mb)),
                (ts - t0) / 1e6,
                (ts - t0 + dur) / 1e6,
            )
        )
    return out


@dataclass
class AllocatorHeld:
    """Bytes each rank holds at every job boundary of a profiled step, by the allocator (see the module docstring)."""

    samples: list[tuple[float, list[int]]]  # (seconds from the first job, bytes per rank), one per job end
    peak: list[int]  # per rank, the largest over the samples
    # the host store of offload jobs, apart from `peak` (`held_memory`'s `host_jobs`); zeros without offloads
    host_peak: list[int] = field(default_factory=list)


def held_memory(exp: Expansion, events: list[dict], host_jobs: frozenset[str] = frozenset()) -> AllocatorHeld:
    """Per-rank held bytes at each job boundary, from a step profiled with `host_profiler(memory=True)`.

    On CPU every job's interpreter frees buffers on its own garbage-collector thread, a little after the op that let
    go of them, so the time of a free may fall in a later job, maybe another rank's. The thread does not lie: it is
    the job's, and it frees the job's scratch, so each collector thread is the job whose allocations it frees most.
    A buffer is then held from its allocation to the end of the job that releases it; a buffer its own job
    releases is scratch, held at no boundary. Frees on the op threads (inside a kernel) are synchronous: the job
    running then.
    """
    jobs = _job_events(exp, events)
    if not jobs:
        return AllocatorHeld([], [0] * exp.pp, [0] * exp.pp)
    starts = [j[0] for j in jobs]
    ends = [j[0] + j[1] for j in jobs]

    def job_at(ts: float) -> int | None:
        """The job running at `ts` (None between jobs)."""
        i = bisect.bisect_right(starts, ts) - 1
        return i if i >= 0 and ts <= ends[i] else None

    mem = [e for e in events if e.get("ph") == "i" and e.get("cat") in ("Allocate", "Free")]
    mem = [e for e in mem if "cpu" in str(e.get("args", {}).get("place", "cpu")).lower()]
    mem.sort(key=lambda e: float(e["ts"]))
    op_threads = {e.get("tid") for e in mem if e["cat"] == "Allocate"}
    live: dict[str, tuple[float, int, int | None]] = {}  # address -> (allocated at, bytes, allocating job)
    freed: list[tuple[float, int, int | None, object]] = []  # (allocated at, bytes, allocating job, freeing thread)
    free_time: list[float] = []
    for e in mem:
        args, ts = e["args"], float(e["ts"])
        if e["cat"] == "Allocate":
            live[args["addr"]] = (ts, int(args["increase_bytes"]), job_at(ts))
            continue
        allocated = live.pop(args["addr"], None)
        if allocated is not None:  # else allocated before the profile started
            freed.append((*allocated, e.get("tid")))
            free_time.append(ts)
    # each collector thread is the job whose allocations it frees most
    votes: dict[object, Counter] = {}
    for (_, _, maker, tid), _ in zip(freed, free_time, strict=True):
        if tid not in op_threads and maker is not None:
            votes.setdefault(tid, Counter())[maker] += 1
    job_of_thread = {tid: max(count, key=lambda j: (count[j], j)) for tid, count in votes.items()}
    host_types = {t for t, name in enumerate(exp.type_names) if name in host_jobs}
    if host_types:
        # an offload or a reload frees only what other jobs of its (stage, micro-batch) allocated (the originals, the
        # store), so the vote names the forward or the offload before it. A thread whose first free comes after the
        # voted job ended is the next job of that stage and micro-batch started by then: a job's collector cannot free
        # before its job starts, yet may lag past the end of a short one (an offload's few copies)
        first_free: dict[object, float] = {}
        for (_, _, _, tid), ts in zip(freed, free_time, strict=True):
            first_free.setdefault(tid, ts)
        for tid, job in job_of_thread.items():
            at = first_free[tid]
            if at > ends[job]:
                later = [j for j in range(job + 1, len(jobs)) if jobs[j][5:] == jobs[job][5:] and starts[j] <= at]
                job_of_thread[tid] = later[0] if later else job

    def column(maker: int, rank: int) -> int:
        """Where a buffer counts: its rank, or past the ranks (pp + rank) for the host store."""
        return rank + exp.pp if jobs[maker][3] in host_types else rank

    buffers: list[tuple[float, float, int, int]] = []  # (allocated, gone by, bytes, column)
    for (at, size, maker, tid), ts in zip(freed, free_time, strict=True):
        holder = job_at(ts) if tid in op_threads else job_of_thread.get(tid)
        if holder is None or holder == maker:
            continue  # scratch of one job, or fed and freed between jobs
        buffers.append((at, min(ts, ends[holder]), size, column(maker, jobs[holder][2])))
    buffers += [(at, float("inf"), size, column(m, jobs[m][2])) for at, size, m in live.values() if m is not None]
    # a sweep over time: a buffer counts at a boundary `end` if allocated <= end < gone
    changes = sorted([(a, size, col) for a, _, size, col in buffers] + [(g, -size, col) for _, g, size, col in buffers])
    held = [0] * (2 * exp.pp)
    k, samples, host_samples = 0, [], []
    for end in ends:
        while k < len(changes) and changes[k][0] <= end:
            held[changes[k][2]] += changes[k][1]
            k += 1
        samples.append(((end - starts[0]) / 1e6, held[: exp.pp]))
        host_samples.append(held[exp.pp :])
    peak = [max(sample[1][r] for sample in samples) for r in range(exp.pp)]
    host_peak = [max(sample[r] for sample in host_samples) for r in range(exp.pp)]
    return AllocatorHeld(samples, peak, host_peak)


def allocator_held(trainer) -> AllocatorHeld:
    """One more step of a `train.PipelineTrainer` under the memory profiler: the allocator's held bytes of it."""
    from ppdsl.runtime.memory_jobs import host_job_types

    with host_profiler(memory=True) as events:
        trainer.step()
    return held_memory(trainer.exp, events, host_job_types(trainer.built.memory_jobs))
