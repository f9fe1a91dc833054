"""The pipeline's timing rule: when a job can start, and when its output reaches the rank that reads it.

Every engine that times a schedule uses this module: the checker's executor (`analysis.execution.execute`), the
synthesizer's list scheduler (`synth.greedy`), and the CP-SAT models (`synth.exact`, `synth.exact_actions`,
`synth.window`, `synth.window_actions`, `synth.periodic`), which express the same rule as constraints. The rule:

1. **Data flow between stages** (`FLOW`): a forward on stage s reads the activation of the forward on s - 1; a
   backward (whole, or its input-gradient part `backward_b`) on stage s reads the gradient of the backward of
   s + 1. `input_stage` / `output_stage` say which neighbour a job reads from and writes to.
2. **Start**: a job starts when its rank is free and its input has arrived (`start_time`).
3. **Link** (`transfer_seconds`): an output for another rank takes `latency` plus, with a bandwidth, the
   activation's size over it (a gradient is as large as its activation); to the same rank it takes no time.
4. **Streams** (`Stream`): a rank sends on one send stream, one transfer after another: a transfer leaves when
   the job has ended and the stream's previous transfer has arrived (`Stream.carry`).
5. **Rendezvous** (only with `rendezvous=True`, a blocking transport such as gloo): a send completes only when
   the receiving rank has reached the job that receives it, and the sender's next job waits for that
   (`after_rendezvous`).
6. **Copies** (memory actions, `CopyStreams`): a rank copies activations to the host (`offload`) and back
   (`reload`) on its copy stream, beside its compute: a copy starts when the rank's order reaches it, its data is
   ready (the forward has ended; the offload's copy has ended) and the stream is free, and takes its cost (from
   `cost offload`, or `comm offload latency` + the bytes it moves / `comm offload bandwidth`). Copies overlap
   compute, not each other: by default one copy at a time in either direction (one stream); with
   `comm offload duplex = true` an offload and a reload may run at once (a stream per direction, as a GPU's two
   copy engines), each direction still one at a time. A backward (or backward_b) of a reloaded (chunk,
   micro-batch) waits for its reload's end (`SAME_STAGE_INPUT`'s copy form). A `recompute` is compute and reads
   only its own stage's forward input, so it starts when the rank reaches it, before its gradient arrives.
7. **Collectives** (`reduce_grads`, `sync_shared`; a kind whose row's stream is `COLLECTIVE`): a rank joins a
   collective where its order puts it, and the collective is a rendezvous of its members (the row's `members`):
   the rank goes on when every member has reached it (`join_time`; a chunk's `reduce_grads` is joined by the
   rank's data-parallel replicas, which run the same order, so they reach it together and it never waits; a
   `sync_shared` by every rank whose order has it). The reduction then runs on the rank's collective stream (a
   `Stream`, one collective after another), beside the compute: it starts when the members have joined and the
   stream is free (the gradients it reduces are complete, as their jobs come before it in the order) and takes
   its cost (`cost reduce_grads`, or `comm reduce latency` + the ring's share of `comm reduce size` over
   `comm reduce bandwidth`, `analysis.expand.ring_share`). The jobs its row names `before` (the optimizer) start
   after the rank's collectives end. The time the collective stream runs while the rank's compute does not is
   its exposed collective time (`exposed_time`).

How each engine holds to it:
- `execute` and `greedy` call these functions for every job (the same `Stream` objects, the same link tables
  from `analysis.execution.link_times`), so they cannot drift; a property test (tests/synth/test_timing_rule.py)
  checks that greedy's own times equal `execute`'s.
- The CP-SAT models cannot call a function per job at solve time; they build their precedences from
  `input_stage` (which job's end a job's start waits for) and their delays from `link_delay` over the same link
  tables. They leave out rule 4 (the queue on a send stream; exact whenever no transfer outlasts the job that
  sends it, `synth.cpsat.transfers_never_queue`) and rule 5, so a CP-SAT schedule is re-timed by `execute` before
  anyone reads its makespan.

Rule 7 is timed by `execute` only: synth's engines search compute orders, and at dp above 1 its evaluator
(`synth.schedule.with_reductions`) places each chunk's `reduce_grads` right after its last gradient job and
times every candidate by `execute`, reductions and all (a `sync_shared` is checked and timed, not searched).

Rule 6 is timed by `execute`, and every engine of synth takes it: `greedy` with memory actions times each job
and copy with the same `CopyStreams`, each copy started as soon as its position in the order allows
(tests/synth/test_timing_rule.py checks its times equal `execute`'s); the actions search (`synth.actions`)
inserts actions in orders and times each candidate by `execute`; the CP-SAT model with actions
(`synth.exact_actions`) states rule 6 as constraints (the copy streams as no-overlaps, a copy's start anchored at
what `execute` would start it at, memory held over the same half-open instants as `analysis.memory`), and so do
the LNS windows with actions (`synth.window_actions`, the repair step of `synth.lns` above the whole model's
size: a window's jobs anchored the same way, the prefix's times and the suffix's order fixed) and the periodic
block with actions (`synth.periodic`); their solutions are re-timed by `execute` all the same. The order-only
engines (`synth.exact`, `synth.window`, the order search) refuse a probe schedule with memory actions
(`synth.problem`); the actions search gives them the orders without the actions.

Extending the rule: a kind that moves data to a neighbouring stage adds its row to `FLOW`; a kind that rides a
stream of its own gets a `Stream` per rank in the engines that model it (as the copies' `CopyStreams`), and its
transfer time next to `transfer_seconds`; a kind that reads a job of its own stage (as `backward_w` reads
`backward_b`) names it as its `after` in its row of `ppdsl.plan.kinds` (`SAME_STAGE_INPUT` is read off it). The
memory actions' indices differ by schedule (they exist only in schedules that name them), so their rules are not in
these index tables: `execution._copy_roles` and `analysis.memory.MemoryActions` read them off the rows (a copy
kind's `stream`, `memory`, `after` and `before`), so a new copy kind, such as a second reload, needs no row here.
"""

