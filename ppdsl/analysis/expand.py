"""ScheduleDef + sizes -> Expansion: bind pp / vpp / microbatches / params, check `require`s, run every rank's
order, tabulate placement, costs and memory, with the costs from outside, a measured memory model and a memory
limit applied. `expand` is the one builder: an `Expansion` is complete when it returns and never written after.

Errors here are S1xx (the schedule is wrong for these sizes), E007 (bad parameter use) or E075 (a cost or memory
declaration gives a number that is not one: NaN, infinite, a negative cost), with the span of the statement that
was running.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, replace

from ppdsl.analysis.costs import COST_RANGE, CostSpec, CostTable, cost_value_problem
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.layers import StageWork
from ppdsl.analysis.memory import MemoryModel
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.sizes import MAX_SIZE
from ppdsl.common.text import count, number_text, numbered
from ppdsl.language import types
from ppdsl.language.ir import Expr, ScheduleDef
from ppdsl.language.runnable import compiled
from ppdsl.plan.jobs import JobCodec
from ppdsl.plan.kinds import Members, Memory, default_cost, kind, recompute_share

DEFAULT_BACKWARD_B_FREES = 0.5
# The most jobs an expansion may hold unless the caller raises it (`--max-jobs`): pp=64, vpp=4, microbatches=4096
# with four jobs per micro-batch (Paddle's 1F1B and VPP orders, with their receive and send jobs) is 4,194,368.
DEFAULT_MAX_JOBS = 1 << 23
# A rank's order may take this many evaluation steps (a loop iteration of a body of n statements is n steps) per
# job it can own, plus a constant for small sizes: the library needs under 4 per job (tests/analysis/test_expand.py)
# and a runaway loop is stopped within a few milliseconds.
BUDGET_PER_JOB = 16
BUDGET_BASE = 1 << 16


def evaluation_budget(ntypes: int, vpp: int, microbatches: int) -> int:
    """Evaluation steps one rank's order may take: proportional to the jobs a rank owns at these sizes."""
    return BUDGET_PER_JOB * ntypes * vpp * microbatches + BUDGET_BASE


def least_jobs(pp: int, vpp: int, microbatches: int) -> int:
    """The fewest jobs any complete schedule runs at these sizes: a forward and a backward per (rank, chunk,
    micro-batch), and an optimizer per rank."""
    return 2 * pp * vpp * microbatches + pp


@dataclass
class _OrderFailure(Exception):
    site: int
    kind: str
    value: object
    budget: int | None = None


def _fail(site: int, kind: str, value: object, budget: int | None = None) -> None:
    raise _OrderFailure(site, kind, value, budget)


def bind_params(defn: ScheduleDef, given: dict[str, object] | None) -> dict[str, int | float | bool]:
    """Every parameter's value: its default, or the one given, read (text from the command line) or checked
    (a Python value) against the default's type. Raises DiagnosticError (E007) naming each bad one."""
    values: dict[str, int | float | bool] = {name: p.default for name, p in defn.params.items()}
    problems = []
    for name, value in (given or {}).items():
        p = defn.params.get(name)
        if p is None:
            known = ", ".join(f"`{n}`" for n in defn.params) or "none"
            problems.append(
                Diagnostic("E007", f"`{defn.name}` has no parameter `{name}`", help=f"its parameters: {known}")
            )
            continue
        ty = types.type_of(p.default)
        try:
            values[name] = types.convert(value, ty)
        except ValueError:
            shown = value if isinstance(value, str) else types.show(value)
            default = types.show(p.default)
            takes = "`true` or `false`" if ty == types.BOOL else types.describe(ty)
            problems.append(
                Diagnostic(
                    "E007",
                    f"parameter `{name}` takes {takes}, not `{shown}`",
                    p.span,
                    label=f"declared here, default `{default}`",
                    help=f"write `--param {name}=true` or `--param {name}=false`"
                    if ty == types.BOOL
                    else f"write {types.describe(ty)}, e.g. `--param {name}={default}` (the default)",
                )
            )
    if problems:
        raise DiagnosticError(problems)
    return values


# The chunk counts a schedule is tried at when its size is left to it: the library's `require`s pin at most 2.
DEFAULT_VPP_CANDIDATES = range(1, 9)


def default_vpp(defn: ScheduleDef, pp: int, microbatches: int, params: dict[str, object] | None = None) -> int:
    """The chunks per rank when none are asked for: 1, unless the schedule's `require`s refuse 1 and allow exactly
    one count from 1 to 8 (ZB-V's `require vpp == 2`), which is then the only size it can mean. Where several
    counts or none hold, 1 stands and the check says which `require` fails."""
    try:
        base = {"pp": pp, "microbatches": microbatches, **bind_params(defn, params)}
        allowed = [
            v
            for v in DEFAULT_VPP_CANDIDATES
            if all(_safe_bool(defn, r.condition, {**base, "vpp": v}, r.span) for r in defn.requires)
        ]
    except DiagnosticError:  # a parameter or a `require` that fails to evaluate: the expansion reports it
        return 1
    return allowed[0] if len(allowed) == 1 else 1


