"""A synthesis problem: the sizes, where each stage lives, what each job costs, how long its output travels,
what it holds in memory, and each rank's memory limit.

Everything is read off an `Expansion` of a probe schedule (the built-in job types on the requested placement),
through the same `Scenario` as `ppdsl check`: costs from `cost` declarations, `--cost` and `--costs FILE`,
latency and bandwidth, the default memory accounting or bytes measured on a model. So a synthesized schedule is
timed and measured by exactly the rules the checker will apply to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.execution import link_times
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS, scale_costs
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MeasureMemory, MemoryModel
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.language.resolve import resolve_text
from ppdsl.plan.kinds import (
    BACKWARD,
    BACKWARD_B,
    BACKWARD_W,
    DEFAULT_RECOMPUTE_FRACTION,
    FORWARD,
    OPTIMIZER,
    Memory,
    is_action,
    memory_of,
)
from ppdsl.synth.request import ACTION_NAMES as ACTION_NAMES  # (the request's vocabulary: engines read it here)
from ppdsl.synth.request import KEEP as KEEP
from ppdsl.synth.request import OFFLOAD as OFFLOAD
from ppdsl.synth.request import PLACEMENTS, SPLIT_MODES
from ppdsl.synth.request import RECOMPUTE as RECOMPUTE

# The built-in job types on a placement; the order is never run for its jobs, only for its tables.
_PROBE = """schedule "synth"
placement {placement}
memory backward_b frees {frees}
{actions}{order}
"""
# the probe's own order: the search places every job itself, and only the probe's tables are read
_ORDER = "order { optimizer }\n"
# With `--dp` above 1 the probe's order names `reduce_grads`, so its expansion has the collective's job type and
# its cost at that degree as `check --dp` reads it (`cost reduce_grads`, or `comm reduce ...` over the ring); each
# chunk's reduction is then placed by the search's evaluation (`schedule.with_reductions`), never by this order.
_REDUCING = "order { for c in 0 .. vpp { reduce_grads(chunk = c) } optimizer }\n"
REDUCE_NAME = "reduce_grads"
# With `--memory-actions` the probe names the actions, so its expansion has their job types, costs and memory as
# `check` reads them (`kinds.recompute_share`: a recomputed forward keeps its stage input, and the rest a partial
# recompute leaves; a recompute costs its fraction of the forward).
_ACTIONS = "memory recompute fraction = {fraction}\n"
_HOST = "memory host limit = {limit}\n"
LEVEL_DENOMINATOR = 1000  # memory changes that are fractions with up to this denominator have a level step
# Bytes measured on a model (`--model`) are read off the program as an expansion's orders cut it, so the probe whose
# tables the search uses is measured with an order that runs every job type it may place: one micro-batch at a time,
# each micro-batch forward through a rank's chunks and back (with the actions: micro-batch 0 offloaded, reloaded
# and recomputed before its backward, so the plan makes a program of each). The search never runs this order.
_MEASURING_ORDER = """order {{
    for n in 0 .. microbatches {{
        for c in 0 .. vpp {{ forward(chunk = c, mb = n) {offload} }}
        for k in 0 .. vpp {{ {before}{backward} }}
    }}
    optimizer
}}
"""
_ACTION_JOBS = "if n == 0 {{ {jobs} }} "


@dataclass
class Problem:
    """Tables indexed [type][stage] (a stage is one (rank, chunk)), for the four compute job types."""

    pp: int
    vpp: int
    microbatches: int
    placement: str
    split: str  # auto | yes | no
    rank_of: list[int]  # [stage] -> rank
    chunk_of: list[int]  # [stage] -> chunk
    stages_of: list[list[int]]  # [rank] -> its stages, in the order a micro-batch visits them
    cost: list[list[float]]  # [type][stage]
    link: list[list[float]]  # [type][stage]: transfer time of its output, -1 when it stays on its rank
    mem: list[list[float]]  # [type][stage]: change of the rank's memory level
    limit: list[float]  # [rank]; inf without a limit
    optimizer_cost: list[float]  # [rank]: the optimizer runs last on every rank
    memory_unit: str = "activations"
    backward_b_frees: float = 0.5
    expansion: Expansion | None = field(default=None, repr=False)  # the probe's: what schedules are timed with
    recompute_fraction: float | None = None  # with memory actions: what a recompute rebuilds of a forward
    dp: int = 1  # data-parallel replicas of each rank: above 1 each chunk's gradients are reduced (`reduce`)
    # [stage]: what its `reduce_grads` costs on the collective stream; empty at dp 1 (no reduction is placed)
    reduce: list[float] = field(default_factory=list)

    @property
    def reduce_type(self) -> int | None:
        """The job type of `reduce_grads` in the probe's expansion; None when no reduction is placed."""
        if not self.reduce or self.expansion is None:
            return None
        return self.expansion.type_names.index(REDUCE_NAME)

    @property
    def nstages(self) -> int:
        return self.pp * self.vpp

    @property
    def jobs_per_step(self) -> int:
        per_mb = 2 if self.split == "no" else 3
        return self.nstages * self.microbatches * per_mb

    def minimum_memory(self) -> list[float]:
        """[rank]: the least memory any schedule needs there. A micro-batch's activation on a rank's first stage
        is held until its backward there, which comes after its forwards on every later stage of the rank (and
        their backwards), so at some point a rank holds one micro-batch's forwards on all its stages; running
        one micro-batch at a time needs no more."""
        return [sum(self.mem[FORWARD][s] for s in self.stages_of[r]) for r in range(self.pp)]

    def sequential(self) -> list[list[tuple[int, int, int]]]:
        """The schedule that runs one micro-batch at a time through every stage and back: slow, but it fits any
        limit that `minimum_memory` fits (the search's safety net)."""
        orders: list[list[tuple[int, int, int]]] = [[] for _ in range(self.pp)]
        backward = [BACKWARD] if self.split == "no" else [BACKWARD_B, BACKWARD_W]
        for mb in range(self.microbatches):
            for s in range(self.nstages):
                orders[self.rank_of[s]].append((FORWARD, s, mb))
            for s in reversed(range(self.nstages)):
                orders[self.rank_of[s]].extend((t, s, mb) for t in backward)
        return orders

    def stage_of(self, rank: int, chunk: int) -> int:
        for s in self.stages_of[rank]:
            if self.chunk_of[s] == chunk:
                return s
        raise KeyError((rank, chunk))


