"""S102: a job that runs twice on a rank, or a micro-batch with both a whole and a split backward."""

from __future__ import annotations

from ppdsl.analysis.checks.rank_jobs import RankJobs
from ppdsl.analysis.checks.registry import Findings, Group, rank_check
from ppdsl.analysis.checks.wording import jobs_named, mbs_of, on_rank, ranks_of, span_of
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.text import numbered
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W


def _render_twice(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    names = {f.detail["job"] for f in group.findings}
    subject = f"{jobs_named(group)} {'runs' if len(names) == 1 else 'run'} twice"
    return Diagnostic(
        "S102",
        f"{subject} on {numbered('rank', ranks_of(group))}",
        span_of(exp, group),
        label=f"{on_rank(group, first)}again at step {first.detail['step']}, first at step {first.detail['first']}",
        help="each job runs exactly once per micro-batch",
    )


def _render_mixed(exp: Expansion, group: Group) -> Diagnostic:
    mbs = mbs_of(group)
    chunks = sorted({f.detail["chunk"] for f in group.findings})
    what = numbered("micro-batch", mbs, "micro-batches") + (f" (chunk {chunks[0]})" if exp.vpp > 1 else "")
    verb = "has" if len(mbs) == 1 else "have"
    return Diagnostic(
        "S102",
        f"{what} {verb} both a whole backward and a split one on {numbered('rank', ranks_of(group))}",
        span_of(exp, group),
        label=f"{on_rank(group, group.findings[0])}`{group.findings[0].detail['job']}` here",
        help="use either `backward` or `backward_b` + `backward_w` for a micro-batch",
    )


@rank_check("S102", _render_twice, _render_mixed)
def duplicates(view: RankJobs, out: Findings) -> None:
    """S102: a job that runs twice, or a micro-batch with both a whole and a split backward."""
    exp, rank = view.exp, view.rank
    jobs = exp.jobs[rank]
    for i, first in view.repeats:
        _, _, mb = exp.decode(jobs[i])
        out.add(_render_twice, view.site(i), rank, mb, step=i, first=first, job=exp.label(jobs[i]))
    if max(view.steps(BACKWARD), default=-1) < 0:
        return  # no whole backward, so none with a split one too
    if max(view.steps(BACKWARD_B), default=-1) < 0 and max(view.steps(BACKWARD_W), default=-1) < 0:
        return
    for base, c, mb in view.bases():
        if view.backward_split(base) is None:
            step = view.pos[base + BACKWARD]
            out.add(_render_mixed, view.site(step), rank, mb, chunk=c, job=exp.label(base + BACKWARD))
