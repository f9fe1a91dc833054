"""In-flight activation memory over time: the one accounting every report draws or checks, and the memory model
measured on a real program that replaces the schedule's own.

A job changes its rank's level by the expansion's `mem_delta` for its (type, rank, chunk): a forward allocates,
a backward frees what its forward allocated, a split backward frees it in two parts (see `ppdsl.analysis.expand`).
The level after a rank's k-th job is the sum of the first k deltas; the checker's peak is the largest of them.

Memory actions (`MemoryActions`, by their kinds' memory roles in `ppdsl.plan.kinds`) change this in three ways,
each counted at the instant it happens:
- a forward whose (chunk, micro-batch) a `recompute` follows on its rank keeps only what the recompute needs:
  it allocates `forward - recompute`, and the recompute allocates the rest (`mem_delta` of recompute) when it ends;
- an `offload` frees what it moves when its copy *ends* (the bytes are on the device until then), and a `reload`
  holds them from when its copy *starts*: copies run beside compute, so these changes fall between compute jobs;
- the host holds what an offload moves from its copy's start to its reload's end (`host_levels`, all ranks).
At one instant, frees of finished offloads count first, then compute jobs in their order, then reloads starting.

A memory model measured on a real program also counts what is in transit (`MemoryModel.received`): the value a job
receives from another job (its stage's input from the forward before, the gradient from the backward after) is held
on the receiving rank from the start of the job that sends it to the end of the job that reads it, where the
reader's own change takes over (what it keeps of it is in its `mem_delta`). From the sender's start, not its end: on
one machine `ppdsl run` runs the ranks' jobs one after another in the order they start, so the value exists from
there, and on a cluster that bounds the receive from above. A declared model has no such term: its units are
activations.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ppdsl.analysis.expansion import Expansion
from ppdsl.plan.kinds import JobStream, Memory, kind, revision, source_of


@dataclass(frozen=True)
class MemoryModel:
    """The activation table in bytes, measured on a real program (`ppdsl.runtime.memory.model_memory`): what a
    job of each type allocates (positive) or frees (negative) on each stage. A (stage, type) it does not name
    changes nothing (the optimizer, auxiliary jobs)."""

    delta: Mapping[int, Mapping[str, float]]  # stage -> job type name -> bytes
    unit: str = "bytes"
    # stage -> job type name -> bytes a job of that type receives from another job (held from its sender's start)
    received: Mapping[int, Mapping[str, float]] = field(default_factory=dict)

    def table(
        self,
        type_names: Sequence[str],
        stage_of: Sequence[Sequence[int]],
        fractions: Sequence[float | None] | None = None,
    ) -> list[list[list[float]]]:
        """[type][rank][chunk], the form of `Expansion.mem_delta`. A memory action the model does not measure is
        derived from the stage's forward and the action's `fraction` (all of it when None): a recompute allocates
        that fraction, an offload frees it, a reload allocates it again."""
        nothing: Mapping[str, float] = {}
        fraction = dict(zip(type_names, fractions or [None] * len(type_names), strict=True))

        def value(stage: int, name: str) -> float:
            measured = self.delta.get(stage, nothing)
            action = kind(name)
            if name in measured or action is None or not action.acts_on_memory:
                return float(measured.get(name, 0))
            part = fraction.get(name)
            amount = float(measured.get(source_of(name), 0)) * (1.0 if part is None else part)  # its forward's
            return -amount if action.memory is Memory.MOVES_OUT else amount

        return [[[value(s, name) for s in row] for row in stage_of] for name in type_names]

    def received_table(self, type_names: Sequence[str], stage_of: Sequence[Sequence[int]]) -> list | None:
        """[type][rank][chunk] of `received` (the form of `Expansion.mem_received`); None when nothing is."""
        if not any(any(v for v in row.values()) for row in self.received.values()):
            return None
        nothing: Mapping[str, float] = {}
        return [
            [[float(self.received.get(s, nothing).get(name, 0)) for s in row] for row in stage_of]
            for name in type_names
        ]


# How a memory model is measured for a scenario: on the program as an expansion's orders cut it (which job
# types run, how many stages, the micro-batch size), so `Scenario.expansion` measures first and builds after.
MeasureMemory = Callable[[Expansion], MemoryModel]


@dataclass(frozen=True)
class MemoryActions:
    """Where a schedule's memory actions are among its job types and what each does, read off their kinds' rows
    (`ppdsl.plan.kinds`; their indices differ by schedule: a schedule has them only when it names them).

    The accounting, the timing and the checks ask the per-type tables (`role`, `after`, `copies`), so an action of
    a new kind is counted and timed as its row says. `recompute`, `offload`, `reload` are the first action of each
    role (the built-in three): the synthesizer's engines, which choose where to put those, read them."""

    recompute: int
    offload: int
    reload: int
    role: tuple[Memory, ...]  # [type] what it does to activations (`Memory.NONE` for a schedule's own types)
    after: tuple[int, ...]  # [type] the type of the same (chunk, micro-batch) whose end it reads (-1: none)
    on_copy: tuple[bool, ...]  # [type] runs on the copy stream
    types: tuple[int, ...]  # every memory action's type index

    @classmethod
    def of(cls, exp: Expansion) -> MemoryActions | None:
        return _actions_of(tuple(exp.type_names), revision())

    @classmethod
    def of_names(cls, names: tuple[str, ...]) -> MemoryActions | None:
        rows = [kind(name) for name in names]
        types = tuple(t for t, k in enumerate(rows) if k is not None and k.acts_on_memory)
        if not types:
            return None
        index = {name: t for t, name in enumerate(names)}
        role = tuple(k.memory if k is not None else Memory.NONE for k in rows)
        after = tuple(index.get(k.after, -1) if k is not None and k.after else -1 for k in rows)
        on_copy = tuple(k is not None and k.stream is JobStream.COPY for k in rows)
        first = {
            r: next(t for t in types if role[t] is r) for r in (Memory.REBUILDS, Memory.MOVES_OUT, Memory.RESTORES)
        }
        return cls(first[Memory.REBUILDS], first[Memory.MOVES_OUT], first[Memory.RESTORES], role, after, on_copy, types)

    def copies(self, t: int) -> bool:
        """Does a job of type `t` run on the copy stream?"""
        return self.on_copy[t]

    def rebuilds(self, t: int) -> bool:
        """Does a job of type `t` rebuild its forward's activations (a recompute)?"""
        return self.role[t] is Memory.REBUILDS

    def moves_out(self, t: int) -> bool:
        """Does a job of type `t` move activations to the host (an offload)?"""
        return self.role[t] is Memory.MOVES_OUT

    def restores(self, t: int) -> bool:
        """Does a job of type `t` bring activations back from the host (a reload)?"""
        return self.role[t] is Memory.RESTORES

    def of_role(self, role: Memory) -> tuple[int, ...]:
        """The schedule's memory actions of this role, in type order."""
        return tuple(t for t in self.types if self.role[t] is role)


