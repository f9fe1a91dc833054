"""Cross-rank execution of an Expansion: every rank runs its order, stages exchange activations and gradients.

One pass computes, for a fixed per-rank order, each job's start and end under the declared costs, and finds a
deadlock when no rank can move. The timing rule is `ppdsl.analysis.timing`'s (the synthesizer's engines use the
same); how this executor applies it:

* a forward on stage s > 0 waits for the forward of stage s - 1 (same micro-batch) to arrive: each rank sends
  on one send stream, one transfer after another, each taking `comm latency` plus, with a `comm bandwidth`,
  the activation's size over the bandwidth (sends to the same rank take no time);
* a backward / backward_b on stage s < S - 1 waits for the backward / backward_b of stage s + 1;
* an auxiliary job declared `receives` / `sends` takes over its anchor's receive / send;
* by default a send never waits (stream-ordered, as Paddle's send streams); with `rendezvous=True` a send
  completes only when the receiving rank has reached the job that receives it (a blocking transport such as
  gloo), so the sender's next job waits for that;
* memory actions (`timing.CopyStreams`, rule 6): an `offload` / `reload` is issued where the order puts it and
  runs on the rank's copy stream, not its compute: it starts when the rank reaches it, its data is ready (the
  forward ended / the offload's copy ended) and the stream is free; a backward (or backward_b) of a reloaded
  (chunk, micro-batch) also waits for its reload's copy to end. A `recompute` is compute like a forward and reads
  nothing from another stage, so it runs as soon as the rank reaches it, before the gradient arrives.
* collectives (`timing` rule 7): a rank joins a collective where its order puts it and goes on when every member
  has joined (a `sync_shared`'s members are the ranks whose orders have it; a `reduce_grads`'s are the rank's
  replicas, which reach it with the rank); the reduction runs on the rank's collective stream beside its compute,
  and the optimizer waits for it. A member that waits in a collective for a rank that waits (for a receive, a
  send or another collective) for it is a deadlock through the collective, found as any other.

A worklist wakes a rank only when what it waits for happens: O(jobs) for the whole schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MemoryActions, host_levels, peak_level, rank_levels
from ppdsl.analysis.records import Transfer
from ppdsl.analysis.timing import (
    FLOW,
    CopyStreams,
    Stream,
    after_rendezvous,
    exposed_time,
    input_stage,
    join_time,
    output_stage,
    start_time,
    transfer_seconds,
)
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, FORWARD, Members, kind

F_SIGNAL, G_SIGNAL = 0, 1  # activation sent forward / gradient sent backward


@dataclass(frozen=True)
class Signals:
    """Signal ids: one per (stage, micro-batch, kind), `(stage * microbatches + mb) * 2 + kind`, so a job's
    signal is a per-(type, rank, chunk) offset plus `2 * mb`. The one place that encodes and decodes them."""

    microbatches: int

    def encode(self, stage: int, mb: int, kind: int) -> int:
        return (stage * self.microbatches + mb) * 2 + kind

    def stage(self, sg: int) -> int:
        """The stage that sends `sg`."""
        return sg // (2 * self.microbatches)

    def microbatch(self, sg: int) -> int:
        return (sg // 2) % self.microbatches

    @staticmethod
    def is_gradient(sg: int) -> bool:
        return sg % 2 == G_SIGNAL

    def receiver(self, sg: int) -> int:
        """The stage that receives `sg`: the next one for an activation, the one before for a gradient."""
        return self.stage(sg) + (-1 if sg % 2 == G_SIGNAL else 1)


@dataclass
class RankStats:
    rank: int
    busy: float  # compute time, recomputes included (a rank recomputing is not idle)
    idle: float  # the makespan less `busy`: the rank's bubble (`bubble_ratio` measures it)
    peak_activations: float
    peak_time: float
    jobs: int
    recompute: float = 0.0  # of `busy`, the time spent recomputing forwards: overhead beside the bubble, not work
    # with collectives (None without): the time the rank's collective stream runs (beside `busy`, compute only),
    # and of it the time the rank's compute does not run (not overlapped: what the collectives add to the step)
    collective: float | None = None
    exposed_collective: float | None = None


@dataclass
class Wait:
    """Why a rank cannot move: it waits at `step` to receive from, or (rendezvous) to send to, `peer`, or in a
    collective for `peer`, a member that has not joined it."""

    rank: int
    step: int
    job: str
    kind: str  # "receive" | "send" | "collective"
    peer: int
    peer_job: str


@dataclass
class Execution:
    makespan: float
    bubble_ratio: float
    ranks: list[RankStats]
    start: list[list[float]]
    end: list[list[float]]
    deadlock: list[Wait] = field(default_factory=list)  # the cycle, when there is one
    blocked: list[Wait] = field(default_factory=list)  # every rank that cannot move
    visits: list[tuple[int, int]] | None = None  # (rank, step) in the order jobs became runnable
    transfers: list[Transfer] | None = None  # with record_comms
    host_peak: float = 0.0  # all ranks' offloaded memory at its highest (schedules with offloads)
    host_peak_time: float = 0.0
    # [rank][step]: when what the job receives was sent, with a model counting values in transit (`rank_levels`)
    arrivals: list[list[float]] | None = None

    def merged_order(self) -> list[tuple[int, int]]:
        """Every rank's jobs as one sequence that respects all dependencies: by start time, ties in visit
        order (a topological order, so a zero-cost producer still precedes its consumer)."""
        if self.visits is None:
            raise ValueError("run execute(..., record_visits=True) to merge orders")
        rank_in_visit = {key: i for i, key in enumerate(self.visits)}
        return sorted(self.visits, key=lambda key: (self.start[key[0]][key[1]], rank_in_visit[key]))

    @property
    def completed(self) -> bool:
        return not self.blocked

    @property
    def recompute_ratio(self) -> float:
        """All ranks' recompute time over pp x makespan: what recomputing costs, an overhead of its own reported
        beside the bubble (which is idle time only, `bubble_ratio`)."""
        total = sum(s.recompute for s in self.ranks)
        return total / (len(self.ranks) * self.makespan) if self.makespan > 0 and self.ranks else 0.0


def bubble_ratio(idle: float, recompute: float, span: float) -> float:
    """The bubble: idle time over the time a rank (or all ranks: `span` is then pp x makespan) spends idle or on
    the order's own work, that is `span` less its recomputes. Recomputing is neither work nor bubble: counted as
    work, it made 1F1B with recompute (slower, as idle) show a smaller bubble than 1F1B (22% against 27%); left
    out of the measure, both idle 9 of every 33 units of their work and wait. Without recomputes this is idle over
    `span`, the usual bubble. The one formula for the simulator, `check`'s ranks and measured timelines."""
    rest = span - recompute
    return idle / rest if rest > 0 else 0.0


