"""A periodic block built without a solver: every rank runs its jobs of a micro-batch back to back, in one
cyclic order, each rank's period turned a fixed step from the one before (`rotated`).

The periodic block (`periodic`) is one micro-batch's jobs at offsets, repeated every period T: on each rank its
jobs occupy phases (offset mod T) that must not overlap, and what the steady state holds (a forward's
activation until its backward, what I leaves until W, one copy per period the hold spans) stays within the
rank's limit. At the shortest period, the busiest rank's work, the phases must tile the period with no gap;
CP-SAT alone then needs seconds to find any block and cannot prove there is none (pp = 8 V, I 1.5, W 0.7,
limit 10: nothing in 2 s of deterministic time).

A tiling is easy to build: on every rank the same cyclic order of its jobs, back to back, rank r's starting
`step` after rank r - 1's; a job then starts at the first occurrence of its phase after its inputs, so the
phases tile and every dependency holds. Such a block rarely fits a tight limit (the holds are what the
rotation makes them; the steady state of V-Half in "Pipeline Parallelism with Controllable Memory" has ranks
whose orders differ), but as CP-SAT's hint it gives the tiling, and CP-SAT only has to move jobs by whole
periods and swap phases to fit the memory: a block at the shortest period in 0.3 s there. `rotation_block`
tries every cyclic order and STEPS steps and keeps the block nearest to fitting, then the shortest.
"""

from __future__ import annotations

import itertools

from ppdsl.analysis.timing import SAME_STAGE_INPUT, input_stage, link_delay
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD
from ppdsl.synth.cpsat import Statics

BlockJob = tuple[int, int]  # (type, stage) of one micro-batch's job


def holds(st: Statics, offsets: dict[BlockJob, int], split: bool) -> list[list[tuple[int, int, int]]]:
    """[rank] -> (begin, end, amount) of what one micro-batch holds there: a forward's activation until its
    gradient job, what I leaves until W."""
    p = st.problem
    grad = BACKWARD_B if split else BACKWARD
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(p.pp)]
    for s in range(p.nstages):
        r = p.rank_of[s]
        out[r].append((offsets[(FORWARD, s)], offsets[(grad, s)], st.mem[FORWARD][s]))
        if split:
            out[r].append((offsets[(grad, s)], offsets[(BACKWARD_W, s)], st.mem[FORWARD][s] + st.mem[BACKWARD_B][s]))
    return out


def steady_peak(rank_holds: list[tuple[int, int, int]], period: int) -> int:
    """The most a rank holds at once in the steady state (every period a micro-batch starts): a hold of length L
    counts once for each period it spans at a given phase (the block model's memory, `periodic.BlockModel`)."""
    best = 0
    for at, _, _ in rank_holds:
        level = sum(a * ((at - b) // period - (at - e) // period) for b, e, a in rank_holds if a > 0)
        best = max(best, level)
    return best


def span(st: Statics, offsets: dict[BlockJob, int]) -> int:
    return max(o + st.cost[t][s] for (t, s), o in offsets.items())


def excess(st: Statics, offsets: dict[BlockJob, int], period: int, split: bool) -> int:
    """How far the block's steady state goes over the limits, summed over the ranks (0: it fits)."""
    return sum(
        max(steady_peak(h, period) - st.cap[r], 0)
        for r, h in enumerate(holds(st, offsets, split))
        if st.cap[r] is not None
    )


def rank_jobs(st: Statics, rank: int, split: bool) -> list[BlockJob]:
    """A rank's jobs of the block: its forwards, its gradient jobs (the deepest stage's first), its W."""
    stages = st.problem.stages_of[rank]
    grad = BACKWARD_B if split else BACKWARD
    jobs = [(FORWARD, s) for s in stages] + [(grad, s) for s in reversed(stages)]
    return jobs + ([(BACKWARD_W, s) for s in reversed(stages)] if split else [])


def rotated(st: Statics, period: int, split: bool, cycle: tuple[int, ...], step: int) -> dict[BlockJob, int]:
    """The block in which every rank runs its jobs in the same cyclic order, back to back (`cycle[n]`: the
    position of `rank_jobs`' n-th), rank r's period starting `step` ticks after rank r - 1's; each job at the
    first occurrence of its phase after its inputs."""
    p = st.problem
    S = p.nstages
    grad = BACKWARD_B if split else BACKWARD
    link = [[st.tick(link_delay(x)) for x in row] for row in p.link]
    T = period
    phase: dict[BlockJob, int] = {}
    for r in range(p.pp):
        kinds = rank_jobs(st, r, split)
        at = r * step
        for n in sorted(range(len(kinds)), key=cycle.__getitem__):
            phase[kinds[n]] = at % T
            at += st.cost[kinds[n][0]][kinds[n][1]]
    offsets: dict[BlockJob, int] = {}

    def put(job: BlockJob) -> None:
        t, s = job
        x = 0
        if t in SAME_STAGE_INPUT:
            src = (SAME_STAGE_INPUT[t], s)
            x = offsets[src] + st.cost[src[0]][s]
        frm = input_stage(t, s, S)
        if frm is not None:
            src = (t if t == FORWARD else grad, frm)
            x = max(x, offsets[src] + st.cost[src[0]][frm] + link[src[0]][frm])
        offsets[job] = x + (phase[job] - x) % T

    for s in range(S):
        put((FORWARD, s))
    for s in reversed(range(S)):
        put((grad, s))
        if split:
            put((BACKWARD_W, s))
    return offsets


MAX_CYCLE_JOBS = 6  # a rank's jobs per micro-batch up to which every cyclic order is tried (5! orders)
STEPS = 16  # rotations between neighbouring ranks tried, evenly over the period


def rotation_block(st: Statics, period: int, split: bool) -> tuple[dict[BlockJob, int] | None, bool, int]:
    """The rotated block (`rotated`) nearest to fitting the limits, then the shortest: over every cyclic order
    of a rank's jobs and STEPS rotations. Returns (offsets, whether they fit, blocks built); no block when a
    rank has more than MAX_CYCLE_JOBS jobs per micro-batch or the ranks differ in how many."""
    sizes = {len(rank_jobs(st, r, split)) for r in range(st.problem.pp)}
    if len(sizes) != 1 or max(sizes) > MAX_CYCLE_JOBS:
        return None, False, 0
    n = sizes.pop()
    steps = sorted({round(j * period / STEPS) % period for j in range(STEPS)})
    best, built = None, 0
    for rest in itertools.permutations(range(1, n)):
        cycle = (0, *rest)
        for step in steps:
            offsets = rotated(st, period, split, cycle, step)
            built += 1
            key = (excess(st, offsets, period, split), span(st, offsets))
            if best is None or key < best[0]:
                best = (key, offsets)
    if best is None:
        return None, False, built
    return best[1], best[0][0] == 0, built
