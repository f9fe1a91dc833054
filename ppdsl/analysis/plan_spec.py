"""Building a `PlanSpec` (`ppdsl.plan.spec`) from a checked schedule: the one step from the front end's
`Expansion` and `CheckResult` to the plan vocabulary every rank reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ppdsl.common.diagnostics import DiagnosticError
from ppdsl.plan.kinds import is_action, kind, program_order
from ppdsl.plan.spec import JobTypeSpec, PlanSpec, RuleSpec, source_fingerprint

if TYPE_CHECKING:
    from ppdsl.analysis.check import CheckResult
    from ppdsl.analysis.expansion import Expansion


def plan_spec(result: CheckResult) -> PlanSpec:
    """The plan specification of a checked schedule: `result` from `check(scenario, record_visits=True)`, whose
    execution completed (its merged order is what every emulating process runs)."""
    if result.expansion is None or result.execution is None or not result.completed:
        raise ValueError("a plan specification needs a schedule whose check completed")
    if result.execution.visits is None:
        raise ValueError("check the scenario with record_visits=True: the spec records its merged order")
    return expansion_spec(result.expansion, tuple(result.execution.merged_order()))


def checked_spec(exp: Expansion) -> PlanSpec:
    """`plan_spec` of an expansion its caller built itself (not through `check`): checked here, once; raises
    DiagnosticError when its ranks do not all run to the end (a local order error, a deadlock)."""
    from ppdsl.analysis.check import check_expansion

    result = check_expansion(exp, record_visits=True)
    if not result.completed:
        raise DiagnosticError(result.diagnostics)
    return plan_spec(result)


def expansion_spec(exp: Expansion, merged: tuple[tuple[int, int], ...] | None = None) -> PlanSpec:
    """The spec of an expansion, with the merged order of its execution if one was run (None: a plan of one rank,
    or a program measured without running it, needs none)."""
    defn = exp.defn
    job_types = tuple(
        JobTypeSpec(
            jt.name,
            jt.region,
            tuple(jt.ops),
            jt.before,
            jt.after,
            jt.receives,
            jt.sends,
            jt.short,
            program_order(jt.name),
            jt.builtin,
            kind(jt.name).program if is_action(jt.name) else None,
            jt.fraction,
        )
        for jt in defn.job_types
    )
    rules = tuple(RuleSpec(r.pattern, r.job, r.stream, r.priority, tuple(r.attrs)) for r in exp.rules)
    return PlanSpec(
        schedule=defn.name,
        source=defn.path,
        fingerprint=source_fingerprint(defn.sources.values()),
        pp=exp.pp,
        vpp=exp.vpp,
        microbatches=exp.microbatches,
        params=tuple(exp.params.items()),
        job_types=job_types,
        stage_of=tuple(tuple(row) for row in exp.stage_of),
        orders=tuple(tuple(map(exp.decode, jobs)) for jobs in exp.jobs),
        merged=merged,
        rules=rules,
        partition=None if exp.stage_work is None else exp.stage_work.partition.counts,
    )
