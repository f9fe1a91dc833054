"""Chrome trace / Perfetto JSON: a simulation written as a trace, and a trace (simulated or measured) read back.

Layout of a written trace (open it in https://ui.perfetto.dev or chrome://tracing):

* one process per rank (`pid` = rank, `process_name` "rank r"), with threads `compute` (tid 0, one complete
  event, ph "X", per job), `send` (tid 1, each activation or gradient leaving the rank's send stream) and
  `recv from rank s` (tid 2 + s, the same transfer seen from the receiving rank, one track per sender), and with
  memory actions `copy` (`COPY_TID`: the rank's offloads and reloads, which run beside its compute);
* a flow arrow (ph "s" on the send, ph "f" with bp "e" on the receive, one id per transfer) from every send to
  its receive;
* a compute event is named by its job label (`F3.c1`, `I2`, `optimizer`) and carries
  `args = {type, chunk, microbatch, stage, step}`: what `read_trace` needs. A measured profile
  (`ppdsl run --profile`) is the same without the communication tracks: `jobs_trace` writes job records alone,
  and a counter track per rank (ph "C", `held bytes`) with the bytes it holds at the end of each job.

Time: trace timestamps are microseconds. Simulated costs are abstract units, written as 1 unit = 1 ms; costs
from a cost file (`--costs`, measured by `ppdsl calibrate`) are seconds unless the file says otherwise
(`"unit": "ms"` or `"us"`), and are written as real time. `otherData.us_per_unit` records the factor, so that
`read_trace` gives the times back in the units they were simulated in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ppdsl.analysis.records import JobRecord
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import PROFILE_BYTES, read_text
from ppdsl.common.jsontext import parse_json
from ppdsl.common.units import US_PER, US_PER_COST_UNIT, unit_name
from ppdsl.plan.kinds import copies, is_collective
from ppdsl.reports.simulate import Simulation

COMPUTE_TID, SEND_TID = 0, 1
RECV_TID_BASE = 2  # + source rank: one receive track per sender (see `build_trace`)
COPY_TID = 1 << 20  # the copy stream's track: above any receive track's tid, listed last
COLLECTIVE_TID = COPY_TID + 1  # the collective stream's track (reduce_grads, sync_shared), after the copies'

HELD_COUNTER = "held bytes"  # the counter track of measured memory (`jobs_trace`)
PROFILE_HELP = "give a Chrome trace written by `ppdsl trace` or `ppdsl run --profile`"


def _metadata(
    ranks: int, links: Iterable[tuple[int, int]] = (), copies: bool = False, collectives: bool = False
) -> list[dict[str, Any]]:
    """Names and order of the processes (ranks) and their threads: compute, send, `recv from rank s` for
    each (destination, source) in `links`, and `copy` when the jobs have offloads or reloads."""
    links = set(links)
    events: list[dict[str, Any]] = []
    threads = {r: [(COMPUTE_TID, "compute")] for r in range(ranks)}
    if links:
        for r in range(ranks):
            threads[r].append((SEND_TID, "send"))
    for dst, src in sorted(links):
        threads[dst].append((RECV_TID_BASE + src, f"recv from rank {src}"))
    if copies:
        for r in range(ranks):
            threads[r].append((COPY_TID, "copy (offload / reload)"))
    if collectives:
        for r in range(ranks):
            threads[r].append((COLLECTIVE_TID, "collective (reduce_grads / sync_shared)"))
    for r in range(ranks):
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": f"rank {r}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}})
        for tid, name in threads[r]:
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": r, "tid": tid, "args": {"sort_index": tid}})
    return events


def job_events(jobs: Iterable[JobRecord], us: float) -> list[dict[str, Any]]:
    """One complete event per job on its rank's compute track (a copy on its copy track); `us`: microseconds per
    unit of the jobs' times."""
    return [
        {
            "name": job.label,
            "cat": job.type,
            "ph": "X",
            "pid": job.rank,
            "tid": COPY_TID if copies(job.type) else COLLECTIVE_TID if is_collective(job.type) else COMPUTE_TID,
            "ts": job.start * us,
            "dur": (job.end - job.start) * us,
            "args": {
                "type": job.type,
                "chunk": job.chunk,
                "microbatch": job.microbatch,
                "stage": job.stage,
                "step": job.step,
            },
        }
        for job in jobs
    ]