from __future__ import annotations

from ppdsl.plan.kinds import ALWAYS, BACKWARD, BACKWARD_B, FORWARD

# Rule 1: the direction each kind of job sends its output in (+1: the next stage, -1: the stage before). A job of
# such a kind reads the same kind of data from the neighbour on the other side.
FLOW: dict[int, int] = {FORWARD: +1, BACKWARD: -1, BACKWARD_B: -1}
# The kinds whose output a kind reads from its neighbour: a backward's gradient comes from a whole backward or an
# input-gradient one, whichever the next stage ran.
PRODUCERS: dict[int, tuple[int, ...]] = {
    FORWARD: (FORWARD,),
    BACKWARD: (BACKWARD, BACKWARD_B),
    BACKWARD_B: (BACKWARD, BACKWARD_B),
}
# What a job reads on its own stage (the rank's order keeps it before; the CP-SAT models add it as a precedence):
# its kind's `after` (`ppdsl.plan.kinds`; backward and backward_b read the forward, backward_w reads backward_b).
_INDEX = {k.name: t for t, k in enumerate(ALWAYS)}
SAME_STAGE_INPUT: dict[int, int] = {t: _INDEX[k.after] for t, k in enumerate(ALWAYS) if k.after}


def output_stage(kind: int, stage: int, nstages: int) -> int | None:
    """The stage that reads the output of a `kind` job on `stage` (None: it sends nothing)."""
    step = FLOW.get(kind)
    if step is None:
        return None
    to = stage + step
    return to if 0 <= to < nstages else None


def input_stage(kind: int, stage: int, nstages: int) -> int | None:
    """The stage whose output a `kind` job on `stage` waits for (None: it waits for no other stage)."""
    step = FLOW.get(kind)
    if step is None:
        return None
    frm = stage - step
    return frm if 0 <= frm < nstages else None


def reads(kind: int, stage: int, producer_kind: int, producer_stage: int) -> bool:
    """Does a `kind` job on `stage` read the output of a `producer_kind` job on `producer_stage` (same
    micro-batch), from the neighbouring stage?"""
    step = FLOW.get(kind)
    return step is not None and producer_kind in PRODUCERS[kind] and producer_stage == stage - step


def start_time(free: float, arrival: float) -> float:
    """Rule 2: when a job starts on a rank free at `free` whose input arrives at `arrival`."""
    return arrival if arrival > free else free


def transfer_seconds(latency: float, bandwidth: float | None, size: float) -> float:
    """Rule 3: how long an output of `size` takes to reach another rank."""
    return latency + (size / bandwidth if bandwidth else 0.0)


def link_delay(seconds: float) -> float:
    """A link time as the CP-SAT models' delay after the producer's end: the link tables say -1 for an output
    that stays on its rank, which arrives when the job ends."""
    return seconds if seconds > 0.0 else 0.0


class Stream:
    """Rule 4: one transfer after another (a rank's send stream; a copy stream would be another instance)."""

    __slots__ = ("free",)

    def __init__(self) -> None:
        self.free = 0.0  # when the last transfer on it arrives

    def carry(self, ready: float, seconds: float) -> tuple[float, float]:
        """(leave, arrive) of a transfer of `seconds` whose data is ready at `ready`."""
        leave = ready if ready > self.free else self.free
        arrive = leave + seconds
        self.free = arrive
        return leave, arrive

    def send(self, end: float, seconds: float) -> float:
        """When the output of a job that ended at `end` arrives: on this stream when it goes to another rank
        (`seconds` >= 0), at once when it stays on the rank (`seconds` < 0, the link tables' "no transfer")."""
        if seconds < 0.0:
            return end
        leave = end if end > self.free else self.free
        self.free = arrive = leave + seconds
        return arrive


class CopyStreams:
    """Rule 6: a rank's copy stream(s) to host memory: one for both directions, or one per direction (duplex)."""

    __slots__ = ("back", "out")

    def __init__(self, duplex: bool) -> None:
        self.out = Stream()  # device -> host (offload)
        self.back = Stream() if duplex else self.out  # host -> device (reload)

    def carry(self, inward: bool, ready: float, seconds: float) -> tuple[float, float]:
        """(start, end) of a copy (a reload when `inward`) whose data is ready at `ready`."""
        return (self.back if inward else self.out).carry(ready, seconds)


def join_time(arrivals) -> float:
    """Rule 7: when the members of a collective, having reached it at `arrivals`, all go on: the last one's."""
    return max(arrivals)


def exposed_time(compute: list[tuple[float, float]], collective: list[tuple[float, float]]) -> float:
    """Rule 7: of the intervals the rank's collective stream runs, the time its compute does not run (what the
    collectives add to the step instead of hiding behind the compute). Both lists of (start, end)."""
    busy = sorted((s, e) for s, e in compute if e > s)
    merged: list[list[float]] = []
    for s, e in busy:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    exposed = 0.0
    for s, e in collective:
        covered = sum(max(0.0, min(e, b) - max(s, a)) for a, b in merged)
        exposed += max(0.0, (e - s) - covered)
    return exposed


def after_rendezvous(free: float, received: float) -> float:
    """Rule 5: when a rank that sent (blocking) is free again, given when the receiver reached its receive."""
    return received if received > free else free
