"""Memory-aware list scheduling: all ranks simulated together, each choosing its next job when it falls idle.

A rank decides at the moment it is free, among the jobs whose input has arrived (never waiting for a job that
may not come): a backward (`I`, or a whole `B`) first, since the gradient chain is the critical path; then a
forward, if its rank has room for it; a deferred weight gradient (`W`) fills what is left, or runs first when a
forward waits for the memory it frees. The knobs of a `Policy` vary this (W before F, deeper chunks first,
reserving memory for a micro-batch's later chunks, a cap on micro-batches in flight); the search tries many.
A planned policy follows a plan instead (a periodic block's times, `periodic`): the ready job planned first
runs, unless it would delay a job planned before it whose input is about to arrive.

Timing follows the checker exactly: a job starts when its rank is free and its input has arrived; an output
for another rank leaves on the sender's send stream (one transfer after another) and takes the link time.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, replace

from ppdsl.language.jobtypes import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order

EPS = 1e-9
RANK_KNOBS = ("reserve", "inflight", "w_lag")


@dataclass(frozen=True)
class Policy:
    split: bool = True  # backward as I + W (else whole B)
    w_before_f: bool = False  # a pending W outranks a ready forward (else W only fills idle time)
    deep_first: bool = True  # among ready forwards of different chunks, the deeper stage first
    deep_first_b: bool = True  # among ready backwards of different chunks, the deeper stage first
    # Patience: a W that would still run when any input known to be on its way arrives (w_fit), or a forward that
    # would still run when a backward input arrives (f_fit), is not started: the rank waits for that input.
    w_fit: bool = False
    f_fit: bool = False
    # Admitting a new micro-batch on a rank (its first chunk there) must leave room for forwards of later chunks,
    # or the rank can fill up with first-chunk activations while the forwards that lead to their backwards wait:
    # None keeps room for every later-chunk forward of every admitted micro-batch (always safe, often too
    # cautious), k >= 0 keeps room for k of them (tighter, may deadlock; such a policy is then dropped).
    reserve: int | tuple[int | None, ...] | None = None
    inflight: int | tuple[int | None, ...] | None = None  # at most this many micro-batches in flight on a rank
    w_lag: int | tuple[int | None, ...] | None = None  # at most this many deferred W on a rank (0: W right after I)
    seed: int | None = None  # random tie-breaking between equally ranked ready jobs
    # Planned: the job with the best `priority` (a planned order) runs first whatever its kind, and a job does not
    # start when it would still run as the input of a job planned before it arrives.
    planned: bool = False
    # reserve, inflight and w_lag are one value for every rank, or a tuple of one per rank

    def at(self, knob: str, rank: int) -> int | None:
        value = getattr(self, knob)
        return value[rank] if isinstance(value, tuple) else value

    def per_rank(self, pp: int) -> Policy:
        """The same policy with reserve, inflight and w_lag spelled out per rank (for the search to vary)."""
        return replace(self, **{k: tuple(self.at(k, r) for r in range(pp)) for k in RANK_KNOBS})

    def label(self) -> str:
        parts = ["split" if self.split else "whole"]
        parts.append("W>F" if self.w_before_f else "F>W")
        parts.append("deep" if self.deep_first else "shallow")
        if self.deep_first_b != self.deep_first:
            parts.append("deep-B" if self.deep_first_b else "shallow-B")
        if self.w_fit:
            parts.append("W-fits")
        if self.f_fit:
            parts.append("F-fits")
        for knob, text in (("reserve", "reserve {}"), ("inflight", "inflight<={}"), ("w_lag", "w-lag<={}")):
            value = getattr(self, knob)
            if isinstance(value, tuple):
                if any(v is not None for v in value):
                    parts.append(text.format("(" + ",".join("-" if v is None else str(v) for v in value) + ")"))
            elif value is not None:
                parts.append(text.format(value))
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        if self.planned:
            parts.append("planned")
        return " ".join(parts)


def list_schedule(problem: Problem, policy: Policy, priority: dict | None = None) -> list[Order] | None:
    """Every rank's order under `policy`, or None when the policy runs into a memory deadlock.

    `priority` (optional) maps (type, stage, mb) to a number that breaks ties between ready jobs of the same
    rank (higher first) before the policy's own rules: the search's way of steering individual jobs.
    """
    p = problem
    m, S = p.microbatches, p.nstages
    bwd = BACKWARD_B if policy.split else BACKWARD
    rng = random.Random(policy.seed) if policy.seed is not None else None
    cost, link, mem = p.cost, p.link, p.mem

    next_f = [0] * S  # next micro-batch to go forward on each stage
    next_b = [0] * S  # next micro-batch to go backward
    pending_w: list[list[int]] = [[] for _ in range(S)]  # micro-batches whose W is deferred, oldest first
    f_in = [[-1.0] * m for _ in range(S)]  # when a stage's forward input arrives (-1: not yet known)
    g_in = [[-1.0] * m for _ in range(S)]
    f_end = [[-1.0] * m for _ in range(S)]
    for mb in range(m):
        f_in[0][mb] = 0.0

    pp = p.pp
    free = [0.0] * pp
    send_free = [0.0] * pp
    level = [0.0] * pp
    reserved = [0.0] * pp  # memory promised to the later-chunk forwards of micro-batches already admitted
    inflight = [0] * pp
    deferred = [0] * pp
    orders: list[Order] = [[] for _ in range(pp)]
    remaining = [len(p.stages_of[r]) * m * (3 if policy.split else 2) for r in range(pp)]
    first_stage = [p.stages_of[r][0] for r in range(pp)]
    # what a micro-batch's forwards add to a rank's memory, all its chunks together
    need = [sum(mem[FORWARD][s] for s in p.stages_of[r]) for r in range(pp)]
    # with `reserve = k`: room kept for k later-chunk forwards when a new micro-batch is admitted
    later = [max((mem[FORWARD][s] for s in p.stages_of[r][1:]), default=0.0) for r in range(pp)]

    def by_preference(deep: bool) -> list[list[int]]:
        return [sorted(p.stages_of[r], key=(lambda s: -s) if deep else (lambda s: s)) for r in range(pp)]

    stages_by_pref, backward_pref = by_preference(policy.deep_first), by_preference(policy.deep_first_b)

    heap = [(0.0, r) for r in range(pp)]

    def wake(r: int, at: float) -> None:
        """Have rank r reconsider when a new input for it arrives (it may be earlier than what it waits for)."""
        heapq.heappush(heap, (max(free[r], at), r))

    def emit(r: int, t: int, s: int, mb: int, end: float) -> None:
        """The output of job (t, s, mb), ended at `end` on rank r, on its way to the next (previous) stage."""
        if t == FORWARD:
            if s == S - 1:
                return
            to, table = s + 1, f_in
        elif t in (BACKWARD, BACKWARD_B):
            if s == 0:
                return
            to, table = s - 1, g_in
        else:
            return
        x = link[t][s]
        if x >= 0.0:
            leave = end if end > send_free[r] else send_free[r]
            arrive = leave + x
            send_free[r] = arrive
        else:
            arrive = end
        table[to][mb] = arrive
        wake(p.rank_of[to], arrive)

    def tie(t: int, s: int, mb: int) -> float:
        value = 0.0
        if priority is not None:
            value = -priority.get((t, s, mb), 0.0)
        if rng is not None:
            value += rng.random() * 1e-6
        return value

    done = 0
    total = sum(remaining)
    while heap:
        now, r = heapq.heappop(heap)
        if remaining[r] == 0 or now < free[r] - EPS:
            continue  # finished, or an entry from before the rank's last job
        lim = p.limit[r]
        ready_b = None  # (key, stage, mb)
        ready_f = None
        next_known = float("inf")  # the earliest known input still on its way
        next_b_known = float("inf")  # the same, of backward inputs
        coming = []  # (planned) jobs whose input is on its way: (tie value, arrival)
        for s in backward_pref[r]:
            k = next_b[s]
            if k < next_f[s]:
                arrival = f_end[s][k] if s == S - 1 else g_in[s][k]
                if arrival >= 0.0:
                    if arrival <= now + EPS:
                        key = (tie(bwd, s, k), backward_pref[r].index(s))
                        if ready_b is None or key < ready_b[0]:
                            ready_b = (key, s, k)
                    else:
                        if arrival < next_b_known:
                            next_b_known = arrival
                        if policy.planned:
                            coming.append((tie(bwd, s, k), arrival))
        next_known = next_b_known
        for s in stages_by_pref[r]:
            k = next_f[s]
            if k < m:
                arrival = f_in[s][k]
                if arrival >= 0.0:
                    if arrival <= now + EPS:
                        fits = _admissible(p, policy, r, s, level, reserved, inflight, need, later, first_stage, lim)
                        if fits:
                            key = (tie(FORWARD, s, k), stages_by_pref[r].index(s))
                            if ready_f is None or key < ready_f[0]:
                                ready_f = (key, s, k)
                    else:
                        if arrival < next_known:
                            next_known = arrival
                        if policy.planned:
                            coming.append((tie(FORWARD, s, k), arrival))
        oldest_w = None
        if policy.split:
            for s in stages_by_pref[r]:
                if pending_w[s]:
                    key = (tie(BACKWARD_W, s, pending_w[s][0]), pending_w[s][0], stages_by_pref[r].index(s))
                    if oldest_w is None or key < oldest_w[0]:
                        oldest_w = (key, s, pending_w[s][0])
        lag = policy.at("w_lag", r)
        must_w = lag is not None and deferred[r] > lag
        choice = None
        if policy.planned and not must_w:
            options = [(x[0][0], kind, x[1], x[2]) for kind, x in ((bwd, ready_b), (FORWARD, ready_f)) if x]
            if oldest_w is not None:
                options.append((oldest_w[0][0], BACKWARD_W, oldest_w[1], oldest_w[2]))
            if options:
                planned, *choice = min(options)
                # not when it would delay a job planned before it whose input is about to arrive
                if any(p_ < planned and now + cost[choice[0]][choice[1]] > a + EPS for p_, a in coming):
                    choice = None
        elif oldest_w is not None and (must_w or (policy.w_before_f and ready_b is None)):
            choice = (BACKWARD_W, oldest_w[1], oldest_w[2])
        elif ready_b is not None:
            choice = (bwd, ready_b[1], ready_b[2])
        elif ready_f is not None:
            choice = (FORWARD, ready_f[1], ready_f[2])
        elif oldest_w is not None:
            choice = (BACKWARD_W, oldest_w[1], oldest_w[2])
        if choice is not None and choice[0] != bwd and not must_w and not policy.planned:
            arrives = next_known if choice[0] == BACKWARD_W else next_b_known
            patient = policy.w_fit if choice[0] == BACKWARD_W else policy.f_fit
            if patient and now + cost[choice[0]][choice[1]] > arrives + EPS:
                choice = None
        if choice is None:
            if next_known < float("inf"):
                heapq.heappush(heap, (next_known, r))
            continue  # else another rank's output will wake it

        t, s, mb = choice
        arrival = 0.0
        if t == FORWARD:
            arrival = f_in[s][mb]
        elif t == bwd and s < S - 1:
            arrival = g_in[s][mb]
        start = now if now > arrival else arrival
        end = start + cost[t][s]
        free[r] = end
        orders[r].append((t, s, mb))
        remaining[r] -= 1
        done += 1
        if t == FORWARD:
            if s == first_stage[r]:
                inflight[r] += 1
                reserved[r] += need[r] - mem[FORWARD][s]
            else:
                reserved[r] -= mem[FORWARD][s]
            level[r] += mem[FORWARD][s]
            next_f[s] += 1
            f_end[s][mb] = end
        elif t == bwd:
            level[r] += mem[t][s]
            next_b[s] += 1
            if s == first_stage[r]:
                inflight[r] -= 1
            if policy.split:
                pending_w[s].append(mb)
                deferred[r] += 1
        else:  # BACKWARD_W
            level[r] += mem[t][s]
            pending_w[s].pop(0)
            deferred[r] -= 1
        emit(r, t, s, mb, end)
        if remaining[r]:
            heapq.heappush(heap, (end, r))
    if done < total:
        return None  # a memory deadlock: the policy admitted more than the limit lets finish
    return orders


def _admissible(p, policy, r, s, level, reserved, inflight, need, later, first_stage, lim) -> bool:
    """May rank r run the next forward on stage `s` now, memory- and in-flight-wise?"""
    if s == first_stage[r]:  # a new micro-batch on this rank
        cap = policy.at("inflight", r)
        if cap is not None and inflight[r] >= cap:
            return False
        reserve = policy.at("reserve", r)
        if reserve is None:
            return level[r] + reserved[r] + need[r] <= lim + EPS
        return level[r] + p.mem[FORWARD][s] + reserve * later[r] <= lim + EPS
    if policy.at("reserve", r) is None:
        return True  # its memory was reserved when the micro-batch was admitted
    return level[r] + p.mem[FORWARD][s] <= lim + EPS
