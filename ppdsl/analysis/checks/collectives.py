"""E092-E094: where each rank joins its collectives (`reduce_grads`, `sync_shared`; `ppdsl.plan.kinds`).

A collective reduces gradients, so it comes after the last job that computes them: a chunk's `reduce_grads` after
that chunk's last backward / backward_w on the rank (its row's `reduces`), a `sync_shared` after the rank's last
one. Each runs once a step: a chunk's second `reduce_grads` (the counter gives it micro-batch 1) is a second
reduction its replicas would have to join too. With data-parallel replicas (`--dp` above 1) every chunk's gradients
must be reduced, or the replicas step apart: a chunk of a rank without its `reduce_grads` is reported where the
chunk's gradients are complete, with what to add there. At dp 1 a `reduce_grads` is no work and the expansion
leaves it out, but where the file puts it is checked all the same (`RankJobs.placed`): a misplaced one is found
before a run at dp 2 finds it. Which ranks meet in a collective and whether they can (the
rendezvous) is the execution's (`ppdsl.analysis.execution`, E074)."""

from __future__ import annotations

from ppdsl.analysis.checks.rank_jobs import RankJobs
from ppdsl.analysis.checks.registry import Findings, Group, rank_check
from ppdsl.analysis.checks.wording import on_rank, ranks_of, span_of
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.text import numbered
from ppdsl.plan.kinds import Members, kind


def _chunk_words(exp: Expansion, name: str, chunk: int) -> str:
    """` of chunk 1` for a per-chunk collective of a rank with several chunks; nothing else."""
    return f" of chunk {chunk}" if exp.vpp > 1 and kind(name).members is Members.REPLICAS else ""


def _call(exp: Expansion, name: str, chunk: int) -> str:
    """How the order names the job: `reduce_grads(chunk = 1)`, `reduce_grads`."""
    return f"{name}(chunk = {chunk})" if exp.vpp > 1 and kind(name).members is Members.REPLICAS else name