def stage_table(problem: Problem, t: int, of: str = "cost") -> list[float]:
    """[stage] of an expansion table (`cost` or `mem_delta`) for a job type the problem's tables leave out (the
    memory actions')."""
    values = getattr(problem.expansion, of)[t]
    return [values[problem.rank_of[s]][problem.chunk_of[s]] for s in range(problem.nstages)]


def build_problem(
    pp: int,
    microbatches: int,
    vpp: int = 1,
    placement: str = "looped",
    costs: CostSpec | Mapping[str, float] | None = None,
    memory_limit: float | None = None,
    memory: MemoryModel | MeasureMemory | None = None,
    split: str = "auto",
    backward_b_frees: float = 0.5,
    cost_scale: float = 1.0,
    max_jobs: int = DEFAULT_MAX_JOBS,
    memory_actions: bool = False,
    recompute_fraction: float = DEFAULT_RECOMPUTE_FRACTION,
    host_limit: float | None = None,
    dp: int = 1,
) -> Problem:
    """The problem for these sizes and costs; raises DiagnosticError for impossible inputs. `cost_scale`
    multiplies every job's cost (`ppdsl compare` measures a chunk as 1/vpp of a rank's work). At `dp` above 1 each
    chunk's gradients are reduced over its replicas, timed as `check --dp` times a `reduce_grads`."""
    problems = []
    if placement not in PLACEMENTS:
        problems.append(Diagnostic("E007", f"unknown placement `{placement}`", help="use `looped` or `vshape`"))
    if split not in SPLIT_MODES:
        problems.append(Diagnostic("E007", f"unknown --split-backward `{split}`", help="use auto, yes or no"))
    if placement == "vshape" and vpp % 2:
        problems.append(
            Diagnostic(
                "E007",
                f"a V-shaped placement needs an even number of chunks per rank, got --vpp {vpp}",
                help="use --vpp 2 (ZB-V, DualPipeV), or --placement looped",
            )
        )
    if not 0.0 <= backward_b_frees <= 1.0:
        problems.append(Diagnostic("E007", "--backward-b-frees is a fraction of an activation, from 0 to 1"))
    if memory_limit is not None and memory_limit <= 0:
        problems.append(Diagnostic("E007", f"the memory limit must be positive, got {memory_limit:g}"))
    if problems:
        raise DiagnosticError(problems)
    if memory is not None and not isinstance(memory, MemoryModel):
        memory = measured_problem_memory(
            memory,
            pp,
            microbatches,
            vpp,
            placement,
            split,
            backward_b_frees,
            memory_actions,
            recompute_fraction,
            max_jobs,
        )
    order = _REDUCING if dp > 1 else _ORDER
    text = _probe_text(placement, backward_b_frees, memory_actions, recompute_fraction, host_limit, order)
    probe = resolve_text(text, "<synth>")
    scenario = Scenario(
        probe, pp, microbatches, vpp, None, costs, memory=memory, memory_limit=memory_limit, max_jobs=max_jobs, dp=dp
    )
    exp = scenario.expansion()
    if cost_scale != 1.0:
        exp = scale_costs(exp, cost_scale)
    problem = problem_from_expansion(exp, placement, split, backward_b_frees, memory_actions)
    if dp > 1:
        reduce = stage_table(problem, exp.type_names.index(REDUCE_NAME))
        problem = replace(problem, dp=dp, reduce=reduce)
    return problem