def jobs_trace(
    jobs: Sequence[JobRecord],
    ranks: int,
    us: float,
    meta: dict[str, Any] | None = None,
    held_bytes: Iterable[tuple[int, float, int]] = (),
) -> dict[str, Any]:
    """A trace of job records alone, e.g. measured ones (`ppdsl run --profile`: times in seconds, us = 1e6).
    `held_bytes` (rank, time, bytes) becomes a counter track per rank, `held bytes`. `read_trace` gives the same
    records back."""
    other = {"us_per_unit": us, "time_unit": unit_name(us), **(meta or {})}
    counters = [
        {"name": HELD_COUNTER, "ph": "C", "pid": rank, "tid": COMPUTE_TID, "ts": t * us, "args": {"bytes": held}}
        for rank, t, held in held_bytes
    ]
    any_copies = any(copies(job.type) for job in jobs)
    any_collectives = any(is_collective(job.type) for job in jobs)
    return {
        "traceEvents": _metadata(ranks, copies=any_copies, collectives=any_collectives)
        + job_events(jobs, us)
        + counters,
        "displayTimeUnit": "ms",
        "otherData": other,
    }


def build_trace(sim: Simulation, us: float = US_PER_COST_UNIT, measured_units: bool = False) -> dict[str, Any]:
    """The Chrome trace of a simulation: compute, send and receive tracks per rank, and flow arrows.

    `us`: microseconds per simulated time unit. `measured_units`: the costs were real times (a cost file), so
    the trace says so instead of "1 cost unit = 1 ms".
    """
    exp = sim.expansion
    # A rank receives from up to two neighbours (more under a placement of one's own), and their transfers may
    # overlap in time. Slices on one track must nest, so each sender gets its own receive track; one sender's
    # transfers leave its send stream one after another and never overlap.
    links = {(tr.dst_rank, tr.src_rank) for tr in sim.transfers}
    jobs = list(sim.jobs())
    beside = any(copies(job.type) for job in jobs), any(is_collective(job.type) for job in jobs)
    events = _metadata(exp.pp, links, *beside) + job_events(jobs, us)
    for flow_id, tr in enumerate(sim.transfers):
        label = exp.label(exp.jobs[tr.src_rank][tr.step])
        kind = "gradient" if tr.gradient else "activation"
        args = {
            "kind": kind,
            "src_rank": tr.src_rank,
            "dst_rank": tr.dst_rank,
            "stage": tr.stage,
            "to_stage": tr.to_stage,
            "microbatch": tr.microbatch,
        }
        ts, dur = tr.start * us, (tr.end - tr.start) * us
        common = {"cat": kind, "ph": "X", "ts": ts, "dur": dur, "args": args}
        events.append({"name": f"send {label}", "pid": tr.src_rank, "tid": SEND_TID, **common})
        recv_tid = RECV_TID_BASE + tr.src_rank
        events.append({"name": f"recv {label}", "pid": tr.dst_rank, "tid": recv_tid, **common})
        # the arrow leaves the send slice and lands on the receive slice that encloses its time (bp "e")
        flow = {"name": kind, "cat": "flow", "id": flow_id, "ts": ts}
        events.append({**flow, "ph": "s", "pid": tr.src_rank, "tid": SEND_TID})
        events.append({**flow, "ph": "f", "bp": "e", "pid": tr.dst_rank, "tid": recv_tid})
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "schedule": exp.defn.name,
            "file": str(exp.defn.path),
            "pp": exp.pp,
            "vpp": exp.vpp,
            "microbatches": exp.microbatches,
            "makespan": sim.makespan,
            "bubble_ratio": sim.bubble_ratio,
            "recompute_ratio": sim.execution.recompute_ratio,  # beside the bubble, which is idle time only
            "us_per_unit": us,
            "time_unit": unit_name(us) if measured_units else "cost unit (drawn as 1 ms)",
        },
    }


def trace_text(trace: dict[str, Any]) -> str:
    """A trace as JSON text, one event per line: traces get large, and lines keep them greppable and diffable."""
    lines = ",\n".join(json.dumps(e, separators=(",", ":")) for e in trace["traceEvents"])
    rest = json.dumps({k: v for k, v in trace.items() if k != "traceEvents"})
    return '{"traceEvents": [\n' + lines + "\n], " + rest[1:] + "\n"


def trace_json(sim: Simulation, us: float = US_PER_COST_UNIT, measured_units: bool = False) -> str:
    """`build_trace` as text (`trace_text`)."""
    return trace_text(build_trace(sim, us, measured_units))


