"""S107: a job of a micro-batch the sizes do not have."""

from __future__ import annotations

from ppdsl.analysis.checks.rank_jobs import RankJobs
from ppdsl.analysis.checks.registry import Findings, Group, rank_check
from ppdsl.analysis.checks.wording import mbs_of, on_rank, ranks_of, span_of
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.text import count, numbered


def _render_mb_range(exp: Expansion, group: Group) -> Diagnostic:
    m = exp.microbatches
    first = group.findings[0]
    mbs = mbs_of(group)
    subject = f"{numbered('micro-batch', mbs, 'micro-batches')} {'does' if len(mbs) == 1 else 'do'} not exist"
    return Diagnostic(
        "S107",
        f"{subject} on {numbered('rank', ranks_of(group))}: there {'is' if m == 1 else 'are'} "
        f"{count(m, 'micro-batch', 'micro-batches')} (0 .. {m - 1})",
        span_of(exp, group),
        label=f"{on_rank(group, first)}step {first.detail['step']} runs `{first.detail['job']}`",
        help="count the jobs this statement emits for these sizes",
    )


@rank_check("S107", _render_mb_range)
def micro_batch_range(view: RankJobs, out: Findings) -> None:
    """S107: a job of a micro-batch the sizes do not have."""
    exp = view.exp
    for i in view.outside:
        code = exp.jobs[view.rank][i]
        _, _, mb = exp.decode(code)
        out.add(_render_mb_range, view.site(i), view.rank, mb, step=i, job=exp.label(code))