def _signal_tables(exp: Expansion, used: set[int]):
    """For each (type, rank, chunk): the offset of the signal it waits for / emits (-1: none).

    See `Signals` for the ids.
    """
    types = exp.defn.job_types
    nstages = exp.nstages
    signals = Signals(exp.microbatches)
    receiver = {}  # anchor type -> aux type that receives for it
    sender = {}
    for t, jt in enumerate(types):
        if t in used and jt.receives and jt.before:
            receiver[exp.defn.type_index(jt.before)] = t
        if t in used and jt.sends and jt.after:
            sender[exp.defn.type_index(jt.after)] = t

    def base_in(t: int, s: int) -> int:
        frm = input_stage(t, s, nstages)
        return -1 if frm is None else signals.encode(frm, 0, F_SIGNAL if FLOW[t] > 0 else G_SIGNAL)

    def base_out(t: int, s: int) -> int:
        to = output_stage(t, s, nstages)
        return -1 if to is None else signals.encode(s, 0, F_SIGNAL if FLOW[t] > 0 else G_SIGNAL)

    in_off, out_off = [], []
    for t, jt in enumerate(types):
        ins, outs = [], []
        for r in range(exp.pp):
            row_in, row_out = [], []
            for c in range(exp.vpp):
                s = exp.stage_of[r][c]
                if jt.receives and jt.before:
                    anchor = exp.defn.type_index(jt.before)
                    row_in.append(base_in(anchor, s) if anchor != BACKWARD else base_in(BACKWARD, s))
                elif t in receiver or (t == BACKWARD_B and BACKWARD in receiver):
                    row_in.append(-1)
                else:
                    row_in.append(base_in(t, s))
                if jt.sends and jt.after:
                    row_out.append(base_out(exp.defn.type_index(jt.after), s))
                elif t in sender or (t == BACKWARD_B and BACKWARD in sender):
                    row_out.append(-1)
                else:
                    row_out.append(base_out(t, s))
            ins.append(row_in)
            outs.append(row_out)
        in_off.append(ins)
        out_off.append(outs)
    return in_off, out_off