def _probe_text(
    placement: str,
    backward_b_frees: float,
    memory_actions: bool,
    recompute_fraction: float,
    host_limit: float | None,
    order: str = _ORDER,
) -> str:
    actions = ""
    if memory_actions:
        actions = _ACTIONS.format(fraction=repr(float(recompute_fraction)))
        if host_limit is not None:
            actions += _HOST.format(limit=repr(float(host_limit)))
    return _PROBE.format(placement=placement, frees=repr(float(backward_b_frees)), actions=actions, order=order)


def measured_problem_memory(
    memory: MeasureMemory,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    placement: str = "looped",
    split: str = "auto",
    backward_b_frees: float = 0.5,
    memory_actions: bool = False,
    recompute_fraction: float = DEFAULT_RECOMPUTE_FRACTION,
    max_jobs: int = DEFAULT_MAX_JOBS,
) -> MemoryModel:
    """Bytes measured (`--model`) on the probe with an order that runs every job type the search may place
    (`_MEASURING_ORDER`): a whole backward with `--split-backward no` (a model whose backward cannot split is then
    measured), else backward_b and backward_w (`backward` frees what its forward allocated either way, and the
    split's rows are what a synthesized I / W is checked with). Measure once and pass the model to every
    `build_problem` of one search: each measurement builds the model's program."""
    chunk = "chunk = vpp - 1 - k, mb = n"
    backward = f"backward({chunk})" if split == "no" else f"backward_b({chunk}) backward_w({chunk})"
    offload = before = ""
    if memory_actions:
        offload = _ACTION_JOBS.format(jobs="offload(chunk = c, mb = n)")
        again = f"reload({chunk}) recompute({chunk})"
        before = _ACTION_JOBS.format(jobs=again)
    order = _MEASURING_ORDER.format(offload=offload, before=before, backward=backward)
    text = _probe_text(placement, backward_b_frees, memory_actions, recompute_fraction, None, order)
    return memory(Scenario(resolve_text(text, "<synth>"), pp, microbatches, vpp, max_jobs=max_jobs).expansion())


