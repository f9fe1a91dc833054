"""S104: a rank that never runs the optimizer, or runs it before its last job."""

from __future__ import annotations

from ppdsl.analysis.checks.rank_jobs import RankJobs
from ppdsl.analysis.checks.registry import Findings, Group, rank_check
from ppdsl.analysis.checks.wording import on_rank, ranks_of, span_of
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.text import numbered
from ppdsl.plan.kinds import OPTIMIZER


def _render_no_optimizer(exp: Expansion, group: Group) -> Diagnostic:
    ranks = ranks_of(group)
    return Diagnostic(
        "S104",
        f"{numbered('rank', ranks)} never {'runs' if len(ranks) == 1 else 'run'} the optimizer",
        span_of(exp, group),
        label="the order ends here",
        help="end the order with `optimizer`",
    )


def _render_optimizer_early(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    return Diagnostic(
        "S104",
        f"the optimizer is not the last job on {numbered('rank', ranks_of(group))}",
        span_of(exp, group),
        label=f"{on_rank(group, first)}runs at step {first.detail['step']} of {first.detail['jobs']}",
        help="move `optimizer` to the end of the order",
    )


@rank_check("S104", _render_no_optimizer, _render_optimizer_early)
def optimizer(view: RankJobs, out: Findings) -> None:
    """S104: the optimizer is missing, or is not the rank's last job."""
    exp, rank = view.exp, view.rank
    jobs = exp.jobs[rank]
    type_of = exp.codec.type_of
    steps = [i for i in view.steps(OPTIMIZER) if i >= 0]
    steps += [i for i, _ in view.repeats if type_of(jobs[i]) == OPTIMIZER]
    steps += [i for i in view.outside if type_of(jobs[i]) == OPTIMIZER]
    if not steps:
        out.add(_render_no_optimizer, view.end_site, rank)
    elif len(steps) == 1 and steps[0] != len(jobs) - 1:
        out.add(_render_optimizer_early, view.site(steps[0]), rank, step=steps[0], jobs=len(jobs))