def link_times(exp: Expansion) -> list[list[list[float]]]:
    """[type][rank][chunk]: how long the output of such a job takes to reach the rank that reads it (-1: it stays
    on its rank, or there is none), under the expansion's latency and bandwidth. The synthesizer times jobs
    with this, so that its schedules take exactly as long as the checker says."""
    _, out_off = _signal_tables(exp, used=set())
    return _transfer_table(exp, out_off)


def _transfer_table(exp: Expansion, out_off) -> list[list[list[float]]]:
    """For each (type, rank, chunk): how long its output takes to reach the next rank (-1: no transfer, the
    consumer is on the same rank or there is none). Latency plus, with a bandwidth, the activation's size
    (what the stage's forward allocates) over the bandwidth; a gradient is as large as its activation."""
    rank_of = [r for r, _ in exp.rank_of_stage()]
    signals = Signals(exp.microbatches)
    table = []
    for rows in out_off:
        per_type = []
        for r, row in enumerate(rows):
            per_rank = []
            for c, off in enumerate(row):
                if off < 0:
                    per_rank.append(-1.0)
                    continue
                if rank_of[signals.receiver(off)] == r:
                    per_rank.append(-1.0)
                    continue
                size = abs(exp.mem_delta[FORWARD][r][c])
                per_rank.append(transfer_seconds(exp.latency, exp.bandwidth, size))
            per_type.append(per_rank)
        table.append(per_type)
    return table


