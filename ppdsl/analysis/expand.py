"""ScheduleDef + sizes -> Expansion: bind pp / vpp / microbatches / params, check `require`s, run every rank's
order, tabulate placement, costs and memory.

Errors here are S1xx (the schedule is wrong for these sizes) or E007 (bad parameter use), with the span of the
statement that was running.
"""

from __future__ import annotations

import traceback
from dataclasses import replace

from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span, number_text
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.jobtypes import default_cost

DEFAULT_BACKWARD_B_FREES = 0.5
MAX_SIZE = 1 << 20


class _OrderFailure(Exception):
    def __init__(self, site: int, kind: str, value: object):
        super().__init__(kind)
        self.site, self.kind, self.value = site, kind, value


def _fail(site: int, kind: str, value: object) -> None:
    raise _OrderFailure(site, kind, value)


def parse_params(pairs: list[str] | None) -> dict[str, int | float | bool]:
    """`["k=v", ...]` from the command line into typed values; raises DiagnosticError (E007)."""
    out: dict[str, int | float | bool] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise DiagnosticError([Diagnostic("E007", f"bad parameter `{pair}`", help="write `--param name=value`")])
        if raw in ("true", "false"):
            out[key] = raw == "true"
            continue
        try:
            out[key] = int(raw)
        except ValueError:
            try:
                out[key] = float(raw)
            except ValueError:
                raise DiagnosticError(
                    [Diagnostic("E007", f"parameter `{key}` must be a number, got `{raw}`")]
                ) from None
    return out


def expand(
    defn: ScheduleDef,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: dict[str, int | float | bool] | None = None,
) -> Expansion:
    """Bind sizes and run the order of every rank, with the schedule's own costs (`CostSpec.apply` puts costs
    from outside over them). Raises DiagnosticError on any failure."""
    for name, value in (("pp", pp), ("microbatches", microbatches), ("vpp", vpp)):
        if not isinstance(value, int) or not 1 <= value <= MAX_SIZE:
            raise DiagnosticError(
                [Diagnostic("E007", f"`{name}` must be an integer from 1 to {MAX_SIZE}, got {value}")]
            )
    env: dict = {"pp": pp, "vpp": vpp, "microbatches": microbatches}
    for name, p in defn.params.items():
        env[name] = p.default
    for name, value in (params or {}).items():
        if name not in defn.params:
            known = ", ".join(f"`{p}`" for p in defn.params) or "none"
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E007",
                        f"`{defn.name}` has no parameter `{name}`",
                        help=f"its parameters: {known}",
                    )
                ]
            )
        env[name] = value

    failed = [r for r in defn.requires if not _safe_bool(r.check, env)]
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
    ntypes = len(defn.job_types)
    cost = _job_table(defn, env, pp, vpp, stage_of, _cost_fns(defn))
    mem = _job_table(defn, env, pp, vpp, stage_of, _memory_fns(defn))
    latency = _call(defn.comm["latency"], env, real=True) if "latency" in defn.comm else 0.0
    bandwidth = _call(defn.comm["bandwidth"], env, real=True) if "bandwidth" in defn.comm else None
    limit = (
        [_call(defn.memory_limit_fn, {**env, "rank": r}, real=True) for r in range(pp)]
        if defn.memory_limit_fn
        else [None] * pp
    )
    assert len(cost) == ntypes
    return Expansion(
        defn=defn,
        pp=pp,
        vpp=vpp,
        microbatches=microbatches,
        params={k: env[k] for k in defn.params},
        stage_of=stage_of,
        jobs=jobs,
        sites=sites,
        cost=cost,
        latency=latency,
        bandwidth=bandwidth,
        mem_delta=mem,
        memory_limit=limit,
        rules=[
            replace(rule, priority=None if prio is None else int(_call(prio, env, rule.span)))
            for rule, prio in zip(defn.rules, defn.rule_priorities, strict=True)
        ],
    )


def _safe_bool(fn, env) -> bool:
    return bool(_call(fn, env))


def _call(fn, env, span: Span | None = None, real: bool = False):
    """Evaluate a compiled expression; arithmetic faults become diagnostics. `real`: as a float (costs, memory),
    so an integer too large for a float is a diagnostic too."""
    try:
        value = fn(env)
        return float(value) if real else value
    except ZeroDivisionError:
        raise DiagnosticError(
            [Diagnostic("S111", f"division by zero in `{fn.source}`", span, help="guard the divisor")]
        ) from None
    except (OverflowError, TypeError, ValueError) as err:
        raise DiagnosticError([Diagnostic("S111", f"cannot evaluate `{fn.source}`: {err}", span)]) from None


def _placement(defn: ScheduleDef, env: dict, pp: int, vpp: int) -> list[list[int]]:
    if defn.placement_kind == "looped":
        return [[c * pp + r for c in range(vpp)] for r in range(pp)]
    if defn.placement_kind == "vshape":
        return [[c * pp + (r if c % 2 == 0 else pp - 1 - r) for c in range(vpp)] for r in range(pp)]
    stage_of = [[int(_call(defn.placement_fn, {**env, "rank": r, "chunk": c})) for c in range(vpp)] for r in range(pp)]
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
    jobs, sites = [], []
    for rank in range(pp):
        out_jobs: list[int] = []
        out_sites: list[int] = []
        counters = [[0] * vpp for _ in range(ntypes)]
        try:
            defn.order_fn(pp, vpp, microbatches, rank, *params, out_jobs, out_sites, counters, vpp, ntypes, cap, _fail)
        except _OrderFailure as err:
            raise DiagnosticError([_order_failure(defn, err, rank, vpp, cap)]) from None
        except (ZeroDivisionError, OverflowError, TypeError, ValueError, IndexError, MemoryError) as err:
            raise DiagnosticError([_order_crash(defn, err, rank)]) from None
        jobs.append(out_jobs)
        sites.append(out_sites)
    return jobs, sites