def expand(
    defn: ScheduleDef,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: dict[str, object] | None = None,
    max_jobs: int = DEFAULT_MAX_JOBS,
    *,
    costs: CostSpec | None = None,
    memory: MemoryModel | None = None,
    memory_limit: float | None = None,
    stages: StageWork | None = None,
    dp: int = 1,
) -> Expansion:
    """Bind sizes and run the order of every rank (`dp`: the data-parallel replicas of each rank, which run its
    order too and join its `reduce_grads`). The schedule's own costs, memory and limit, with `stages` (a
    partition's work per stage, `ppdsl.analysis.layers`) over its costs and activations, `costs` from outside over
    those, `memory` (measured bytes) instead of its activation counts and `memory_limit` instead of its limit on
    every rank. Sizes that need more than `max_jobs` jobs are refused before anything runs, and
    each rank's order has an evaluation budget proportional to its jobs. Raises DiagnosticError on any failure."""
    if costs is not None:
        costs.check_names(defn)
    for name, value in (("pp", pp), ("microbatches", microbatches), ("vpp", vpp)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SIZE:
            raise DiagnosticError(
                [Diagnostic("E007", f"`{name}` must be an integer from 1 to {MAX_SIZE}, got {types.show(value)}")]
            )
    least = least_jobs(pp, vpp, microbatches)
    if least > max_jobs:
        raise DiagnosticError(
            [_too_many_jobs(f"pp={pp}, vpp={vpp}, microbatches={microbatches} need at least", least, max_jobs)]
        )
    env: dict = {"pp": pp, "vpp": vpp, "microbatches": microbatches, **bind_params(defn, params)}

    failed = [r for r in defn.requires if not _safe_bool(defn, r.condition, env, r.span)]
    if failed:
        raise DiagnosticError(
            [
                Diagnostic(
                    "S100",
                    r.message,
                    r.span,
                    label=f"`{r.source}` is false for pp={pp}, vpp={vpp}, microbatches={microbatches}",
                    help="choose sizes that satisfy this requirement",
                )
                for r in failed
            ]
        )

    stage_of = _placement(defn, env, pp, vpp)
    jobs, sites = _run_orders(defn, env, pp, vpp, microbatches)
    lone: list[list[tuple[int, int, int]]] = []
    if dp == 1:
        jobs, sites, lone = _without_lone_reductions(defn, jobs, sites)
    total = sum(map(len, jobs))
    if total > max_jobs:
        raise DiagnosticError([_too_many_jobs(f"the order of `{defn.name}` runs", total, max_jobs)])
    return _build(defn, env, stage_of, jobs, sites, costs, memory, memory_limit, stages, dp, lone)


def _build(
    defn: ScheduleDef,
    env: dict,
    stage_of: list[list[int]],
    jobs: list[list[int]],
    sites: list[list[int]],
    costs: CostSpec | None = None,
    memory: MemoryModel | None = None,
    memory_limit: float | None = None,
    stages: StageWork | None = None,
    dp: int = 1,
    lone_reductions: list[list[tuple[int, int, int]]] | None = None,
) -> Expansion:
    """The expansion of these orders: the schedule's tables evaluated at `env`, the inputs from outside over
    them. (The schedule's own memory and limit are evaluated even when replaced: a declaration that fails at
    these sizes is reported either way.)"""
    pp, vpp = env["pp"], env["vpp"]
    names = [jt.name for jt in defn.job_types]
    cost = _job_table(defn, env, pp, vpp, stage_of, _cost_fns(defn))
    _check_declared_numbers(defn, cost, "the cost of", cost_value_problem, defn.costs)
    declared_memory = {k: fn for k, (_, fn) in defn.memory.items()}
    amounts = _job_table(
        defn, env, pp, vpp, stage_of, {jt.name: declared_memory.get(jt.name, 0.0) for jt in defn.job_types}
    )
    _check_declared_numbers(defn, amounts, "the memory of", _amount_problem, declared_memory)
    mem = _job_table(defn, env, pp, vpp, stage_of, _memory_fns(defn))
    _check_memory_actions(defn, mem)
    if stages is not None:
        _apply_stage_work(stages, names, stage_of, cost, mem)
    latency, bandwidth = _comm_link(defn, env)
    limit = _rank_limits(defn, env, pp)
    # what memory counts: a model's measured unit, else the profile's (its layers' `activation_bytes`: bytes)
    memory_unit = memory.unit if memory is not None else stages.memory_unit if stages is not None else "activations"
    if memory_unit == "bytes" and defn.memory_limit and memory_limit is None:
        by = "--model measures" if memory is not None else "the layer profile's `activation_bytes` count"
        raise DiagnosticError([_limit_in_activations(defn.memory_limit, limit[0], by)])
    host_limit = _host_limit(defn, env)
    copy = _copy_link(defn, env)
    rules = [
        replace(rule, priority=None if prio is None else int(_call(defn, prio, env, rule.span)))
        for rule, prio in zip(defn.rules, defn.rule_priorities, strict=True)
    ]
    table = CostTable(cost, latency, bandwidth)
    if costs is not None:
        table = costs.apply(table, names, stage_of)
    assert len(table.jobs) == len(names)
    mem_delta = mem if memory is None else memory.table(names, stage_of, [jt.fraction for jt in defn.job_types])
    _memory_action_costs(defn, table.jobs, mem_delta, copy, _named_from_outside(costs))
    _reduce_costs(defn, table.jobs, env, dp, _named_from_outside(costs))
    return Expansion(
        defn=defn,
        pp=pp,
        vpp=vpp,
        microbatches=env["microbatches"],
        params={k: env[k] for k in defn.params},
        stage_of=stage_of,
        jobs=jobs,
        sites=sites,
        cost=table.jobs,
        latency=table.latency,
        bandwidth=table.bandwidth,
        mem_delta=mem_delta,
        memory_limit=limit if memory_limit is None else [memory_limit] * pp,
        rules=rules,
        memory_unit=memory_unit,
        memory_limit_given=memory_limit is not None,
        host_limit=host_limit,
        copy_duplex=bool(copy[2]),
        mem_received=None if memory is None else memory.received_table(names, stage_of),
        stage_work=stages,
        dp=dp,
        lone_reductions=lone_reductions or [],
    )


def _comm_link(defn: ScheduleDef, env: dict) -> tuple[float, float | None]:
    """The schedule's `comm latency` and `comm bandwidth` at these sizes (0 and None when not declared)."""
    latency = _call(defn, defn.comm["latency"], env, real=True) if "latency" in defn.comm else 0.0
    bandwidth = _call(defn, defn.comm["bandwidth"], env, real=True) if "bandwidth" in defn.comm else None
    for key, value in (("latency", latency), ("bandwidth", bandwidth)):
        problem = None if value is None else cost_value_problem(value, key)
        if problem is not None:
            raise DiagnosticError([_bad_number(f"`comm {key}` {problem}", defn.comm[key], COST_RANGE)])
    return latency, bandwidth


def _rank_limits(defn: ScheduleDef, env: dict, pp: int) -> list[float | None]:
    """The schedule's `memory limit` of each rank at these sizes (None: no limit declared)."""
    if not defn.memory_limit:
        return [None] * pp
    span = defn.memory_limit.span
    limit = [_call(defn, defn.memory_limit, {**env, "rank": r}, span, real=True) for r in range(pp)]
    for r, value in enumerate(limit):
        problem = _amount_problem(value)
        if problem is not None:
            message = f"the memory limit of rank {r} {problem}"
            raise DiagnosticError([_bad_number(message, defn.memory_limit, AMOUNT_RANGE, span)])
    return limit


def _host_limit(defn: ScheduleDef, env: dict) -> float | None:
    """The schedule's `memory host limit`, what all ranks' offloads may hold on the host together (None: none)."""
    if not defn.host_limit:
        return None
    host_limit = _call(defn, defn.host_limit, {**env, "rank": 0}, defn.host_limit.span, real=True)
    problem = _amount_problem(host_limit)
    if problem is not None:
        raise DiagnosticError([_bad_number(f"the host memory limit {problem}", defn.host_limit, AMOUNT_RANGE)])
    return host_limit


def _apply_stage_work(work: StageWork, names: list[str], stage_of, cost, mem) -> None:
    """A partition's work over the schedule's own tables (which nothing else holds yet): with a profile, a stage's
    forward, backward, backward_b and backward_w take the sums of its layers' times; without one, each costs the
    schedule's cost times the stage's layer count. Every job's memory change is its stage's activation times the
    schedule's (a layer holds one unit, or its profiled activation), so a schedule's fractions (what backward_b
    frees, what a recompute keeps) hold per layer."""
    profiled = {
        "forward": work.forward,
        "backward": tuple(b + w for b, w in zip(work.backward_b, work.backward_w, strict=True)),
        "backward_b": work.backward_b,
        "backward_w": work.backward_w,
    }
    counts = work.partition.counts
    for t, name in enumerate(names):
        for r, row in enumerate(stage_of):
            for c, s in enumerate(row):
                if name in profiled:
                    cost[t][r][c] = profiled[name][s] if work.profiled else cost[t][r][c] * counts[s]
                mem[t][r][c] *= work.activation[s]


def _check_memory_actions(defn: ScheduleDef, mem) -> None:
    """A recompute keeps, and an offload moves, an amount from 0 to what the forward allocates: more would make a
    recompute free memory or an offload move what was never there."""
    names = [jt.name for jt in defn.job_types]
    for t, name in enumerate(names):
        action = kind(name)
        if action is None or action.memory not in (Memory.REBUILDS, Memory.MOVES_OUT) or name not in defn.memory:
            continue
        rebuilds = action.memory is Memory.REBUILDS
        verb = "keeps" if rebuilds else "moves"
        forward = mem[names.index(action.after)]
        for r, row in enumerate(mem[t]):
            for c, value in enumerate(row):
                amount = forward[r][c] - value if rebuilds else -value
                if not 0.0 <= amount <= forward[r][c] + 1e-12:
                    where = f"rank {r}" + (f", chunk {c}" if len(row) > 1 else "")
                    fn = defn.memory[name][1]
                    raise DiagnosticError(
                        [
                            _bad_number(
                                f"`memory {name} {verb}` gives {amount:g} at {where}, outside 0 .. the forward's "
                                f"{forward[r][c]:g}",
                                fn,
                                "from 0 to what the forward allocates",
                            )
                        ]
                    )


def _copy_link(defn: ScheduleDef, env: dict) -> tuple[float, float | None, bool]:
    """(latency, bandwidth, duplex) of the host link the copy stream uses (`comm offload ...`)."""
    comm = defn.comm
    latency = _call(defn, comm["offload latency"], env, real=True) if "offload latency" in comm else 0.0
    bandwidth = _call(defn, comm["offload bandwidth"], env, real=True) if "offload bandwidth" in comm else None
    for key, value in (("offload latency", latency), ("offload bandwidth", bandwidth)):
        problem = None if value is None else cost_value_problem(value, key)
        if problem is not None:
            raise DiagnosticError([_bad_number(f"`comm {key}` {problem}", comm[key], COST_RANGE)])
    duplex = bool(_call(defn, comm["offload duplex"], env)) if "offload duplex" in comm else False
    return latency, bandwidth or None, duplex


def ring_share(group: int) -> float:
    """The share of its data a ring all-reduce over `group` ranks sends from each: 2 (D - 1) / D (a reduce-scatter
    then an all-gather, each moving (D - 1) / D of it); 0 alone, where there is nothing to reduce with."""
    return 2.0 * (group - 1) / group if group > 1 else 0.0


def _reduce_costs(defn: ScheduleDef, cost, env: dict, dp: int, given: set[str]) -> None:
    """With the collectives' link (`comm reduce bandwidth`, `latency`, `size`: one chunk's gradients in the
    bandwidth's units, 1 unless declared), a `reduce_grads` nobody gave a cost takes the latency plus the ring's
    share (`ring_share(dp)`) of the gradients over the bandwidth; at dp 1 none, as it reduces with no one. Called
    while the expansion is built, on tables nothing else holds yet."""
    comm = defn.comm
    if "reduce bandwidth" not in comm and "reduce latency" not in comm:
        return
    values = {}
    for key, default in (("reduce latency", 0.0), ("reduce bandwidth", None), ("reduce size", 1.0)):
        value = _call(defn, comm[key], env, real=True) if key in comm else default
        problem = None if value is None else cost_value_problem(value, key)
        if problem is not None:
            raise DiagnosticError([_bad_number(f"`comm {key}` {problem}", comm[key], COST_RANGE)])
        values[key] = value
    bandwidth = values["reduce bandwidth"] or None
    seconds = 0.0 if dp <= 1 else values["reduce latency"]
    if bandwidth is not None:
        seconds += ring_share(dp) * values["reduce size"] / bandwidth
    for t, jt in enumerate(defn.job_types):
        k = kind(jt.name)
        if k is None or k.members is not Members.REPLICAS or jt.name in defn.costs or jt.name in given:
            continue
        cost[t] = [[seconds for _ in row] for row in cost[t]]


def _named_from_outside(costs: CostSpec | None) -> set[str]:
    """The job types whose cost `--cost` or `--costs FILE` gives."""
    return set() if costs is None else costs.names()


def _memory_action_costs(defn: ScheduleDef, cost, mem_delta, copy, given: set[str]) -> None:
    """Fill in the costs of memory actions nobody gave: a recompute takes its fraction of what its forward takes
    (after the costs from outside: `--cost forward=3` makes full recomputes 3 too, those of `fraction = 0.5` 1.5);
    with a host link (`comm offload bandwidth`), an offload or reload takes the link's latency plus the bytes it
    moves over the bandwidth (else its type's default). Called while the expansion is built, on tables nothing
    else holds yet."""
    names = [jt.name for jt in defn.job_types]
    latency, bandwidth, _ = copy
    for t, name in enumerate(names):
        action = kind(name)
        if action is None or not action.acts_on_memory or name in defn.costs or name in given:
            continue
        if action.memory is Memory.REBUILDS:  # a recompute of a fraction f of the forward re-runs f of its work
            part = 1.0 if defn.job_types[t].fraction is None else defn.job_types[t].fraction
            cost[t] = [[part * x for x in row] for row in cost[names.index(action.after)]]
        elif action.copies and bandwidth is not None:  # what it moves: its own, or (a restore) its offload's
            moved = mem_delta[t if action.memory is Memory.MOVES_OUT else names.index(action.after)]
            cost[t] = [[latency + abs(m) / bandwidth for m in row] for row in moved]


def _finite_problem(value: float) -> str | None:
    return None if math.isfinite(value) else "is not a number (NaN)" if math.isnan(value) else "is infinite"


# What every memory number a schedule declares is: an amount (`allocates`, `frees`, `keeps`, `moves`, a limit, the
# host limit). The verb carries the sign, so a negative amount has no meaning: `memory forward allocates -3` would
# make forwards free memory and prove any order within any limit.
AMOUNT_RANGE = "a finite amount of 0 or more (the verb says which way memory goes)"


def _amount_problem(value: float) -> str | None:
    """Why `value` is not an amount of memory (None if it is one): NaN, infinite or negative."""
    return _finite_problem(value) or (f"is negative ({value:g})" if value < 0 else None)


def _check_declared_numbers(defn: ScheduleDef, table, what: str, problem_of, declared: dict) -> None:
    """Every value a `cost` (or `memory`) declaration gives is a cost (a finite amount): a NaN, infinite or
    negative cost would make every measure after it meaningless ("makespan nan", "bubble 400%")."""
    for t, jt in enumerate(defn.job_types):
        fn = declared.get(jt.name)
        if fn is None:
            continue
        for r, row in enumerate(table[t]):
            for c, value in enumerate(row):
                problem = problem_of(value)
                if problem is not None:
                    where = f"rank {r}" + (f", chunk {c}" if len(row) > 1 else "")
                    expected = COST_RANGE if problem_of is cost_value_problem else AMOUNT_RANGE
                    raise DiagnosticError([_bad_number(f"{what} `{jt.name}` {problem} at {where}", fn, expected)])


def _bad_number(message: str, expr: Expr, expected: str, span: Span | None = None) -> Diagnostic:
    return Diagnostic(
        "E075",
        message,
        span or expr.span,
        label=f"`{expr.text}`",
        help=f"make it {expected} for these sizes",
    )


def _limit_in_activations(expr: Expr, value: float | None, by: str = "--model measures") -> Diagnostic:
    """A schedule's `memory limit` counts activations (a forward holds 1); a model's memory is measured in bytes,
    and no one factor turns one into the other (a stage's forward bytes differ by stage, chunk and batch size), so
    the limit is refused with the reason, not read as bytes (`memory limit = 2` was "limit of 2 B" on every rank)."""
    return Diagnostic(
        "E088",
        f"the schedule's `memory limit` ({number_text(value)} on rank 0) counts activations, but {by} memory in bytes",
        expr.span,
        label=f"`{expr.text}`",
        help="give the limit in bytes on the command line (`--memory-limit 2GiB`, which replaces this one), or check "
        "without --model (or with a profile of layer activations) to count activations",
    )


def scale_costs(exp: Expansion, factor: float) -> Expansion:
    """The same expansion with every job's cost multiplied by `factor` > 0 (`ppdsl compare` and `synth` can
    measure a chunk as 1/vpp of a rank's work); the links, the memory and the orders are the same."""
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
        raise ValueError(f"a cost scale is a positive number, not {factor!r}")
    cost = [[[x * factor for x in per_chunk] for per_chunk in per_rank] for per_rank in exp.cost]
    return replace(exp, cost=cost)


def _too_many_jobs(what: str, jobs: int, limit: int) -> Diagnostic:
    return Diagnostic(
        "E015",
        f"{what} {count(jobs, 'job')}, over the limit of {limit:,}",
        help=f"choose smaller sizes, or raise the limit with `--max-jobs {jobs}` (memory and time grow with it)",
    )


def _safe_bool(defn: ScheduleDef, expr: Expr, env: dict, span: Span | None = None) -> bool:
    return bool(_call(defn, expr, env, span))


def _call(defn: ScheduleDef, expr: Expr, env: dict, span: Span | None = None, real: bool = False):
    """Evaluate a declared expression of `defn`; arithmetic faults become diagnostics. `real`: as a float (costs,
    memory), so an integer too large for a float is a diagnostic too."""
    fn = expr.text or expr.source
    try:
        value = compiled(defn).formula(expr)(env)
        return float(value) if real else value
    except ZeroDivisionError:
        raise DiagnosticError(
            [Diagnostic("S111", f"division by zero in `{fn}`", span, help="guard the divisor")]
        ) from None
    except (OverflowError, TypeError, ValueError, MemoryError):
        raise DiagnosticError(
            [Diagnostic("S111", f"`{fn}` gives a number too large to use", span, help="check the expression")]
        ) from None


def _placement(defn: ScheduleDef, env: dict, pp: int, vpp: int) -> list[list[int]]:
    if defn.placement_kind == "looped":
        return [[c * pp + r for c in range(vpp)] for r in range(pp)]
    if defn.placement_kind == "vshape":
        return [[c * pp + (r if c % 2 == 0 else pp - 1 - r) for c in range(vpp)] for r in range(pp)]
    stage = defn.placement
    stage_of = [[int(_call(defn, stage, {**env, "rank": r, "chunk": c})) for c in range(vpp)] for r in range(pp)]
    owners: dict[int, tuple[int, int]] = {}
    for r, row in enumerate(stage_of):
        for c, s in enumerate(row):
            problem = None
            if not 0 <= s < pp * vpp:
                problem = f"rank {r} chunk {c} is placed on stage {number_text(s)}, outside 0 .. {pp * vpp - 1}"
            elif s in owners:
                problem = f"stage {s} is placed on rank {owners[s][0]} chunk {owners[s][1]} and on rank {r} chunk {c}"
            if problem:
                raise DiagnosticError(
                    [
                        Diagnostic(
                            "S109",
                            "the placement is not a one-to-one map of (rank, chunk) to stages",
                            None,
                            label=problem,
                            help="every stage 0 .. pp*vpp-1 must be held by exactly one (rank, chunk)",
                        )
                    ]
                )
            owners[s] = (r, c)
    return stage_of


def _run_orders(
    defn: ScheduleDef, env: dict, pp: int, vpp: int, microbatches: int
) -> tuple[list[list[int]], list[list[int]]]:
    ntypes = len(defn.job_types)
    if defn.tables:
        return _table_orders(defn, env, pp, vpp, ntypes)
    params = [env[p] for p in defn.params]
    # A loop may run at most this often: far more than any complete schedule needs, far less than a hang.
    cap = 4 * ntypes * vpp * microbatches + 4096
    budget = evaluation_budget(ntypes, vpp, microbatches)
    run = compiled(defn)
    jobs, sites = [], []
    failures: dict[tuple[str, int], list[tuple[int, object]]] = {}  # (kind, site) -> [(rank, value)]
    for rank in range(pp):
        out_jobs: list[int] = []
        out_sites: list[int] = []
        counters = [[0] * vpp for _ in range(ntypes)]
        try:
            run.order(
                pp, vpp, microbatches, rank, *params, out_jobs, out_sites, counters, vpp, ntypes, cap, _fail, budget
            )
        except _OrderFailure as err:
            kind = _failure_kind(err, cap)
            failures.setdefault((kind, err.site), []).append((rank, err.value))
            if kind == "budget":  # the other ranks would each spend a budget too: one is proof enough
                break
        except (ZeroDivisionError, OverflowError, TypeError, ValueError, IndexError, MemoryError) as err:
            failures.setdefault((_crash_kind(err), _crash_site(run.line_sites, err)), []).append((rank, None))
        jobs.append(out_jobs)
        sites.append(out_sites)
    if failures:
        context = {"pp": pp, "vpp": vpp, "cap": cap, "budget": budget, "ntypes": ntypes, "microbatches": microbatches}
        raise DiagnosticError(
            [_order_failure(defn, kind, site, found, context) for (kind, site), found in failures.items()]
        )
    return jobs, sites


def lone_reduction_types(defn: ScheduleDef) -> set[int]:
    """The job types that reduce over a rank's data-parallel replicas (`reduce_grads`): at dp 1 a rank is its
    own group, and a collective over a group of one is no work."""
    return {t for t, jt in enumerate(defn.job_types) if jt.kind is not None and jt.kind.members is Members.REPLICAS}


def _without_lone_reductions(
    defn: ScheduleDef, jobs: list[list[int]], sites: list[list[int]]
) -> tuple[list[list[int]], list[list[int]], list[list[tuple[int, int, int]]]]:
    """The orders at dp 1: without their `reduce_grads` jobs (no job, no cost, no picture, no runtime job), so a
    schedule that places its reductions runs at dp 1 exactly as the same schedule without them; and, per rank, the
    (code, step, site) of each one left out, `step` the kept job it stood before (`Expansion.lone_reductions`).
    `sync_shared` stays: its group is the ranks holding a shared parameter, which are several at any dp."""
    lone = lone_reduction_types(defn)
    if not lone:
        return jobs, sites, []
    ntypes = len(defn.job_types)  # a code's type is its remainder by the type count (`pack_code`)
    kept_jobs, kept_sites, left_out = [], [], []
    for codes, where in zip(jobs, sites, strict=True):
        kept, kept_where, dropped = [], [], []
        for code, site in zip(codes, where, strict=True):
            if code % ntypes in lone:
                dropped.append((code, len(kept), site))
            else:
                kept.append(code)
                kept_where.append(site)
        kept_jobs.append(kept)
        kept_sites.append(kept_where)
        left_out.append(dropped)
    return kept_jobs, kept_sites, left_out


def _failure_kind(err: _OrderFailure, cap: int) -> str:
    if err.kind in ("count", "loop"):
        if isinstance(err.value, int) and err.value < 0:
            return "negative"
        if isinstance(err.value, int) and err.value > cap:
            return "absurd"
        return "budget"
    return err.kind


def _crash_kind(err: Exception) -> str:
    return "zero" if isinstance(err, ZeroDivisionError) else "big"


def _crash_site(line_sites: dict[int, int], err: Exception) -> int:
    """The statement running when generated order code raised: found by the generated line number."""
    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename.startswith("<order of"):
            line = frame.lineno
    return line_sites.get(line, 0) if line else 0


def _order_failure(
    defn: ScheduleDef, kind: str, site_id: int, found: list[tuple[int, object]], context: dict
) -> Diagnostic:
    """One diagnostic for a statement that fails, naming every rank it fails on."""
    span = defn.sites[site_id].span if site_id else None
    ranks = [r for r, _ in found]
    on = numbered("rank", ranks)
    values = list(dict.fromkeys(types.show(v) for _, v in found))
    value = values[0] if len(values) == 1 else None
    each = "; ".join(f"{types.show(v)} on rank {r}" for r, v in found[:4]) + ("; ..." if len(found) > 4 else "")
    vpp = context["vpp"]
    if kind == "chunk":
        return Diagnostic(
            "S108",
            f"chunk {value} does not exist on {on}" if value else f"chunks that do not exist on {on}",
            span,
            label=f"chunk is {value or each}, but vpp = {vpp} gives chunks 0 .. {vpp - 1}",
            help="keep the chunk expression within 0 .. vpp - 1",
        )
    if kind == "mb":
        return Diagnostic(
            "S107",
            f"micro-batch {value} does not exist on {on}" if value else f"micro-batches that do not exist on {on}",
            span,
            label="micro-batch ids start at 0" + ("" if value else f": {each}"),
        )
    if kind == "negative":
        return Diagnostic(
            "S110",
            f"repeat count is negative ({value}) on {on}" if value else f"repeat count is negative on {on}",
            span,
            label=f"evaluates to {value or each}",
            help="guard it with `max(0, ...)` or a `require`",
        )
    if kind == "absurd":
        return Diagnostic(
            "S110",
            f"repeat count {value} on {on} is larger than any complete schedule needs"
            if value
            else f"repeat counts on {on} are larger than any complete schedule needs",
            span,
            label=f"evaluates to {value or each} (limit {context['cap']})",
            help="check the count expression",
        )
    if kind == "budget":
        return Diagnostic(
            "S113",
            f"the order takes more than {context['budget']:,} evaluation steps on {on}"
            + (" (later ranks not evaluated)" if ranks[-1] < context["pp"] - 1 else ""),
            span,
            label=f"runs out here (this loop runs {value or each} times when reached)",
            notes=[
                f"a rank's order may take {BUDGET_PER_JOB} steps per job it can own ({context['ntypes']} job types "
                f"x {count(vpp, 'chunk')} x {count(context['microbatches'], 'micro-batch')}) plus {BUDGET_BASE:,}; "
                "a step is one statement, or one function call"
            ],
            help="loops inside loops multiply: bound each loop by the sizes, as a schedule needs about a step per job",
        )
    if kind == "big":
        return Diagnostic(
            "S111",
            f"a number grows too large to use on {on}",
            span,
            label="while evaluating this",
            help="a value multiplied by itself in a loop grows without end: check the expression",
        )
    return Diagnostic(
        "S111",
        f"division by zero on {on}",
        span,
        label="while evaluating this",
        help="guard the expression for these sizes",
    )


def _table_orders(defn: ScheduleDef, env: dict, pp: int, vpp: int, ntypes: int):
    chosen = next((t for t in defn.tables if t.when is None or _call(defn, t.when, env)), None)
    if chosen is None:
        raise DiagnosticError(
            [
                Diagnostic(
                    "S112",
                    f"no table of `{defn.name}` is for pp={pp}, vpp={vpp}, microbatches={env['microbatches']}",
                    defn.tables[0].span,
                    help="the `when` conditions of the tables say which sizes they are written for",
                )
            ]
        )
    rows = dict(chosen.rows)
    if sorted(rows) != list(range(pp)):
        have = ", ".join(map(str, sorted(rows))) or "none"
        raise DiagnosticError(
            [
                Diagnostic(
                    "S112",
                    f"the table has rows for ranks {have}, but pp = {pp}",
                    chosen.span,
                    help=f"this table is written for pp = {len(rows)}; pass `--pp {len(rows)}`",
                )
            ]
        )
    jobs, sites = [], []
    pack = JobCodec(ntypes, vpp).pack
    for r in range(pp):
        out_jobs, out_sites = [], []
        for t, chunk, mb, site in rows[r]:
            if chunk >= vpp:
                raise DiagnosticError(
                    [
                        Diagnostic(
                            "S108",
                            f"chunk {chunk} does not exist with vpp = {vpp}",
                            defn.sites[site].span,
                            help=f"pass `--vpp {chunk + 1}` or more",
                        )
                    ]
                )
            out_jobs.append(pack(t, chunk, mb))
            out_sites.append(site)
        jobs.append(out_jobs)
        sites.append(out_sites)
    return jobs, sites


def _cost_fns(defn: ScheduleDef):
    fns = {}
    for jt in defn.job_types:
        if jt.name in defn.costs:
            fns[jt.name] = defn.costs[jt.name]
        else:
            fns[jt.name] = default_cost(jt.name)
    return fns


def _memory_fns(defn: ScheduleDef):
    """Net activation change per job: forward +a, backward -a, backward_b -f, backward_w -(a - f); recompute
    +(a - keeps), offload -moves, reload +moves (a forward that a recompute follows allocates a - (a - keeps))."""
    fns = {}
    signed = {}
    for jt in defn.job_types:
        verb_fn = defn.memory.get(jt.name)
        if verb_fn is not None:
            verb, fn = verb_fn
            signed[jt.name] = (1.0 if verb == "allocates" else -1.0, fn)
    alloc = signed.get("forward", (1.0, 1.0))
    b_frees = signed.get("backward_b", (-1.0, DEFAULT_BACKWARD_B_FREES))
    fraction = {jt.name: jt.fraction for jt in defn.job_types}
    declared = {name: fn for name, (_, fn) in defn.memory.items()}  # `keeps` / `moves` of the memory actions

    def kept(name, env):  # what the forward of a (chunk, micro-batch) `name` rebuilds keeps (its stage input)
        if name in declared:
            return amount((1.0, declared[name]), env)
        return (1.0 - recompute_share(fraction[name])) * amount(alloc, env)

    def moved(name, env):  # what an offload `name` copies to the host (and its restore back)
        if name in declared:
            return amount((1.0, declared[name]), env)
        return (1.0 if fraction[name] is None else fraction[name]) * amount(alloc, env)

    def amount(pair, env):
        sign, fn = pair
        return sign * (_call(defn, fn, env, real=True) if isinstance(fn, Expr) else float(fn))

    for jt in defn.job_types:
        role = jt.kind.memory if jt.kind is not None else Memory.NONE
        if role is Memory.REBUILDS:  # allocates the rest; the forward allocates it less (see analysis.memory)
            fns[jt.name] = (lambda name: lambda env: amount(alloc, env) - kept(name, env))(jt.name)
        elif role is Memory.MOVES_OUT:
            fns[jt.name] = (lambda name: lambda env: -moved(name, env))(jt.name)
        elif role is Memory.RESTORES:  # gives back what its offload moved
            fns[jt.name] = (lambda name: lambda env: moved(name, env))(jt.kind.after)
        # the compute kinds' own rule: a whole backward frees what its forward allocated, a split one in two parts
        elif jt.name in signed and jt.name not in ("backward", "backward_w"):
            fns[jt.name] = (lambda pair: lambda env: amount(pair, env))(signed[jt.name])
        elif jt.name == "forward":
            fns[jt.name] = lambda env: amount(alloc, env)
        elif jt.name == "backward":
            fns[jt.name] = lambda env: -amount(alloc, env)
        elif jt.name == "backward_b":
            fns[jt.name] = lambda env: amount(b_frees, env)
        elif jt.name == "backward_w":
            fns[jt.name] = lambda env: -(amount(alloc, env) + amount(b_frees, env))
        else:
            fns[jt.name] = 0.0
    return fns


def _job_table(defn: ScheduleDef, env: dict, pp: int, vpp: int, stage_of, fns) -> list[list[list[float]]]:
    """[type][rank][chunk] values of per-job expressions (constant ones filled without evaluation)."""
    table = []
    for jt in defn.job_types:
        fn = fns[jt.name]
        if not callable(fn) and not isinstance(fn, Expr):
            table.append([[float(fn)] * vpp for _ in range(pp)])
            continue
        rows = []
        for r in range(pp):
            row = []
            for c in range(vpp):
                scope = {**env, "rank": r, "chunk": c, "stage": stage_of[r][c]}
                value = _call(defn, fn, scope, real=True) if isinstance(fn, Expr) else fn(scope)
                row.append(float(value))
            rows.append(row)
        table.append(rows)
    return table