def execute(
    exp: Expansion,
    rendezvous: bool = False,
    used: set[int] | None = None,
    record_visits: bool = False,
    record_comms: bool = False,
) -> Execution:
    """Run all ranks together; complete schedules only (run `checks.check_ranks` first)."""
    from ppdsl.analysis.checks import used_types

    used = used_types(exp) if used is None else used
    pp, m, stride = exp.pp, exp.microbatches, exp.codec.stride
    slot_in, slot_out, slot_cost, slot_link = _slot_tables(exp, used)
    streams = [Stream() for _ in range(pp)]  # each rank's send stream: transfers leave one after another
    # memory actions: per slot what the job is to the copy stream (see `_copy_roles`), None for plain schedules
    roles, deps = _copy_roles(exp, used)
    copies = [CopyStreams(exp.copy_duplex) for _ in range(pp)] if roles is not None else []
    finished: list[dict[int, float]] = [{} for _ in range(pp)]  # rank -> code -> end, for the jobs copies read
    comms: list[Transfer] | None = [] if record_comms else None
    rank_of_stage = [r for r, _ in exp.rank_of_stage()]
    sig_end = [-1.0] * (nsig := exp.nstages * m * 2)
    posted = [-1.0] * nsig if rendezvous else None
    waiter: dict[int, int] = {}  # signal -> rank waiting to receive it
    sender_waiting: dict[int, int] = {}  # signal -> rank waiting for its receiver (rendezvous)
    pending_send = [-1] * pp  # rendezvous: the signal a rank's last job is still sending
    cursor, free = [0] * pp, [0.0] * pp  # per rank: its next step, and when it is free to run it
    start, end = ([[0.0] * len(jobs) for jobs in exp.jobs] for _ in range(2))
    signals = Signals(m)
    visits: list[tuple[int, int]] | None = [] if record_visits else None
    coll = _Collectives(exp, used)  # rule 7: the collectives' rendezvous and streams

    work = list(range(pp - 1, -1, -1))
    while work:
        r = work.pop()
        n = len(jobs := exp.jobs[r])
        i, t_free = cursor[r], free[r]
        if pending_send[r] >= 0:
            p = posted[pending_send[r]]
            if p < 0:
                continue
            t_free = after_rendezvous(t_free, p)
            pending_send[r] = -1
        st_row, en_row = start[r], end[r]
        r_in, r_out, r_cost, r_link, stream = slot_in[r], slot_out[r], slot_cost[r], slot_link[r], streams[r]
        fin = finished[r]
        while i < n:
            code = jobs[i]
            mb = code // stride
            k = code - mb * stride
            role = roles[k] if roles is not None else 0  # 0 for every job of a schedule without copies
            joins = coll.roles[k]  # 0 for every job of a schedule without collectives
            if (role and role <= COPY_IN) or 0 < joins < APPLIES:  # a copy or a collective: the compute goes on
                if role:
                    st_row[i], en_row[i] = _copy(copies[r], fin, code, deps[k][0], role == COPY_IN, t_free, r_cost[k])
                else:  # a collective: when its members have joined (None: not yet)
                    joined = coll.join(r, code, k, t_free, r_cost[k], work)
                    if joined is None:
                        break
                    st_row[i], en_row[i], t_free = joined
                if visits is not None:
                    visits.append((r, i))
                i += 1
                continue
            if (off := r_in[k]) >= 0:
                sg = off + 2 * mb
                # rendezvous: a remote sender may now complete (arrival times already include the transfer)
                if rendezvous and posted[sg] < 0 and rank_of_stage[signals.stage(sg)] != r:
                    posted[sg] = t_free
                    s_rank = sender_waiting.pop(sg, -1)
                    if s_rank >= 0:
                        work.append(s_rank)
                e = sig_end[sg]
                if e < 0:
                    waiter[sg] = r
                    break
                st = start_time(t_free, e)
            else:
                st = t_free
            if joins == APPLIES:  # the optimizer starts when the rank's collectives have ended
                st = coll.applied(r, st)
            if role == NEEDS_RELOAD:  # after its reloads' copies
                st = max(st, *(fin.get(code + offset, 0.0) for offset in deps[k]))
            en = st + r_cost[k]
            if role == COPY_SOURCE:  # a forward an offload reads
                fin[code] = en
            st_row[i], en_row[i] = st, en
            if visits is not None:
                visits.append((r, i))
            t_free = en
            i += 1
            if (off := r_out[k]) >= 0:
                sg = off + 2 * mb
                x = r_link[k]
                if x >= 0.0:
                    leave, arrive = stream.carry(en, x)
                    sig_end[sg] = arrive
                    if comms is not None:
                        comms.append(_transfer(signals, rank_of_stage, r, i - 1, mb, sg, leave, arrive))
                else:
                    sig_end[sg] = en
                w = waiter.pop(sg, -1)
                if w >= 0:
                    work.append(w)
                if rendezvous and rank_of_stage[signals.receiver(sg)] != r:
                    p = posted[sg]
                    if p < 0:
                        sender_waiting[sg] = r
                        pending_send[r] = sg
                        break
                    t_free = after_rendezvous(t_free, p)
        cursor[r] = i
        free[r] = t_free

    arrivals = _sent_at(exp, start, cursor) if exp.mem_received is not None else None
    result = _summarise(exp, start, end, cursor, waiter, sender_waiting, pending_send, rank_of_stage, arrivals, coll)
    result.visits, result.transfers = visits, comms
    coll.stats(result, cursor)
    return result