def _order_failure(defn: ScheduleDef, err: _OrderFailure, rank: int, vpp: int, cap: int) -> Diagnostic:
    site = defn.sites[err.site]
    shown = number_text(err.value)
    if err.kind == "chunk":
        return Diagnostic(
            "S108",
            f"chunk {shown} does not exist on rank {rank}",
            site.span,
            label=f"chunk is {shown}, but vpp = {vpp} gives chunks 0 .. {vpp - 1}",
            help="keep the chunk expression within 0 .. vpp - 1",
        )
    if err.kind == "mb":
        return Diagnostic(
            "S107",
            f"micro-batch {shown} does not exist on rank {rank}",
            site.span,
            label="micro-batch ids start at 0",
        )
    what = "loop" if err.kind == "loop" else "repeat count"
    if isinstance(err.value, int) and err.value < 0:
        return Diagnostic(
            "S110",
            f"{what} is negative ({shown}) on rank {rank}",
            site.span,
            label=f"evaluates to {shown}",
            help="guard it with `max(0, ...)` or a `require`",
        )
    return Diagnostic(
        "S110",
        f"{what} {shown} on rank {rank} is larger than any complete schedule needs",
        site.span,
        label=f"evaluates to {shown} (limit {cap})",
        help="check the count expression",
    )


def _order_crash(defn: ScheduleDef, err: Exception, rank: int) -> Diagnostic:
    """An arithmetic fault inside generated order code: find the statement by the generated line number."""
    line = None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename.startswith("<order of"):
            line = frame.lineno
    site = defn.sites[defn.line_sites.get(line, 0)] if line else None
    kind = "division by zero" if isinstance(err, ZeroDivisionError) else str(err)
    return Diagnostic(
        "S111",
        f"{kind} on rank {rank}",
        site.span if site else None,
        label="while evaluating this",
        help="guard the expression for these sizes",
    )


def _table_orders(defn: ScheduleDef, env: dict, pp: int, vpp: int, ntypes: int):
    chosen = next((t for t in defn.tables if t.when is None or _call(t.when, env)), None)
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
            out_jobs.append((mb * vpp + chunk) * ntypes + t)
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
    """Net activation change per job: forward +a, backward -a, backward_b -f, backward_w -(a - f)."""
    fns = {}
    signed = {}
    for jt in defn.job_types:
        verb_fn = defn.memory.get(jt.name)
        if verb_fn is not None:
            verb, fn = verb_fn
            signed[jt.name] = (1.0 if verb == "allocates" else -1.0, fn)
    alloc = signed.get("forward", (1.0, 1.0))
    b_frees = signed.get("backward_b", (-1.0, DEFAULT_BACKWARD_B_FREES))

    def amount(pair, env):
        sign, fn = pair
        return sign * (_call(fn, env, real=True) if callable(fn) else float(fn))

    for jt in defn.job_types:
        if jt.name in signed and jt.name not in ("backward", "backward_w"):
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
        if not callable(fn):
            table.append([[float(fn)] * vpp for _ in range(pp)])
            continue
        rows = []
        for r in range(pp):
            row = []
            for c in range(vpp):
                scope = {**env, "rank": r, "chunk": c, "stage": stage_of[r][c]}
                value = fn(scope) if not hasattr(fn, "source") else _call(fn, scope, real=True)
                row.append(float(value))
            rows.append(row)
        table.append(rows)
    return table


def expansion_from_orders(
    job_types: list[dict],
    stage_of: list[list[int]],
    orders: list[list[tuple[str, int, int]]],
    microbatches: int,
    name: str = "plan",
) -> Expansion:
    """An Expansion of given job lists (a generated plan module's `job_list`s), with default costs, so the
    checks and the execution model apply to them too."""
    from ppdsl.language.ir import JobType, ScheduleDef, Site

    types = [JobType.from_dict(jt) for jt in job_types]
    index = {jt.name: i for i, jt in enumerate(types)}
    pp, vpp = len(stage_of), len(stage_of[0]) if stage_of else 1
    defn = ScheduleDef(
        name=name,
        doc="",
        path="<plan>",
        params={},
        requires=[],
        job_types=types,
        placement_kind="expr",
        placement_fn=None,
        costs={},
        comm={},
        memory={},
        memory_limit_fn=None,
        memory_limit_span=None,
        rules=[],
        rule_priorities=[],
        order_fn=None,
        order_source="",
        tables=[],
        sites=[Site(Span("<plan>", 1, 1, 1, 2), "")],
        line_sites={},
    )
    ntypes = len(types)
    jobs = [[(mb * vpp + c) * ntypes + index[t] for t, c, mb in order] for order in orders]
    env = {"pp": pp, "vpp": vpp, "microbatches": microbatches}
    return Expansion(
        defn=defn,
        pp=pp,
        vpp=vpp,
        microbatches=microbatches,
        params={},
        stage_of=[list(row) for row in stage_of],
        jobs=jobs,
        sites=[[0] * len(j) for j in jobs],
        cost=_job_table(defn, env, pp, vpp, stage_of, _cost_fns(defn)),
        latency=0.0,
        bandwidth=None,
        mem_delta=_job_table(defn, env, pp, vpp, stage_of, _memory_fns(defn)),
        memory_limit=[None] * pp,
        rules=[],
    )