@functools.lru_cache(maxsize=64)
def _actions_of(names: tuple[str, ...], _revision: int) -> MemoryActions | None:
    """`MemoryActions.of_names`, once per schedule's job types (the accounting asks for it per rank and per run)."""
    return MemoryActions.of_names(names)


# A job as the accounting reads it: (type index, chunk, micro-batch, start, end), in the rank's order.
JobTimes = tuple[int, int, int, float, float]


def job_deltas(exp: Expansion, rank: int, jobs: Sequence[tuple[int, int, int]]) -> list[float]:
    """What each of `rank`'s jobs (type, chunk, micro-batch), in order, changes its level by: the expansion's
    `mem_delta`, but a forward whose (chunk, micro-batch) a recompute follows allocates only what it keeps."""
    delta = exp.mem_delta
    out = [delta[t][rank][c] for t, c, _ in jobs]
    actions = MemoryActions.of(exp)
    if actions is None:
        return out
    # (type, chunk, micro-batch) of a job whose activations a later job rebuilds -> the rebuilding type
    rebuilt = {(actions.after[t], c, mb): t for t, c, mb in jobs if actions.rebuilds(t)}
    if rebuilt:
        for i, (t, c, mb) in enumerate(jobs):
            by = rebuilt.get((t, c, mb))
            if by is not None:
                out[i] -= delta[by][rank][c]
    return out