def problem_from_expansion(
    exp: Expansion, placement: str, split: str, backward_b_frees: float = 0.5, memory_actions: bool = False
) -> Problem:
    """The problem of an expansion's tables. Its job types may include the memory actions only for the
    actions engine (`memory_actions`, synth/actions.py, which times every candidate by the checker's execution);
    the order engines time F, B, I, W only, so a schedule with actions is refused for them (E083)."""
    if not memory_actions and any(is_action(name) for name in exp.type_names):
        raise DiagnosticError(
            [
                Diagnostic(
                    "E083",
                    f"`{exp.defn.name}` has recompute, offload or reload jobs: synth does not search them yet",
                    help="check and simulate it with `ppdsl check` / `ppdsl plot`; to have synth choose the "
                    "actions itself: `ppdsl synth ... --memory-actions recompute,offload`",
                )
            ]
        )
    nstages = exp.nstages
    rank_of, chunk_of = [0] * nstages, [0] * nstages
    for r, row in enumerate(exp.stage_of):
        for c, s in enumerate(row):
            rank_of[s], chunk_of[s] = r, c
    stages_of = [sorted(row) for row in exp.stage_of]
    links = link_times(exp)

    def table(values: list[list[list[float]]]) -> list[list[float]]:
        return [[values[t][rank_of[s]][chunk_of[s]] for s in range(nstages)] for t in range(4)]

    limit = [float("inf") if x is None else float(x) for x in exp.memory_limit]
    for t in (FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W):
        for s in range(nstages):
            if exp.cost[t][rank_of[s]][chunk_of[s]] < 0:
                raise DiagnosticError([Diagnostic("E007", f"a negative cost for `{exp.type_names[t]}`")])
    return Problem(
        pp=exp.pp,
        vpp=exp.vpp,
        microbatches=exp.microbatches,
        placement=placement,
        split=split,
        rank_of=rank_of,
        chunk_of=chunk_of,
        stages_of=stages_of,
        cost=table(exp.cost),
        link=table(links),
        mem=table(exp.mem_delta),
        limit=limit,
        optimizer_cost=[exp.cost[OPTIMIZER][r][0] for r in range(exp.pp)],
        memory_unit=exp.memory_unit,
        backward_b_frees=backward_b_frees,
        expansion=exp,
        recompute_fraction=_recompute_fraction(exp),
    )


def _recompute_fraction(exp: Expansion) -> float | None:
    """The probe's `memory recompute fraction` (None without memory actions)."""
    for jt in exp.defn.job_types:
        if memory_of(jt.name) is Memory.REBUILDS:
            return 1.0 if jt.fraction is None else jt.fraction
    return None


def level_step(problem: Problem) -> Fraction | None:
    """The step between the memory levels a rank can be at, in any schedule: every level is a sum of the jobs'
    memory changes, so a multiple of their greatest common divisor (0.5 activations with the defaults). None
    when it is not a small exact fraction (bytes measured on a model, values in transit between jobs)."""
    exp = problem.expansion
    if problem.memory_unit != "activations" or exp is None or exp.mem_received is not None:
        return None
    step = Fraction(0)
    for per_type in exp.mem_delta:
        for per_rank in per_type:
            for delta in per_rank:
                exact = Fraction(delta).limit_denominator(LEVEL_DENOMINATOR)
                if abs(float(exact) - delta) > 1e-12:
                    return None
                step = _gcd(step, abs(exact))
    return step if step > 0 else None


TOLERANCE = Fraction(1, 10**9)


def searched_limits(problem: Problem) -> Problem:
    """The problem with each rank's limit lowered to the highest level a schedule can reach under it
    (`level_step`): the same schedules fit, so every limit between two levels is the same search, and the same
    file (but for the limit it names). The problem itself when there is nothing to lower."""
    step = level_step(problem)
    if step is None or all(math.isinf(x) for x in problem.limit):
        return problem
    # (a billionth of a step of tolerance: 1.2 is a level of 0.1 though the float 1.2 is just below it)
    lowered = [x if math.isinf(x) else float(step * math.floor(Fraction(x) / step + TOLERANCE)) for x in problem.limit]
    if lowered == problem.limit:
        return problem
    return replace(problem, limit=lowered)


def _gcd(a: Fraction, b: Fraction) -> Fraction:
    return Fraction(math.gcd(a.numerator * b.denominator, b.numerator * a.denominator), a.denominator * b.denominator)