# What a job is to the collective stream (`_collective_roles`)
# joined by the rank's replicas alone; a rendezvous of ranks (both below APPLIES: on the collective stream); a job
# that waits for them
JOINS, MEETS, APPLIES = 1, 2, 3


class _Collectives:
    """Rule 7 (`timing`) in `execute`: who has joined each collective, who waits in one, each rank's collective
    stream; `roles` (per slot) all 0 for a schedule without collectives, which then takes the plain path."""

    def __init__(self, exp: Expansion, used: set[int]) -> None:
        self.exp = exp
        roles, self.members = _collective_roles(exp, used)
        self.any = roles is not None
        self.roles = roles if roles is not None else [0] * len(exp.codec.slots())
        self.streams = [Stream() for _ in range(exp.pp)] if self.any else []
        self.joined: dict[int, dict[int, float]] = {}  # a collective's code -> rank -> when the rank reached it
        self.waiting: dict[int, int] = {}  # rank -> the code of the collective it waits in for the other members

    def join(self, r: int, code: int, slot: int, free: float, cost: float, work: list[int]):
        """(start, end, when the rank goes on) of rank `r` joining collective `code`, waking the members that
        waited for it; None while a member has not joined (the rank waits)."""
        if self.roles[slot] == MEETS:
            arrived = self.joined.setdefault(code, {})
            arrived.setdefault(r, free)
            group = self.members[slot]
            if len(arrived) < len(group):
                self.waiting[r] = code
                return None
            for x in group:
                if self.waiting.get(x) == code:
                    del self.waiting[x]
                    work.append(x)
            free = max(free, join_time(arrived.values()))
        start, end = self.streams[r].carry(free, cost)
        return start, end, free

    def applied(self, r: int, start: float) -> float:
        """When a job that applies the reduced gradients (the optimizer) may start: after the rank's collectives."""
        return max(start, self.streams[r].free)

    def waits(self) -> dict[int, tuple[int, int]]:
        """rank -> (the collective it waits in, the first member that has not joined it)."""
        joined, stride = self.joined, self.exp.codec.stride
        return {
            r: (code, min(x for x in self.members[code % stride] if x not in joined[code]))
            for r, code in self.waiting.items()
        }

    def stats(self, result: Execution, cursor: list[int]) -> None:
        if self.any:
            _collective_stats(self.exp, result, self.roles, cursor)


def _collective_roles(exp: Expansion, used: set[int]) -> tuple[list[int] | None, list[frozenset[int]]]:
    """Per slot of a code (`JobCodec.slots`): its role to the collective stream (a collective its replicas join
    with the rank, one that ranks meet in, a job that waits for the rank's collectives to end) and, for a meeting,
    its members: every rank whose order has the kind. Read off the kinds' rows (`stream`, `members`, `before`).
    None when the schedule runs no collective, so that every other schedule takes the plain path."""
    names = exp.type_names
    rows = [kind(name) for name in names]
    types = [t for t, k in enumerate(rows) if k is not None and k.collective and t in used]
    if not types:
        return None, []
    codec = exp.codec
    holders = {t: frozenset(r for r, jobs in enumerate(exp.jobs) if t in codec.types_in(jobs)) for t in types}
    applies = {names.index(n) for t in types for n in rows[t].before if n in names}
    roles, members = [], []
    for _, t, _ in codec.slots():
        if t in holders:
            meets = rows[t].members is Members.HOLDERS
            roles.append(MEETS if meets else JOINS)
            members.append(holders[t] if meets else frozenset())
        else:
            roles.append(APPLIES if t in applies else 0)
            members.append(frozenset())
    return roles, members


