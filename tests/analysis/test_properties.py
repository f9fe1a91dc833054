"""Property tests of the checker against pipeline theory, not against its own output.

(a) Schedules valid by construction check valid:
    * any per-rank order read off a global topological order of the pipeline's dependency graph (forward of
      stage s after stage s - 1, backward of stage s after stage s + 1, backward after its forward on the same
      rank, weight gradient after input gradient), written as a `table`;
    * the 1F1B family "w_r warm-up forwards, then one backward and one forward, then the rest" in `order`
      form, which is deadlock-free exactly when the warm-ups do not increase with the rank (proof below).
(b) Perturbing one rank of a valid expansion is caught with the right code: S101 (a job deleted), S102 (a job
    twice), S103 (backward before forward, weight before input gradient, or a rank waiting for itself), S104
    (the optimizer moved or removed), S105 (a cross-rank cycle built from a pair of jobs on adjacent stages).
(c) The execution model: start and end times equal an independent list-scheduling of the documented
    semantics; makespan >= busiest rank; scaling every cost scales the makespan; 1F1B / FThenB bubble
    (p - 1) / (m + p - 1) and makespan (m + p - 1)(F + B); peak activations of 1F1B, FThenB and Eager 1F1B.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import ppdsl
from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.expand import expand
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.language.resolve import load, resolve_text
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OPTIMIZER, is_action

from paths import LIBRARY

PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

# ----------------------------------------------------------------------------------------------------------
# Schedules valid by construction


def stage_map(pp: int, vpp: int, placement: str) -> list[list[int]]:
    """[rank][chunk] -> stage. Looped: chunk c of rank r is stage c * pp + r. V: the chunks zig-zag, so rank
    r holds stage r and stage 2 * pp - 1 - r (ZB-V's placement)."""
    if placement == "looped":
        return [[c * pp + r for c in range(vpp)] for r in range(pp)]
    return [[c * pp + (r if c % 2 == 0 else pp - 1 - r) for c in range(vpp)] for r in range(pp)]


@dataclasses.dataclass
class Generated:
    """A random valid schedule: `sequence` is a global topological order of its jobs."""

    pp: int
    m: int
    vpp: int
    placement: str
    stage_of: list[list[int]]
    where: dict[int, tuple[int, int]]  # stage -> (rank, chunk)
    split: dict[tuple[int, int], bool]  # (stage, mb) -> backward split into I + W
    sequence: list[tuple[str, int, int]]  # ("F" | "G" | "W", stage, mb); G = B or I
    costs: dict[str, tuple[int, int]]  # job -> (a, b): cost a + b * rank
    latency: int

    def cost(self, job: str, rank: int) -> int:
        a, b = self.costs[job]
        return a + b * rank

    def job_name(self, kind: str, stage: int, mb: int) -> str:
        if kind == "G":
            return "backward_b" if self.split[(stage, mb)] else "backward"
        return {"F": "forward", "W": "backward_w"}[kind]

    def orders(self) -> list[list[tuple[str, int, int]]]:
        """Per rank: (job name, chunk, mb) in order, optimizer last."""
        out: list[list[tuple[str, int, int]]] = [[] for _ in range(self.pp)]
        for kind, s, mb in self.sequence:
            r, c = self.where[s]
            out[r].append((self.job_name(kind, s, mb), c, mb))
        for row in out:
            row.append(("optimizer", 0, 0))
        return out

    def text(self) -> str:
        short = {"forward": "F", "backward": "B", "backward_b": "I", "backward_w": "W"}
        rows = []
        for r, row in enumerate(self.orders()):
            cells = [name if name == "optimizer" else f"{short[name]}{mb}.c{c}" for name, c, mb in row]
            rows.append(f"    rank {r}: " + " ".join(cells))
        costs = "\n".join(f"cost {job} = {a} + {b} * rank" for job, (a, b) in self.costs.items())
        return (
            f'schedule "generated"\nplacement {self.placement}\n{costs}\ncomm latency = {self.latency}\n'
            "table {\n" + "\n".join(rows) + "\n}\n"
        )


def generate(rnd: random.Random, pp: int, m: int, vpp: int, placement: str, split_share: float) -> Generated:
    """Append, one at a time, a random job whose dependencies have all been appended already."""
    nst = pp * vpp
    stage_of = stage_map(pp, vpp, placement)
    where = {s: (r, c) for r, row in enumerate(stage_of) for c, s in enumerate(row)}
    split = {(s, mb): rnd.random() < split_share for s in range(nst) for mb in range(m)}
    done: set[tuple[str, int, int]] = set()
    sequence = []
    while True:
        enabled = []
        for s in range(nst):
            for mb in range(m):
                if ("F", s, mb) not in done:
                    if s == 0 or ("F", s - 1, mb) in done:
                        enabled.append(("F", s, mb))
                elif ("G", s, mb) not in done:
                    if s == nst - 1 or ("G", s + 1, mb) in done:
                        enabled.append(("G", s, mb))
                elif split[(s, mb)] and ("W", s, mb) not in done:
                    enabled.append(("W", s, mb))
        if not enabled:
            break
        job = rnd.choice(enabled)
        done.add(job)
        sequence.append(job)
    jobs = ("forward", "backward", "backward_b", "backward_w", "optimizer")
    costs = {job: (rnd.randint(1, 3), rnd.randint(0, 2)) for job in jobs}
    return Generated(pp, m, vpp, placement, stage_of, where, split, sequence, costs, rnd.choice([0, 0, 1, 2]))


@st.composite
def generated(draw, placements=("looped", "vshape"), min_pp=1, min_vpp=1, max_vpp=3, min_m=1, splits=(0.0, 0.5, 1.0)):
    pp = draw(st.integers(min_pp, 4))
    vpp = draw(st.integers(min_vpp, max_vpp))
    m = draw(st.integers(min_m, 6))
    placement = draw(st.sampled_from(placements))
    split_share = draw(st.sampled_from(splits))
    return generate(draw(st.randoms(use_true_random=False)), pp, m, vpp, placement, split_share)


def expansion_of(gen: Generated) -> Expansion:
    return expand(resolve_text(gen.text(), "generated.sched"), gen.pp, gen.m, gen.vpp)


def reference_run(gen: Generated):
    """List scheduling of the documented semantics, in the generation order (a topological order).

    A job starts when its rank is free and its input has arrived. An output for another rank leaves on the
    sender's one send stream, in the order the jobs ran, and takes `latency` (no bandwidth declared); an
    output for the same rank is there when the job ends. Compute never waits for a send.
    Returns per-rank end times (jobs in rank order), busy times and peak activations.
    """
    nst = gen.pp * gen.vpp
    free = [0] * gen.pp
    send_free = [0] * gen.pp
    ends: list[list[int]] = [[] for _ in range(gen.pp)]
    busy = [0] * gen.pp
    level = [Fraction(0)] * gen.pp
    peak = [Fraction(0)] * gen.pp
    frees = {"forward": Fraction(-1), "backward": Fraction(1), "backward_b": Fraction(1, 2)}
    frees["backward_w"] = Fraction(1, 2)  # a split backward frees half with I (the default), half with W
    arrival: dict[tuple[str, int, int], int] = {}
    for kind, s, mb in gen.sequence:
        r, _ = gen.where[s]
        start = free[r]
        dep = ("F", s - 1, mb) if kind == "F" and s > 0 else ("G", s + 1, mb) if kind == "G" and s < nst - 1 else None
        if dep is not None:
            start = max(start, arrival[dep])
        name = gen.job_name(kind, s, mb)
        end = start + gen.cost(name, r)
        consumer = s + 1 if kind == "F" and s < nst - 1 else s - 1 if kind == "G" and s > 0 else None
        if consumer is not None and gen.where[consumer][0] != r:
            send_free[r] = max(end, send_free[r]) + gen.latency
            arrival[(kind, s, mb)] = send_free[r]
        else:
            arrival[(kind, s, mb)] = end
        free[r] = end
        ends[r].append(end)
        busy[r] += gen.cost(name, r)
        level[r] -= frees[name]
        peak[r] = max(peak[r], level[r])
    for r in range(gen.pp):
        free[r] += gen.cost("optimizer", r)
        busy[r] += gen.cost("optimizer", r)
        ends[r].append(free[r])
    return ends, busy, peak


@PROPERTY
@given(gen=generated())
def test_any_topological_order_is_a_valid_schedule_with_the_reference_timing(gen):
    result = check_expansion(expansion_of(gen))
    assert result.valid and not result.errors, [d.message for d in result.diagnostics]
    ex = result.execution
    ends, busy, peak = reference_run(gen)
    assert ex.end == ends
    assert ex.makespan == max(row[-1] for row in ends)
    assert [s.busy for s in ex.ranks] == busy
    assert [s.idle for s in ex.ranks] == [ex.makespan - b for b in busy]
    assert [s.peak_activations for s in ex.ranks] == [float(p) for p in peak]
    # no rank can finish before it has run its own jobs, nor before one micro-batch has crossed the pipeline
    assert ex.makespan >= max(busy)
    # (each rank holds vpp stages; a micro-batch's gradient goes through a backward or a backward_b per stage)
    gradient = {r: min(gen.cost("backward", r), gen.cost("backward_b", r)) for r in range(gen.pp)}
    assert ex.makespan >= gen.vpp * sum(gen.cost("forward", r) + gradient[r] for r in range(gen.pp))
    total_idle = sum(ex.makespan - b for b in busy)
    assert ex.bubble_ratio == pytest.approx(total_idle / (gen.pp * ex.makespan))


def warmup_schedule(warmups: list[int]) -> str:
    """1F1B with warm-up warmups[r] on rank r, in `order` form."""
    pick = str(warmups[-1])
    for r in range(len(warmups) - 2, -1, -1):
        pick = f"if rank == {r} then {warmups[r]} else {pick}"
    return (
        'schedule "warmups"\n'
        "order {\n"
        f"    let warmup = {pick}\n"
        "    forward * warmup\n"
        "    repeat microbatches - warmup { backward forward }\n"
        "    backward * warmup\n"
        "    optimizer\n"
        "}\n"
    )


@st.composite
def warmup_family(draw):
    pp = draw(st.integers(1, 5))
    m = draw(st.integers(1, 8))
    warmups = draw(st.lists(st.integers(1, m), min_size=pp, max_size=pp))
    return m, warmups


@PROPERTY
@given(case=warmup_family())
def test_warmup_family_is_deadlock_free_exactly_when_warmups_do_not_increase(case):
    """Rank r runs F0 .. F(w_r - 1), then B(k) F(k + w_r) for each k, then the remaining backwards.

    If w_(r+1) <= w_r for all r, the potential phi(F_j on r) = 2j + r/(2p), phi(B_k on r) = 2k + 2 w_r - 1 -
    r/(2p) strictly increases along every program-order and send edge, so the dependency graph is acyclic and
    no rank can hang. If w_(r+1) > w_r for some r, take j = w_r < m: F_j on r+1 needs F_j on r, which runs
    after B_0 on r, which needs B_0 on r+1, which runs after F_j there (w_(r+1) - 1 >= j): a cycle, S105.
    Peak activations on rank r are w_r.
    """
    m, warmups = case
    pp = len(warmups)
    non_increasing = all(a >= b for a, b in itertools.pairwise(warmups))
    result = check_expansion(expand(resolve_text(warmup_schedule(warmups), "warmups.sched"), pp, m))
    event("non-increasing" if non_increasing else "increasing")
    if non_increasing:
        assert result.valid, [d.message for d in result.diagnostics]
        assert [s.peak_activations for s in result.execution.ranks] == warmups
        assert [s.jobs for s in result.execution.ranks] == [2 * m + 1] * pp
    else:
        assert [d.code for d in result.errors] == ["S105"], [d.message for d in result.diagnostics]
        assert result.exit_code == 1
        increase = next(r for r in range(pp - 1) if warmups[r + 1] > warmups[r])
        stuck = {w.rank for w in result.execution.blocked}
        assert {increase, increase + 1} <= stuck


# ----------------------------------------------------------------------------------------------------------
# Bases for perturbation: library schedules at sizes their `require`s accept, and generated schedules


@functools.cache
def library_def(stem: str):
    return load(LIBRARY / f"{stem}.sched")


@functools.cache
def library_sizes() -> tuple[tuple[str, int, int, int], ...]:
    """(stem, pp, m, vpp) the schedule accepts; vpp.sched only where pp divides m (its documented flaw)."""
    out = []
    for path in sorted(LIBRARY.glob("*.sched")):
        defn = library_def(path.stem)
        for pp in range(1, 5):
            for m in range(1, 9):
                for vpp in (1, 2, 3):
                    if path.stem == "vpp" and m % pp:
                        continue
                    try:
                        expand(defn, pp, m, vpp)
                    except DiagnosticError:
                        continue
                    out.append((path.stem, pp, m, vpp))
    return tuple(out)


@functools.cache
def has_memory_actions(stem: str) -> bool:
    return any(is_action(jt.name) for jt in library_def(stem).job_types)


def library_base(stem: str, pp: int, m: int, vpp: int) -> Expansion:
    exp = expand(library_def(stem), pp, m, vpp)
    result = check_expansion(exp)
    assert result.valid, (stem, pp, m, vpp, [d.message for d in result.diagnostics])
    return exp


@st.composite
def valid_expansions(draw, library_filter=None, gen_strategy=None):
    """A valid Expansion: from the library (at an accepted size) or generated. The library's schedules with
    memory actions are left out: a perturbation of their compute also moves it across a recompute or a reload
    (S115-S118), and their properties are in checks/test_memory_action_order.py."""
    if draw(st.booleans()):
        sizes = [
            s
            for s in library_sizes()
            if not has_memory_actions(s[0]) and (library_filter is None or library_filter(*s))
        ]
        return library_base(*draw(st.sampled_from(sizes)))
    gen = draw(gen_strategy if gen_strategy is not None else generated())
    exp = expansion_of(gen)
    assert check_expansion(exp).valid
    return exp


def edited(exp: Expansion, rank: int, jobs: list[int], sites: list[int]) -> Expansion:
    """A copy of `exp` with one rank's order replaced (the original is left alone)."""
    all_jobs = [list(row) for row in exp.jobs]
    all_sites = [list(row) for row in exp.sites]
    all_jobs[rank], all_sites[rank] = jobs, sites
    return exp.with_orders(all_jobs, all_sites)


def moved(exp: Expansion, rank: int, src: int, dst: int) -> Expansion:
    """Move step `src` of `rank` so that it runs just before the job now at step `dst`."""
    jobs, sites = list(exp.jobs[rank]), list(exp.sites[rank])
    job, site = jobs.pop(src), sites.pop(src)
    if dst > src:
        dst -= 1
    jobs.insert(dst, job)
    sites.insert(dst, site)
    return edited(exp, rank, jobs, sites)


def caught(exp: Expansion, code: str, *facts: str):
    """The check finds exactly one error, `code` (exit 1), and its message or label mentions every fact
    (the rank, the job, the micro-batch: what the perturbation touched)."""
    result = check_expansion(exp)
    assert not result.valid and result.exit_code == 1
    errors = result.errors
    assert [d.code for d in errors] == [code], [f"{d.code}: {d.message}" for d in errors]
    text = f"{errors[0].message} / {errors[0].label}"
    for fact in facts:
        assert fact in text, (fact, text)
    return result


def steps_of(exp: Expansion, rank: int, t: int) -> list[int]:
    return [i for i, code in enumerate(exp.jobs[rank]) if exp.decode(code)[0] == t]


# ----------------------------------------------------------------------------------------------------------
# (b) perturbations


@PROPERTY
@given(exp=valid_expansions(), data=st.data())
def test_deleting_a_job_is_s101_or_s104_for_the_optimizer(exp, data):
    rank = data.draw(st.integers(0, exp.pp - 1))
    step = data.draw(st.integers(0, len(exp.jobs[rank]) - 1))
    code = exp.jobs[rank][step]
    jobs, sites = list(exp.jobs[rank]), list(exp.sites[rank])
    del jobs[step], sites[step]
    perturbed = edited(exp, rank, jobs, sites)
    t = exp.decode(code)[0]
    if not exp.defn.job_types[t].builtin and not any(t in exp.codec.types_in(row) for row in perturbed.jobs):
        # the only `recv_forward` (say) of the whole expansion: a schedule need not use its auxiliary jobs
        assert check_expansion(perturbed).valid
        return
    if t == OPTIMIZER:
        caught(perturbed, "S104", f"rank {rank}", "never runs the optimizer")
    else:
        caught(perturbed, "S101", f"rank {rank}", f"`{exp.label(code)}`")


@PROPERTY
@given(exp=valid_expansions(), data=st.data())
def test_running_a_job_twice_is_s102(exp, data):
    rank = data.draw(st.integers(0, exp.pp - 1))
    step = data.draw(st.integers(0, len(exp.jobs[rank]) - 1))
    jobs, sites = list(exp.jobs[rank]), list(exp.sites[rank])
    jobs.insert(step + 1, jobs[step])  # right after the original: nothing else changes order
    sites.insert(step + 1, sites[step])
    caught(edited(exp, rank, jobs, sites), "S102", f"rank {rank}", f"`{exp.label(jobs[step])}`")


@PROPERTY
@given(exp=valid_expansions(), data=st.data())
def test_a_backward_before_its_forward_is_s103(exp, data):
    rank = data.draw(st.integers(0, exp.pp - 1))
    grads = steps_of(exp, rank, BACKWARD) + steps_of(exp, rank, BACKWARD_B)
    src = data.draw(st.sampled_from(sorted(grads)))
    _, chunk, mb = exp.decode(exp.jobs[rank][src])
    dst = exp.jobs[rank].index(exp.encode(FORWARD, chunk, mb))
    caught(moved(exp, rank, src, dst), "S103", f"rank {rank}", f"micro-batch {mb} ", "before its forward")


@PROPERTY
@given(
    exp=valid_expansions(
        library_filter=lambda stem, *_: stem in ("zbh1", "zbv", "dualpipev", "zbvpp"),
        gen_strategy=generated(splits=(0.5, 1.0)),
    ),
    data=st.data(),
)
def test_a_weight_gradient_before_its_input_gradient_is_s103(exp, data):
    candidates = [(r, i) for r in range(exp.pp) for i in steps_of(exp, r, BACKWARD_W)]
    assume(candidates)
    rank, src = data.draw(st.sampled_from(candidates))
    _, chunk, mb = exp.decode(exp.jobs[rank][src])
    dst = exp.jobs[rank].index(exp.encode(BACKWARD_B, chunk, mb))
    caught(moved(exp, rank, src, dst), "S103", f"rank {rank}", f"micro-batch {mb} ", "weight gradient")


@PROPERTY
@given(exp=valid_expansions(), data=st.data())
def test_an_optimizer_before_the_end_is_s104(exp, data):
    rank = data.draw(st.integers(0, exp.pp - 1))
    last = len(exp.jobs[rank]) - 1
    assert exp.decode(exp.jobs[rank][last])[0] == OPTIMIZER
    dst = data.draw(st.integers(0, last - 1))
    caught(moved(exp, rank, last, dst), "S104", f"rank {rank}", "not the last")


def cycle_edits(exp: Expansion):
    """Single-job moves on one rank that close a cycle between two adjacent stages on different ranks.

    Stage s on rank a, stage s + 1 on rank b. If b runs F_j before G_k (j != k; G = backward or backward_b),
    then making a run G_k before F_j closes F_j@a -> F_j@b -> G_k@b -> G_k@a -> F_j@a. Either move G_k on
    a up to just before F_j (keeps F_k before G_k when F_k ran before F_j), or move F_j down to just after
    G_k (keeps F_j before G_j when G_j ran after G_k). Yields (rank a, rank b, src, dst).
    """
    where = exp.rank_of_stage()
    pos = {}
    for r in range(exp.pp):
        for i, code in enumerate(exp.jobs[r]):
            t, c, mb = exp.decode(code)
            pos[(r, t if t != BACKWARD_B else BACKWARD, c, mb)] = i
    for s in range(exp.nstages - 1):
        (a, ca), (b, cb) = where[s], where[s + 1]
        if a == b:
            continue
        for j in range(exp.microbatches):
            for k in range(exp.microbatches):
                if j == k or not pos[(b, FORWARD, cb, j)] < pos[(b, BACKWARD, cb, k)]:
                    continue
                fj, gk = pos[(a, FORWARD, ca, j)], pos[(a, BACKWARD, ca, k)]
                assert fj < gk, "the valid schedule already had this cycle"
                if pos[(a, FORWARD, ca, k)] < fj:
                    yield a, b, gk, fj
                if pos[(a, BACKWARD, ca, j)] > gk:
                    yield a, b, fj, gk + 1


def _no_aux(stem, *_):
    # 1f1b and vpp receive and send in auxiliary jobs; the cycle construction moves the jobs that communicate
    return stem not in ("1f1b", "vpp")


def assert_cross_rank_deadlock(exp: Expansion, rank: int) -> None:
    """Only `rank` changed and the original completed, so every wait cycle runs through `rank`; the moves of
    `cycle_edits` add no wait of a rank for itself, so the hang is reported as S105."""
    result = caught(exp, "S105", "deadlock")
    assert rank in {w.rank for w in result.execution.deadlock}


@PROPERTY
@given(
    exp=valid_expansions(
        library_filter=lambda stem, pp, m, vpp: _no_aux(stem) and pp >= 2 and m >= 2,
        gen_strategy=generated(min_pp=2, min_m=2),
    ),
    data=st.data(),
)
def test_a_cross_rank_cycle_is_s105(exp, data):
    edits = list(cycle_edits(exp))
    assume(edits)  # e.g. a: F0 F1 B0 B1, b: F0 B0 F1 B1 takes two moves to close a cycle
    a, _, src, dst = data.draw(st.sampled_from(edits))
    assert_cross_rank_deadlock(moved(exp, a, src, dst), a)


def test_every_single_move_cycle_of_eager_1f1b_is_s105():
    exp = library_base("eager1f1b", 4, 8, 1)
    edits = list(cycle_edits(exp))
    assert len(edits) >= 50
    for a, _, src, dst in edits:
        assert_cross_rank_deadlock(moved(exp, a, src, dst), a)


@PROPERTY
@given(
    exp=valid_expansions(
        library_filter=lambda stem, pp, m, vpp: stem in ("zbv", "dualpipev", "zbvpp"),
        gen_strategy=generated(placements=("vshape",), min_vpp=2),
    ),
    data=st.data(),
)
def test_a_rank_waiting_for_its_own_later_job_is_s103(exp, data):
    """On a V the last rank holds stages pp - 1 and pp: running F_j of the second before F_j of the first
    makes the rank wait for itself."""
    rank = exp.pp - 1
    assert exp.stage_of[rank][0] == exp.pp - 1 and exp.stage_of[rank][1] == exp.pp
    mb = data.draw(st.integers(0, exp.microbatches - 1))
    src = exp.jobs[rank].index(exp.encode(FORWARD, 1, mb))
    dst = exp.jobs[rank].index(exp.encode(FORWARD, 0, mb))
    caught(moved(exp, rank, src, dst), "S103", f"rank {rank} waits for itself")


# ----------------------------------------------------------------------------------------------------------
# (c) execution invariants


@PROPERTY
@given(exp=valid_expansions(), k=st.sampled_from([2, 3, 7, 0.5]))
def test_scaling_every_cost_scales_the_makespan(exp, k):
    before = check_expansion(exp).execution
    scaled = dataclasses.replace(
        exp,
        cost=[[[k * x for x in row] for row in per_rank] for per_rank in exp.cost],
        latency=k * exp.latency,
    )
    after = check_expansion(scaled).execution
    assert after.makespan == k * before.makespan
    assert [s.busy for s in after.ranks] == [k * s.busy for s in before.ranks]
    assert after.bubble_ratio == pytest.approx(before.bubble_ratio)
    assert [s.peak_activations for s in after.ranks] == [s.peak_activations for s in before.ranks]
    assert after.makespan >= max(s.busy for s in after.ranks)


FLUSH_SIZES = [(p, m) for p in range(1, 7) for m in range(1, 13)]


@pytest.mark.parametrize(("f", "b"), [(1, 1), (1, 2), (2, 1), (1, 3)])
@pytest.mark.parametrize("stem", ["1f1b", "fthenb", "eager1f1b"])
def test_flush_schedules_take_m_plus_p_minus_1_steps(stem, f, b):
    """PipeDream-Flush / GPipe with F and B: makespan (m + p - 1)(F + B), idle (p - 1)(F + B) per rank; with
    F = B the bubble ratio is (p - 1) / (m + p - 1)."""
    checked = 0
    for p, m in FLUSH_SIZES:
        if (stem == "1f1b" and m < p) or (stem == "eager1f1b" and m < 2 * p - 1):
            continue
        result = ppdsl.check(LIBRARY / f"{stem}.sched", pp=p, microbatches=m, costs={"forward": f, "backward": b})
        assert result.valid, (p, m, [d.message for d in result.diagnostics])
        ex = result.execution
        assert ex.makespan == (m + p - 1) * (f + b), (p, m)
        assert [s.idle for s in ex.ranks] == [(p - 1) * (f + b)] * p, (p, m)
        if f == b:
            assert ex.bubble_ratio == pytest.approx((p - 1) / (m + p - 1)), (p, m)
        checked += 1
    assert checked >= 20


def test_1f1b_p4_m8_with_backward_twice_the_forward():
    result = ppdsl.check(LIBRARY / "1f1b.sched", pp=4, microbatches=8, costs={"forward": 1, "backward": 2})
    ex = result.execution
    assert ex.makespan == 33  # (8 + 4 - 1) * (1 + 2)
    assert [s.idle for s in ex.ranks] == [9, 9, 9, 9]  # (4 - 1) * (1 + 2)
    assert [s.busy for s in ex.ranks] == [24, 24, 24, 24]  # 8 * (1 + 2)
    assert ex.bubble_ratio == pytest.approx(9 / 33)


@pytest.mark.parametrize(("p", "m"), [(p, m) for p in range(1, 6) for m in range(1, 11)])
def test_peak_activations(p, m):
    """In-flight micro-batches per stage s: 1F1B min(p - s, m), FThenB m per chunk, Eager 1F1B 2(p - s) - 1."""
    stages = range(p)
    if m >= p:
        ex = ppdsl.check(LIBRARY / "1f1b.sched", pp=p, microbatches=m).execution
        assert [r.peak_activations for r in ex.ranks] == [min(p - s, m) for s in stages]
    for vpp in (1, 2):
        ex = ppdsl.check(LIBRARY / "fthenb.sched", pp=p, microbatches=m, vpp=vpp).execution
        assert [r.peak_activations for r in ex.ranks] == [m * vpp] * p
    if m >= 2 * p - 1:
        ex = ppdsl.check(LIBRARY / "eager1f1b.sched", pp=p, microbatches=m).execution
        assert [r.peak_activations for r in ex.ranks] == [2 * (p - s) - 1 for s in stages]