@dataclass
class Profile:
    """Compute jobs read from a Chrome trace, with times in the trace's own units (see `us_per_unit`)."""

    jobs: list[JobRecord]
    us_per_unit: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ranks(self) -> int:
        return max((j.rank for j in self.jobs), default=-1) + 1

    @property
    def time_unit(self) -> str:
        """What a time axis of these jobs is labelled: `cost units` for a simulated trace, else a real unit."""
        if str(self.meta.get("time_unit", "")).startswith("cost unit"):
            return "cost units"
        return unit_name(self.us_per_unit)


def _bad(path: str | Path, message: str) -> DiagnosticError:
    return DiagnosticError(
        [
            Diagnostic(
                "E009",
                f"cannot read profile `{path}`: {message}",
                help=PROFILE_HELP,
            )
        ]
    )


_MISSING = object()
# A measured time in a trace, in microseconds: a thousand years is more than any run; past it a sum or a mean of
# such figures overflows to infinity (and a cost file with it is refused)
MAX_TRACE_MICROSECONDS = 3.2e16
# Trace units per microsecond a profile may state: from a picosecond to an hour a unit
MIN_US_PER_UNIT, MAX_US_PER_UNIT = 1e-6, 3.6e9


def _shown(value: object) -> str:
    """A profile's value as a message quotes it: its JSON, cut short."""
    text = "missing" if value is _MISSING else json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _index(path: str | Path, where: str, key: str, value: object) -> int:
    """A rank, chunk, micro-batch, stage or step of a trace event: an integer from 0 to MAX_SIZE."""
    from ppdsl.analysis.expand import MAX_SIZE

    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SIZE:
        raise _bad(path, f"{where}: `{key}` is {_shown(value)}, not an integer from 0 to {MAX_SIZE}")
    return value


def _time(path: str | Path, where: str, key: str, value: object, signed: bool) -> float:
    """A time stamp (`ts`, any sign) or a duration (`dur`, not negative) of a trace event, in microseconds."""
    low = -MAX_TRACE_MICROSECONDS if signed else 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= MAX_TRACE_MICROSECONDS:
        what = "a time stamp" if signed else "a duration"
        bound = f"from {low:g}" if signed else "from 0"
        raise _bad(path, f"{where}: `{key}` is {_shown(value)}, not {what} {bound} to {MAX_TRACE_MICROSECONDS:g} us")
    return float(value)


def _us_per_unit(path: str | Path, value: object) -> float:
    """`otherData.us_per_unit`: microseconds a unit of the trace's times; absent, a measured profile's ms."""
    if value is None:
        return float(US_PER["ms"])
    if isinstance(value, bool) or not isinstance(value, int | float) or not MIN_US_PER_UNIT <= value <= MAX_US_PER_UNIT:
        raise _bad(
            path,
            f"`otherData.us_per_unit` is {_shown(value)}, not a number of microseconds from {MIN_US_PER_UNIT:g} to "
            f"{MAX_US_PER_UNIT:g}",
        )
    return float(value)


