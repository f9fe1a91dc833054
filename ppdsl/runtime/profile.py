"""Measured job timings: Paddle's host profiler records every job the standalone executor runs as an event
named `<job type>-<micro-batch>` (e.g. `forward@2-5`); that works on CPU, where the executor's own
`enable_job_schedule_profiler` (CUDA events) prints nothing. Events become ppdsl JobRecords (rank, job,
start, end in seconds), the same records a simulation produces, so one trace format and one plot serve both.
"""

from __future__ import annotations

import glob
import json
import re
import tempfile
from contextlib import contextmanager

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.records import JobRecord

# Paddle appends the duration to the name: `forward@2-5[314.963 us]`
_JOB_EVENT = re.compile(r"^(?P<type>[A-Za-z_]+)@(?P<where>r?\d+)-(?P<mb>\d+)(\[[^\]]*\])?$")


@contextmanager
def host_profiler():
    """Profile the host while the block runs; yields a list that receives the Chrome trace events after it."""
    import paddle.profiler as profiler

    events: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ppdsl-profile-") as tmp:
        prof = profiler.Profiler(
            targets=[profiler.ProfilerTarget.CPU], on_trace_ready=profiler.export_chrome_tracing(tmp)
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


def job_records(exp: Expansion, events: list[dict]) -> list[JobRecord]:
    """The jobs among profiler events, on the ranks the schedule puts them, times in seconds from the first."""
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
    if not found:
        return []
    t0 = min(f[0] for f in found)
    found.sort()
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