@dataclass(frozen=True)
class Level:
    """A rank's level after one change: when, how much, and the step of the job that made it."""

    time: float
    level: float
    step: int


def rank_levels(
    exp: Expansion, rank: int, jobs: Sequence[JobTimes], arrivals: Sequence[float] | None = None
) -> list[Level]:
    """The rank's level after every job that changes it, in time order (see the module's rules): the one
    accounting of peaks, limits and memory panels. `arrivals[i]`: when the job that sends job i its input started,
    for a model that counts values in transit (`Expansion.mem_received`); without them none is counted."""
    deltas = job_deltas(exp, rank, [(t, c, mb) for t, c, mb, _, _ in jobs])
    actions = MemoryActions.of(exp)
    level, out = 0.0, []
    copies = actions is not None and any(actions.copies(j[0]) for j in jobs)
    received = exp.mem_received if arrivals is not None else None
    if not copies and received is None:
        for i, (job, change) in enumerate(zip(jobs, deltas, strict=True)):
            if change:
                level += change
                out.append(Level(job[4], level, i))
        return out
    events = []
    for i, (job, change) in enumerate(zip(jobs, deltas, strict=True)):
        t, c, start, end = job[0], job[1], job[3], job[4]
        held = received[t][rank][c] if received is not None else 0.0
        if held:
            # from its sender's start (after this rank's own changes at that instant) to its reader's end
            events.append((arrivals[i], 1, i, held))
            change -= held
        if not change and not held:
            continue
        if copies and actions.moves_out(t):
            events.append((end, 0, i, change))
        elif copies and actions.restores(t):
            events.append((start, 2, i, change))
        else:
            events.append((end, 1, i, change))
    events.sort()
    for time, _, i, change in events:
        level += change
        out.append(Level(time, level, i))
    return out


def peak_level(levels: Sequence[Level]) -> Level | None:
    """The first highest level (None: the level never rises above 0)."""
    best: Level | None = None
    for lv in levels:
        if lv.level > (best.level if best else 0.0):
            best = lv
    return best


def memory_curve(
    exp: Expansion, rank: int, jobs: Iterable[JobTimes], arrivals: Sequence[float] | None = None
) -> list[tuple[float, float]]:
    """(time, level) after each change, from (type index, chunk, micro-batch, start, end) of `rank`'s jobs in
    order (and, counting values in transit, when each job's input was sent): a step function starting at (0, 0)."""
    return [(0.0, 0.0), *((lv.time, lv.level) for lv in rank_levels(exp, rank, list(jobs), arrivals))]


@dataclass(frozen=True)
class HostLevel:
    """The host's level (all ranks' offloaded memory) after one change, and the job that made it."""

    time: float
    level: float
    rank: int
    step: int


def host_levels(exp: Expansion, start: Sequence[Sequence[float]], end: Sequence[Sequence[float]]) -> list[HostLevel]:
    """The host's level over time: an offload holds what it moves from its copy's start, its reload gives it
    back at its copy's end (at one instant, gives back first)."""
    actions = MemoryActions.of(exp)
    if actions is None:
        return []
    events = []
    for r, codes in enumerate(exp.jobs):
        for i, code in enumerate(codes[: len(end[r])]):
            t, c, _ = exp.decode(code)
            if actions.moves_out(t):
                events.append((start[r][i], 1, r, i, -exp.mem_delta[t][r][c]))
            elif actions.restores(t):
                events.append((end[r][i], 0, r, i, -exp.mem_delta[t][r][c]))
    events.sort()
    level, out = 0.0, []
    for time, _, r, i, change in events:
        level += change
        out.append(HostLevel(time, level, r, i))
    return out