def read_trace(path: str | Path) -> Profile:
    """The compute jobs of a Chrome trace (ph "X" events whose args name a job `type`), ordered per rank.

    Times come back in the units the trace was written in (`otherData.us_per_unit`; without it, as a measured
    profile, in milliseconds). A job's `step` is `args.step` if present, else its position on its rank by start
    time. Raises DiagnosticError (E009) when the file is not such a trace.
    """
    try:
        # bounded nesting, no NaN: a hostile profile cannot exhaust the stack (ppdsl.common.jsontext)
        data = parse_json(read_text(path, PROFILE_BYTES, "E009", "profile ", help=PROFILE_HELP))
    except ValueError as err:
        raise _bad(path, str(err)) from None
    meta: dict[str, Any] = {}
    if isinstance(data, dict):
        events = data.get("traceEvents")
        meta = data.get("otherData") or {}
        if not isinstance(meta, dict):
            meta = {}
    else:
        events = data  # the JSON array form of the format
    if not isinstance(events, list):
        raise _bad(path, "no `traceEvents` list")
    us = _us_per_unit(path, meta.get("us_per_unit"))
    raw = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        args = ev.get("args")
        if not isinstance(args, dict) or "type" not in args:
            continue  # a send, a receive, or an event of another tool
        where = f"event {i}"
        type_ = args["type"]
        if not isinstance(type_, str) or not type_:
            raise _bad(path, f"{where}: `args.type` is {_shown(type_)}, not the name of a job type")
        rank = _index(path, where, "pid", ev.get("pid", _MISSING))
        chunk = _index(path, where, "args.chunk", args.get("chunk", 0))
        mb = _index(path, where, "args.microbatch", args.get("microbatch", 0))
        stage = _index(path, where, "args.stage", args["stage"]) if "stage" in args else -1  # -1: not recorded
        step = _index(path, where, "args.step", args["step"]) if "step" in args else None
        ts = _time(path, where, "ts", ev.get("ts", _MISSING), signed=True)
        dur = _time(path, where, "dur", ev.get("dur", 0.0), signed=False)
        start = ts / us
        end = start + dur / us
        label = ev.get("name", "")
        raw.append((rank, start, i, step, type_, chunk, mb, stage, label if isinstance(label, str) else "", end))
    if not raw:
        raise _bad(path, "it holds no compute events (ph `X` with `args.type`)")
    # without recorded steps, a rank's order is its start order (ties in file order: zero-length jobs)
    raw.sort(key=lambda x: (x[0], x[3] if x[3] is not None else -1, x[1], x[2]))
    jobs: list[JobRecord] = []
    position: dict[int, int] = {}
    for rank, start, _, step, type_, chunk, mb, stage, label, end in raw:
        k = position.get(rank, 0)
        position[rank] = k + 1
        jobs.append(JobRecord(rank, k if step is None else step, type_, chunk, mb, stage, label, start, end))
    return Profile(jobs, us, meta)


def profile_sizes(profile: Profile) -> dict[str, Any]:
    """What the profile says it measured (`otherData`, written by `ppdsl trace` and `ppdsl run --profile`): the
    schedule's file and name, pp, vpp, micro-batches; the keys it lacks are absent."""
    meta = profile.meta
    out: dict[str, Any] = {}
    for key in ("pp", "vpp", "microbatches"):
        if isinstance(meta.get(key), int) and not isinstance(meta.get(key), bool):
            out[key] = meta[key]
    file = meta.get("schedule_file") or meta.get("file")
    if isinstance(file, str) and file:
        out["file"] = file
    if isinstance(meta.get("schedule"), str):
        out["schedule"] = meta["schedule"]
    return out


def profile_mismatches(profile: Profile, path: str | Path, exp: Any) -> list[Diagnostic]:
    """E076 for each way the profile is not a run of `exp` (an Expansion): another schedule or sizes than its
    `otherData` says, more ranks, or jobs that are not the schedule's (a profile of another tool's schedule)."""
    said = profile_sizes(profile)
    measured = " ".join(
        [f"`{said.get('schedule', '?')}`", *(f"{k}={said[k]}" for k in ("pp", "vpp", "microbatches") if k in said)]
    )
    help_text = (
        f"`{path}` was measured as {measured}: give those, or leave the schedule and sizes out "
        f"(`ppdsl plot --measured {path} -o timeline.png` takes them from the profile)"
    )
    asked = {"schedule": exp.defn.name, "pp": exp.pp, "vpp": exp.vpp, "microbatches": exp.microbatches}
    wrong = [f"{k} {said[k]} (the plot's: {asked[k]})" for k in asked if k in said and said[k] != asked[k]]
    if wrong:
        return [Diagnostic("E076", f"profile `{path}` is of another run: {', '.join(wrong)}", help=help_text)]
    if profile.ranks > exp.pp:
        return [
            Diagnostic(
                "E076", f"profile `{path}` has {profile.ranks} ranks, the plot's schedule {exp.pp}", help=help_text
            )
        ]
    want = {(r, t, c, mb) for r in range(exp.pp) for t, c, mb in exp.job_tuples(r)}
    have = {(j.rank, j.type, j.chunk, j.microbatch) for j in profile.jobs}
    extra, missing = sorted(have - want), sorted(want - have)
    if extra or missing:
        first = extra[0] if extra else missing[0]
        what = "runs" if extra else "lacks"
        return [
            Diagnostic(
                "E076",
                f"profile `{path}` is not a run of `{exp.defn.name}` at pp={exp.pp} vpp={exp.vpp} "
                f"microbatches={exp.microbatches}: {len(extra)} of its jobs are not the schedule's and "
                f"{len(missing)} of the schedule's are not in it (rank {first[0]} {what} `{first[1]}` "
                f"chunk {first[2]} micro-batch {first[3]})",
                help=help_text,
            )
        ]
    return []