def _collective_stats(exp: Expansion, result: Execution, c_role: list[int], cursor: list[int]) -> None:
    """Each rank's collective time and the part of it its compute does not overlap (`timing.exposed_time`); the
    collectives run beside the compute, so they are no part of the rank's busy time."""
    stride = exp.codec.stride
    actions = MemoryActions.of(exp)
    for r, stats in enumerate(result.ranks):
        compute, collective = [], []
        for i in range(cursor[r]):
            code = exp.jobs[r][i]
            span = (result.start[r][i], result.end[r][i])
            role = c_role[code % stride]
            if role in (JOINS, MEETS):
                collective.append(span)
            elif actions is None or not actions.copies(exp.decode(code)[0]):
                compute.append(span)
        stats.collective = sum(e - s for s, e in collective)
        stats.exposed_collective = exposed_time(compute, collective)
        stats.busy -= stats.collective  # both summaries counted them as compute
        stats.idle += stats.collective
    makespan = result.makespan
    if makespan > 0:
        idle = sum(s.idle for s in result.ranks)
        result.bubble_ratio = bubble_ratio(idle, sum(s.recompute for s in result.ranks), len(result.ranks) * makespan)


def _copy(copies: CopyStreams, finished: dict[int, float], code: int, dep: int, inward: bool, free: float, cost):
    """(start, end) of the copy job `code` (a reload when `inward`), ready when the rank is free and the job it
    copies for (`code + dep`) has finished; its end is recorded for the job that waits for it."""
    ready = finished.get(code + dep, 0.0)
    leave, arrive = copies.carry(inward, free if free > ready else ready, cost)
    finished[code] = arrive
    return leave, arrive


def _slot_tables(exp: Expansion, used: set[int]) -> tuple[list[list[int]], list[list[int]], list, list]:
    """Per rank, indexed by a code's slot (its type and chunk; `JobCodec.stride`): the offset of the signal the job
    receives and of the one it sends (-1: none), its cost and its link time, so that `execute` reads a job's facts
    with one index."""
    in_off, out_off = _signal_tables(exp, used)
    transfer = _transfer_table(exp, out_off)
    slots, ranks = exp.codec.slots(), range(exp.pp)
    return (
        [[in_off[t][r][c] for _, t, c in slots] for r in ranks],
        [[out_off[t][r][c] for _, t, c in slots] for r in ranks],
        [[exp.cost[t][r][c] for _, t, c in slots] for r in ranks],
        [[transfer[t][r][c] for _, t, c in slots] for r in ranks],
    )


def _transfer(signals: Signals, rank_of_stage, r: int, step: int, mb: int, sg: int, leave, arrive) -> Transfer:
    """The record of signal `sg`'s transfer, sent by the job at `step` of rank `r` (`--record-comms`)."""
    stage, gradient, to = signals.stage(sg), signals.is_gradient(sg), rank_of_stage[signals.receiver(sg)]
    return Transfer(r, step, stage, mb, gradient, leave, arrive, to)


def _sent_at(exp: Expansion, start: list[list[float]], cursor: list[int]) -> list[list[float]]:
    """[rank][step]: when the job computing what this job receives from another stage started (its own start when it
    receives nothing): a forward's input is the forward's of the stage before, a backward's gradient the backward's
    (or backward_b's) of the stage after. By the jobs themselves, not the signals: an auxiliary job that receives for
    its anchor or sends for it does not move the value's life (`analysis.memory`)."""
    began: dict[tuple[int, int, int], float] = {}  # (flow, stage, micro-batch) -> start of the job computing it
    for r, codes in enumerate(exp.jobs):
        for i in range(cursor[r]):
            t, c, mb = exp.decode(codes[i])
            if t in FLOW:
                began.setdefault((FLOW[t], exp.stage_of[r][c], mb), start[r][i])
    out = []
    for r, codes in enumerate(exp.jobs):
        row = []
        for i in range(cursor[r]):
            t, c, mb = exp.decode(codes[i])
            frm = input_stage(t, exp.stage_of[r][c], exp.nstages)  # (None for a kind that reads no other stage)
            row.append(start[r][i] if frm is None else began.get((FLOW[t], frm, mb), start[r][i]))
        out.append(row)
    return out