def _render_missing(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    name, chunk = first.detail["name"], first.detail["chunk"]
    ranks = ranks_of(group)
    last = first.detail["last"]
    where = f"after `{last}`" if last else "after the chunk's last backward"
    return Diagnostic(
        "E092",
        f"the gradients{_chunk_words(exp, name, chunk)} are never reduced on {numbered('rank', ranks)}, at dp = "
        f"{exp.dp}: each rank's replicas would step apart",
        span_of(exp, group),
        label=f"{on_rank(group, first)}the chunk's last gradient job `{last}` runs here" if last else None,
        help=f"add `{_call(exp, name, chunk)}` {where} (once a step; it can overlap the other chunks' backwards)",
    )


def _render_twice(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    name, chunk = first.detail["name"], first.detail["chunk"]
    return Diagnostic(
        "E093",
        f"`{name}`{_chunk_words(exp, name, chunk)} runs twice in a step on {numbered('rank', ranks_of(group))}",
        span_of(exp, group),
        label=f"{on_rank(group, first)}again at step {first.detail['step']}, first at step {first.detail['first']}",
        help=f"a collective runs once a step: every member would have to join the second `{name}` too; keep one, "
        "after the last job whose gradients it reduces",
    )


def _render_early(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    name, chunk = first.detail["name"], first.detail["chunk"]
    whose = f"chunk {chunk}'s" if exp.vpp > 1 and kind(name).members is Members.REPLICAS else "the rank's"
    return Diagnostic(
        "E094",
        f"`{name}`{_chunk_words(exp, name, chunk)} runs before {whose} last gradient job `{first.detail['last']}` on "
        f"{numbered('rank', ranks_of(group))}",
        span_of(exp, group),
        label=f"{on_rank(group, first)}step {first.detail['step']}; `{first.detail['last']}` runs at step "
        f"{first.detail['after']}",
        help=f"move `{name}` after `{first.detail['last']}`: it reduces gradients that are complete only then",
    )


def _collective_types(exp: Expansion):
    """The schedule's collective types, with their rows (none for a schedule that names none)."""
    return [(t, k) for t, k in enumerate(map(kind, exp.type_names)) if k is not None and k.collective]


@rank_check("E092", _render_missing)
def missing_reduction(view: RankJobs, out: Findings) -> None:
    """E092: at dp > 1, a chunk of the rank whose gradients no `reduce_grads` reduces."""
    exp = view.exp
    if exp.dp <= 1:
        return
    reducers = [(t, k) for t, k in _collective_types(exp) if k.members is Members.REPLICAS]
    name = reducers[0][1].name if reducers else "reduce_grads"
    t = reducers[0][0] if reducers else None
    base, m = exp.codec.base, exp.microbatches
    grads = _gradient_types(exp, name)
    for c in range(exp.vpp):
        if t is not None and max((view.pos[base(c, mb) + t] for mb in range(m)), default=-1) >= 0:
            continue
        step = _last_gradient(view, grads, (c,))
        site = view.site(step) if step >= 0 else view.end_site
        label = exp.label(exp.jobs[view.rank][step]) if step >= 0 else ""
        out.add(_render_missing, site, view.rank, key=c, name=name, chunk=c, last=label)


@rank_check("E093", _render_twice)
def collective_twice(view: RankJobs, out: Findings) -> None:
    """E093: a chunk's `reduce_grads`, or a rank's once-a-step collective, a second time in the step (the counter
    gives the second one micro-batch 1)."""
    exp, rank = view.exp, view.rank
    base, m = exp.codec.base, exp.microbatches
    for t, k in _collective_types(exp):
        for c in range(exp.vpp if k.members is Members.REPLICAS else 1):
            first = view.placed(base(c, 0) + t)
            for mb in range(1, m):
                again = view.placed(base(c, mb) + t)
                if again is not None:
                    at, site = again
                    before = _step_words(first[0], note=False) if first is not None else "?"
                    out.add(_render_twice, site, rank, key=c, name=k.name, chunk=c, step=_step_words(at), first=before)


@rank_check("E094", _render_early)
def collective_early(view: RankJobs, out: Findings) -> None:
    """E094: a collective before the last job computing the gradients it reduces: a chunk's `reduce_grads` before
    that chunk's last backward / backward_w, a `sync_shared` before the rank's last one."""
    exp, rank = view.exp, view.rank
    base = exp.codec.base
    for t, k in _collective_types(exp):
        per_chunk = k.members is Members.REPLICAS
        grads = _gradient_types(exp, k.name)
        for c in range(exp.vpp if per_chunk else 1):
            placed = view.placed(base(c, 0) + t)
            last = _last_gradient(view, grads, (c,) if per_chunk else range(exp.vpp))
            if placed is not None and placed[0] < last:
                out.add(
                    _render_early,
                    placed[1],
                    rank,
                    key=c,
                    name=k.name,
                    chunk=c,
                    step=_step_words(placed[0]),
                    after=last,
                    last=exp.label(exp.jobs[rank][last]),
                )


def _step_words(position: float, note: bool = True) -> str:
    """A job's step for a label: `3`, or for a reduction dp 1 leaves out (half a step before the job it stood
    before) the step it stands at, with `note`: that it is no work there."""
    if position == int(position):
        return str(int(position))
    return f"{int(position + 0.5)}{' (no work at dp 1, a collective above it)' if note else ''}"


def _gradient_types(exp: Expansion, name: str) -> list[int]:
    names = exp.type_names
    return [names.index(n) for n in kind(name).reduces if n in names]


def _last_gradient(view: RankJobs, grads: list[int], chunks) -> int:
    """The step of the last job of these gradient types of these chunks on the rank (-1: none)."""
    base, m = view.exp.codec.base, view.exp.microbatches
    return max((view.pos[base(c, mb) + g] for c in chunks for mb in range(m) for g in grads), default=-1)
