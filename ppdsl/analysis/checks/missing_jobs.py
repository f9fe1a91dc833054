"""S101: a job the rank owns that it never runs (a forward, a backward or both parts of a split one, and one of
each auxiliary job type the schedule uses, for every chunk and micro-batch)."""

from __future__ import annotations

from ppdsl.analysis.checks.rank_jobs import RankJobs
from ppdsl.analysis.checks.registry import MAX_NOTES, Findings, Group, rank_check
from ppdsl.analysis.checks.wording import ranks_of, span_of
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.text import count, numbered
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD


def _render_missing(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    type_name = exp.defn.job_types[first.detail["type"]].name
    ranks = ranks_of(group)
    n = group.total
    vpp, m = exp.vpp, exp.microbatches
    by_rank: dict[int, list[str]] = {}
    for f in group.findings:
        by_rank.setdefault(f.rank, []).append(exp.label(f.detail["job_code"]))

    def shown(jobs: list[str]) -> str:
        return ", ".join(f"`{j}`" for j in jobs[:8]) + (" and more" if len(jobs) > 8 else "")

    notes = []
    if len(ranks) > 1:
        notes = [f"rank {rank} never runs {shown(jobs)}" for rank, jobs in list(by_rank.items())[:MAX_NOTES]]
        if len(ranks) > MAX_NOTES:
            notes.append(f"and {count(len(ranks) - MAX_NOTES, 'more rank')}")
    missing = "" if notes else f": {shown(by_rank[first.rank])} never {'runs' if n == 1 else 'run'}"
    if first.detail["ran"] is None:
        message = f"{numbered('rank', ranks)} never {'runs' if len(ranks) == 1 else 'run'} `{type_name}`"
        label = f"the order ends here{missing}"
    else:
        message = f"{count(n, f'`{type_name}` job')} never {'runs' if n == 1 else 'run'} on {numbered('rank', ranks)}"
        label = f"the last `{type_name}` of {'the rank' if len(ranks) == 1 else 'each rank'} runs here{missing}"
    mine = "its chunk" if vpp == 1 else f"each of its {vpp} chunks"
    mbs = "the micro-batch" if m == 1 else f"all {m} micro-batches"
    return Diagnostic(
        "S101",
        message,
        span_of(exp, group),
        label=label,
        help=f"every rank runs a forward and a backward of {mine} for {mbs}",
        notes=notes,
    )


@rank_check("S101", _render_missing)
def missing_jobs(view: RankJobs, out: Findings) -> None:
    """S101: a job the rank owns that it never runs, reported at the statement that ran the last job of its type on
    the rank (the one that stopped short), or where the order ends if the rank runs none of that type."""
    # Nothing missing (checked at C speed first): every forward, for each micro-batch a whole backward or both
    # parts of a split one, and every auxiliary job.
    if (
        min(view.steps(FORWARD), default=0) >= 0
        and _every_backward(view)
        and all(min(view.steps(t), default=0) >= 0 for t in view.aux)
    ):
        return
    exp, pos, aux = view.exp, view.pos, view.aux
    missing: dict[int, list[tuple[int, int]]] = {}  # job type -> [(code, micro-batch)]
    for base, _, mb in view.bases():
        if pos[base] < 0:
            missing.setdefault(FORWARD, []).append((base, mb))
        b, bb, bw = pos[base + BACKWARD], pos[base + BACKWARD_B], pos[base + BACKWARD_W]
        if b >= 0:
            if bb >= 0 or bw >= 0:
                continue  # a whole and a split backward: S102's
        elif bb < 0 and bw < 0:
            missing.setdefault(BACKWARD, []).append((base + BACKWARD, mb))
            continue
        else:
            for t, p in ((BACKWARD_B, bb), (BACKWARD_W, bw)):
                if p < 0:
                    missing.setdefault(t, []).append((base + t, mb))
        for t in aux:
            if pos[base + t] < 0:
                missing.setdefault(t, []).append((base + t, mb))
    if not missing:
        return
    last_of: dict[int, int] = {}  # job type -> step of its last job on this rank
    for i, t in enumerate(exp.codec.types_of(exp.jobs[view.rank])):
        last_of[t] = i
    for t, jobs in missing.items():
        last = last_of.get(t)
        site = view.site(last) if last is not None else view.end_site
        for code, mb in jobs:
            out.add(_render_missing, site, view.rank, mb, key=(t, last is None), type=t, job_code=code, ran=last)


def _every_backward(view: RankJobs) -> bool:
    """Each (chunk, micro-batch) has a whole backward or both parts of a split one."""
    whole = view.steps(BACKWARD)
    if min(whole, default=0) >= 0:
        return True
    inputs, weights = view.steps(BACKWARD_B), view.steps(BACKWARD_W)
    if min(inputs, default=0) >= 0 and min(weights, default=0) >= 0:
        return True
    return min(map(max, whole, map(min, inputs, weights)), default=0) >= 0