# What a job is to the copy stream (`_copy_roles`); the copies themselves are the lowest
COPY_OUT, COPY_IN, COPY_SOURCE, NEEDS_RELOAD = 1, 2, 3, 4


def _copy_roles(exp: Expansion, used: set[int]) -> tuple[list[int] | None, list[tuple[int, ...]]]:
    """Per slot of a code (`JobCodec.slots`): its role (an offload copies out, a reload copies in, a forward is an
    offload's source, a backward / backward_b waits for its reload) and the code offsets of the jobs it reads
    (`code + offset`: the forward of an offload, the offload of a reload, the reloads of a backward). Read off the
    kinds' rows (`stream`, `memory`, `after`, `before`), so a new copy kind is timed as its row says. None when the
    schedule runs no copies, so that every other schedule takes the plain path."""
    actions = MemoryActions.of(exp)
    if actions is None or not any(actions.copies(t) for t in used):
        return None, []
    # read off the kinds' rows: a copy reads the end of its `after`; a job its row says a copy is `before` waits
    copy_types = [t for t in actions.types if actions.copies(t)]
    names = exp.type_names
    waited: dict[int, list[int]] = {}  # type -> the copy types whose end its job waits for
    for t in copy_types:
        for name in kind(names[t]).before:
            if name in names:
                waited.setdefault(names.index(name), []).append(t)
    sources = {actions.after[t] for t in copy_types if actions.after[t] >= 0 and not actions.copies(actions.after[t])}
    roles, deps = [], []
    for _, t, _ in exp.codec.slots():
        if t in copy_types:
            roles.append(COPY_IN if actions.restores(t) else COPY_OUT)
            deps.append((actions.after[t] - t,))
        elif t in waited:
            roles.append(NEEDS_RELOAD)
            deps.append(tuple(w - t for w in waited[t]))
        elif t in sources:
            roles.append(COPY_SOURCE)
            deps.append(())
        else:
            roles.append(0)
            deps.append(())
    return roles, deps


def _summarise(
    exp, start, end, cursor, waiter, sender_waiting, pending_send, rank_of_stage, arrivals, coll
) -> Execution:
    pp = exp.pp
    signals = Signals(exp.microbatches)
    blocked: list[Wait] = []
    by_rank: dict[int, Wait] = {}
    recv_wait = {r: sg for sg, r in waiter.items()}
    in_collective = coll.waits()
    for r in range(pp):
        jobs = exp.jobs[r]
        if pending_send[r] >= 0:
            sg = pending_send[r]
            stage = signals.receiver(sg)
            peer = rank_of_stage[stage]
            step = cursor[r] - 1
            w = Wait(r, step, exp.label(jobs[step]), "send", peer, _signal_job_label(exp, sg, stage))
        elif r in in_collective:
            code, peer = in_collective[r]
            step = cursor[r]
            w = Wait(r, step, exp.label(jobs[step]), "collective", peer, exp.label(code))
        elif cursor[r] < len(jobs):
            sg = recv_wait.get(r)
            step = cursor[r]
            if sg is None:  # pragma: no cover - a blocked rank always waits for something
                continue
            stage = signals.stage(sg)
            peer = rank_of_stage[stage]
            w = Wait(r, step, exp.label(jobs[step]), "receive", peer, _signal_job_label(exp, sg, stage))
        else:
            continue
        blocked.append(w)
        by_rank[r] = w

    cycle: list[Wait] = []
    if blocked:
        r = blocked[0].rank
        seen: list[int] = []
        while r in by_rank and r not in seen:
            seen.append(r)
            r = by_rank[r].peer
        if r in seen:
            cycle = [by_rank[x] for x in seen[seen.index(r) :]]

    actions = MemoryActions.of(exp)
    if actions is not None or arrivals is not None:
        return _summarise_actions(exp, actions, start, end, cursor, cycle, blocked, arrivals)
    ends = [row[cursor[r] - 1] if cursor[r] else 0.0 for r, row in enumerate(end)]
    makespan = max(ends) if ends else 0.0
    stats = []
    codec = exp.codec
    stride, slots = codec.stride, codec.slots()
    for r in range(pp):
        jobs = exp.jobs[r]
        busy = 0.0
        level = peak = 0.0
        peak_time = 0.0
        slot_cost = [exp.cost[t][r][c] for _, t, c in slots]  # by a code's slot, as in `execute`
        slot_mem = [exp.mem_delta[t][r][c] for _, t, c in slots]
        end_row = end[r]
        for i in range(cursor[r]):
            k = jobs[i] % stride
            busy += slot_cost[k]
            level += slot_mem[k]
            if level > peak:
                peak = level
                peak_time = end_row[i]
        stats.append(RankStats(r, busy, makespan - busy, peak, peak_time, len(jobs)))
    total_idle = sum(s.idle for s in stats)
    bubble = total_idle / (pp * makespan) if makespan > 0 else 0.0
    return Execution(makespan, bubble, stats, start, end, cycle, blocked)


def _summarise_actions(exp, actions: MemoryActions | None, start, end, cursor, cycle, blocked, arrivals) -> Execution:
    """`_summarise` for a schedule with memory actions or a model counting values in transit (`arrivals`): copies are
    not the rank's busy time (they run beside its compute), a copy may end after the rank's last job, and memory is
    counted at every instant (`analysis.memory`), on each rank and on the host."""
    pp = exp.pp
    ends = [max(row[: cursor[r]], default=0.0) for r, row in enumerate(end)]
    makespan = max(ends) if ends else 0.0
    stats = []
    for r in range(pp):
        jobs = [exp.decode(code) for code in exp.jobs[r][: cursor[r]]]
        busy = sum(exp.cost[t][r][c] for t, c, _ in jobs if actions is None or not actions.copies(t))
        recompute = 0.0 if actions is None else sum(exp.cost[t][r][c] for t, c, _ in jobs if actions.rebuilds(t))
        times = [(t, c, mb, start[r][i], end[r][i]) for i, (t, c, mb) in enumerate(jobs)]
        peak = peak_level(rank_levels(exp, r, times, arrivals[r][: cursor[r]] if arrivals is not None else None))
        level, at = (peak.level, peak.time) if peak else (0.0, 0.0)
        stats.append(RankStats(r, busy, makespan - busy, level, at, len(exp.jobs[r]), recompute))
    total_idle = sum(s.idle for s in stats)
    bubble = bubble_ratio(total_idle, sum(s.recompute for s in stats), pp * makespan) if makespan > 0 else 0.0
    result = Execution(makespan, bubble, stats, start, end, cycle, blocked, arrivals=arrivals)
    host = None
    if actions is not None and not blocked:
        host = max(host_levels(exp, start, end), key=lambda lv: lv.level, default=None)
    if host is not None:
        result.host_peak, result.host_peak_time = host.level, host.time
    return result


def _signal_job_label(exp: Expansion, sg: int, stage: int) -> str:
    """The job of `stage` that sends (or receives) signal `sg`, for messages."""
    _, c = exp.rank_of_stage()[stage]
    signals = Signals(exp.microbatches)
    kind = BACKWARD if signals.is_gradient(sg) else FORWARD
    return exp.label(exp.encode(kind, c, signals.microbatch(sg)))
