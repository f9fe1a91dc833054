"""Per-rank checks of an Expansion: completeness (S101, S102, S104, S107), local order (S103) and where the
memory actions run (S115-S118: recompute, offload, reload between a micro-batch's forward and its backward).

Each rank owns every (job type, chunk, micro-batch) of its chunks: a forward, and either a backward or a
backward_b + backward_w pair, and one of each auxiliary job type the schedule uses; the optimizer runs once,
last. Forward precedes backward / backward_b, backward_b precedes backward_w, and auxiliary jobs keep their
declared `before` / `after` side of their anchor.

A check is one function, registered with the code it reports and the renderers of its findings:

    @rank_check("S104", _render_no_optimizer, _render_optimizer_early)
    def optimizer(view: RankJobs, out: Findings) -> None:
        ...
        out.add(_render_no_optimizer, view.end_site, view.rank)

so a new check is that function (with its renderers beside it) plus its code's row in `ppdsl.common.codes` /
`ppdsl.common.explanations`. Each reads a `RankJobs`, built once per rank in one pass over its jobs (where each
job runs), so a check is a walk over the rank's (chunk, micro-batch) pairs and never searches the order. A check
records findings; the findings of one renderer at one statement become one diagnostic that names every rank and
micro-batch they concern ("on ranks 0-3, micro-batches 0-7"), as one mistake is one statement, however many
ranks run it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MemoryActions
from ppdsl.common.diagnostics import Diagnostic, Span
from ppdsl.common.text import count, numbered, ranges
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD, OPTIMIZER, Memory

MAX_PER_KIND = 12  # diagnostics of one code kept in full; the rest are counted
MAX_NOTES = 4  # per-rank details shown under one diagnostic
DETAILS_PER_RANK = 9  # findings of one rank kept in detail (a note lists 8 jobs and says how many more)


@dataclass
class Finding:
    """One occurrence: on `rank`, about micro-batch `mb` (None: the rank as a whole), with what to say of it."""

    rank: int
    mb: int | None
    detail: dict


# A renderer makes one diagnostic of a group of findings; it is also the findings' kind.
Render = Callable[[Expansion, "Group"], Diagnostic]
# What a check runs on each rank: it reads the rank's jobs and records what it finds.
RankRun = Callable[["RankJobs", "Findings"], None]


@dataclass
class Group:
    """One diagnostic's findings: every rank and micro-batch they concern, and the first few in detail (a wrong
    statement at large sizes has a finding per job, and a message needs a handful)."""

    code: str
    kind: Render
    site: int
    findings: list[Finding] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    mbs: set[int] = field(default_factory=set)
    total: int = 0
    kept: dict[int, int] = field(default_factory=dict)  # rank -> findings kept in detail


@dataclass(frozen=True)
class RankCheck:
    """A per-rank check: the code it reports, what it runs on each rank, and the renderers of what it finds."""

    code: str
    run: RankRun
    renders: tuple[Render, ...]


RANK_CHECKS: list[RankCheck] = []  # every per-rank check, in the order its diagnostics are listed
_CODE_OF: dict[Render, str] = {}  # renderer -> the code of its check


def rank_check(code: str, *renders: Render) -> Callable[[RankRun], RankRun]:
    """Register a per-rank check that reports `code` and records its findings with `out.add(render, ...)`, each
    `render` one of `renders`. Checks run (and their diagnostics are listed) in the order they are defined."""

    def register(run: RankRun) -> RankRun:
        for render in renders:
            if render in _CODE_OF:
                raise ValueError(f"`{render.__name__}` renders the findings of two checks")
            _CODE_OF[render] = code
        RANK_CHECKS.append(RankCheck(code, run, renders))
        return run

    return register


class Findings:
    """Findings grouped by (kind, statement): each group is one diagnostic."""

    def __init__(self) -> None:
        self.groups: dict[tuple[Render, int, object], Group] = {}

    def add(self, kind: Render, site: int, rank: int, mb: int | None = None, key: object = None, **detail) -> None:
        """A finding of `kind` (its renderer) at statement `site`, on `rank`, about micro-batch `mb`; `key`
        separates findings at one statement that make separate diagnostics."""
        group = self.groups.get((kind, site, key))
        if group is None:
            group = self.groups[(kind, site, key)] = Group(_CODE_OF[kind], kind, site)
        group.ranks.add(rank)
        if mb is not None:
            group.mbs.add(mb)
        group.total += 1
        kept = group.kept.get(rank, 0)
        if kept < DETAILS_PER_RANK and (kept or len(group.kept) <= MAX_NOTES):
            group.kept[rank] = kept + 1
            group.findings.append(Finding(rank, mb, detail))

    def diagnostics(self, exp: Expansion) -> list[Diagnostic]:
        out: list[Diagnostic] = []
        per_code: dict[str, int] = {}
        order: dict[str, int] = {}
        for check in RANK_CHECKS:
            order.setdefault(check.code, len(order))
        for group in sorted(self.groups.values(), key=lambda g: order[g.code]):
            n = per_code[group.code] = per_code.get(group.code, 0) + 1
            if n <= MAX_PER_KIND:
                out.append(group.kind(exp, group))
        for code, n in per_code.items():
            if n > MAX_PER_KIND:
                out.append(Diagnostic(code, f"... and {n - MAX_PER_KIND} more `{code}` errors like the ones above"))
        return out


@dataclass
class RankJobs:
    """One rank's order indexed by job: `pos[code]` is the step of job `code` (-1: never runs), for codes of
    micro-batches 0 .. microbatches - 1; `outside` lists the steps of jobs of other micro-batches, `repeats`
    (step, first step) of jobs that run again."""

    exp: Expansion
    rank: int
    aux: list[int]  # the auxiliary job types the schedule uses
    pos: list[int]
    outside: list[int]
    repeats: list[tuple[int, int]]

    def site(self, step: int) -> int:
        """The statement (site id) that emitted the job at `step`."""
        return self.exp.sites[self.rank][step]

    @property
    def end_site(self) -> int:
        """Where the order ends: the statement of the rank's last job (the order itself if it has none)."""
        sites = self.exp.sites[self.rank]
        return sites[-1] if sites else 0

    def steps(self, t: int) -> list[int]:
        """The step of job type `t` of every (chunk, micro-batch), in code order (-1: never runs): a slice of `pos`,
        so that a check can first ask, at C speed, whether anything is wrong at all."""
        return self.pos[self.exp.codec.type_slice(t)]

    def gradient_steps(self) -> list[int]:
        """Per (chunk, micro-batch), the step of the job that computes its input gradient: the whole backward, or
        the split one's backward_b (the later of the two where a micro-batch has both, which S102 reports)."""
        whole, split = self.steps(BACKWARD), self.steps(BACKWARD_B)
        if min(whole, default=0) >= 0 or max(split, default=-1) < 0:
            return whole
        if max(whole, default=-1) < 0:
            return split
        return list(map(max, whole, split))

    def backward_split(self, base: int) -> tuple[int, int, int] | None:
        """Steps of (backward, backward_b, backward_w) of the micro-batch whose codes start at `base`, or None when it
        has both a whole and a split backward (S102 reports it; the other checks skip it)."""
        pos = self.pos
        b, bb, bw = pos[base + BACKWARD], pos[base + BACKWARD_B], pos[base + BACKWARD_W]
        if b >= 0 and (bb >= 0 or bw >= 0):
            return None
        return b, bb, bw

    def bases(self):
        """The first code of every (chunk, micro-batch) the rank owns, with that chunk and micro-batch."""
        exp = self.exp
        base = exp.codec.base
        for c in range(exp.vpp):
            for mb in range(exp.microbatches):
                yield base(c, mb), c, mb


def index_rank(exp: Expansion, rank: int, aux: list[int]) -> RankJobs:
    size = exp.codec.size(exp.microbatches)
    pos = [-1] * size
    outside: list[int] = []
    repeats: list[tuple[int, int]] = []
    for i, code in enumerate(exp.jobs[rank]):
        if code >= size:
            outside.append(i)
        elif pos[code] >= 0:
            repeats.append((i, pos[code]))
        else:
            pos[code] = i
    return RankJobs(exp, rank, aux, pos, outside, repeats)


def used_types(exp: Expansion) -> set[int]:
    """Job types that occur anywhere in the expansion."""
    codec = exp.codec
    seen: set[int] = set()
    for jobs in exp.jobs:
        seen.update(codec.types_in(jobs))
        if len(seen) == codec.ntypes:
            break
    return seen


def check_ranks(exp: Expansion) -> list[Diagnostic]:
    """Every registered check on every rank, as diagnostics (none: each rank's order is complete and ordered)."""
    out = Findings()
    used = used_types(exp)
    aux = [t for t, jt in enumerate(exp.defn.job_types) if not jt.builtin and t in used]
    for rank in range(exp.pp):
        view = index_rank(exp, rank, aux)
        for check in RANK_CHECKS:
            check.run(view, out)
    return out.diagnostics(exp)


# -------------------------------------------------------------------------------- what a diagnostic says of a group


def _span(exp: Expansion, group: Group) -> Span:
    return exp.defn.sites[group.site].span


def _ranks(group: Group) -> list[int]:
    return sorted(group.ranks)


def _mbs(group: Group) -> list[int]:
    return sorted(group.mbs)


def _where(group: Group) -> str:
    """`on rank 0`, `on ranks 0-3, micro-batches 0-7`."""
    text = f"on {numbered('rank', _ranks(group))}"
    mbs = _mbs(group)
    return text + (f", {numbered('micro-batch', mbs, 'micro-batches')}" if len(mbs) > 1 else "")


def _on_rank(group: Group, finding: Finding) -> str:
    """`rank r: ` when a group spans several ranks, so a label about one occurrence says which."""
    return f"rank {finding.rank}: " if len(_ranks(group)) > 1 else ""


def _jobs(group: Group, limit: int = 4) -> str:
    names = list(dict.fromkeys(f.detail["job"] for f in group.findings))
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    if group.total > len(group.findings):  # not every finding was kept in detail
        return shown + " and others"
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# ------------------------------------------------------------------------ S107: micro-batches the sizes do not have


def _render_mb_range(exp: Expansion, group: Group) -> Diagnostic:
    m = exp.microbatches
    first = group.findings[0]
    mbs = _mbs(group)
    subject = f"{numbered('micro-batch', mbs, 'micro-batches')} {'does' if len(mbs) == 1 else 'do'} not exist"
    return Diagnostic(
        "S107",
        f"{subject} on {numbered('rank', _ranks(group))}: there {'is' if m == 1 else 'are'} "
        f"{count(m, 'micro-batch', 'micro-batches')} (0 .. {m - 1})",
        _span(exp, group),
        label=f"{_on_rank(group, first)}step {first.detail['step']} runs `{first.detail['job']}`",
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


# ------------------------------------------------------------------------------------------------ S102: a job twice


def _render_twice(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    names = {f.detail["job"] for f in group.findings}
    subject = f"{_jobs(group)} {'runs' if len(names) == 1 else 'run'} twice"
    return Diagnostic(
        "S102",
        f"{subject} on {numbered('rank', _ranks(group))}",
        _span(exp, group),
        label=f"{_on_rank(group, first)}again at step {first.detail['step']}, first at step {first.detail['first']}",
        help="each job runs exactly once per micro-batch",
    )


def _render_mixed(exp: Expansion, group: Group) -> Diagnostic:
    mbs = _mbs(group)
    chunks = sorted({f.detail["chunk"] for f in group.findings})
    what = numbered("micro-batch", mbs, "micro-batches") + (f" (chunk {chunks[0]})" if exp.vpp > 1 else "")
    verb = "has" if len(mbs) == 1 else "have"
    return Diagnostic(
        "S102",
        f"{what} {verb} both a whole backward and a split one on {numbered('rank', _ranks(group))}",
        _span(exp, group),
        label=f"{_on_rank(group, group.findings[0])}`{group.findings[0].detail['job']}` here",
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


# ---------------------------------------------------------------------------------------------- S104: the optimizer


def _render_no_optimizer(exp: Expansion, group: Group) -> Diagnostic:
    ranks = _ranks(group)
    return Diagnostic(
        "S104",
        f"{numbered('rank', ranks)} never {'runs' if len(ranks) == 1 else 'run'} the optimizer",
        _span(exp, group),
        label="the order ends here",
        help="end the order with `optimizer`",
    )


def _render_optimizer_early(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    return Diagnostic(
        "S104",
        f"the optimizer is not the last job on {numbered('rank', _ranks(group))}",
        _span(exp, group),
        label=f"{_on_rank(group, first)}runs at step {first.detail['step']} of {first.detail['jobs']}",
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


# -------------------------------------------------------------------------------------------- S103: the local order


def _render_backward_first(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    mbs = _mbs(group)
    d = first.detail
    chunk = f" (chunk {d['chunk']})" if exp.vpp > 1 else ""
    if len(mbs) == 1:
        subject = f"backward of micro-batch {mbs[0]} runs before its forward"
    else:
        subject = f"backwards of micro-batches {ranges(mbs)} run before their forwards"
    return Diagnostic(
        "S103",
        f"{subject} on {numbered('rank', _ranks(group))}{chunk}",
        _span(exp, group),
        label=f"{_on_rank(group, first)}`{d['job']}` runs at step {d['step']}; "
        f"`{d['forward']}` runs at step {d['forward_step']}",
        help="a backward needs the activations of its own forward: move it later",
    )


def _render_weight_first(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    mbs = _mbs(group)
    d = first.detail
    chunk = f" (chunk {d['chunk']})" if exp.vpp > 1 else ""
    if len(mbs) == 1:
        subject = f"weight gradient of micro-batch {mbs[0]} runs before its input gradient"
    else:
        subject = f"weight gradients of micro-batches {ranges(mbs)} run before their input gradients"
    return Diagnostic(
        "S103",
        f"{subject} on {numbered('rank', _ranks(group))}{chunk}",
        _span(exp, group),
        label=f"{_on_rank(group, first)}`{d['job']}` at step {d['step']}, `{d['input']}` at step {d['input_step']}",
        help="run `backward_w` after the `backward_b` of the same micro-batch",
    )


def _render_anchor(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    d = first.detail
    jt = exp.defn.job_types[d["type"]]
    side = "before" if jt.before else "after"
    anchor_name = jt.before or jt.after
    mbs = _mbs(group)
    if group.total == 1:
        message = f"`{d['job']}` must run {side} `{d['anchor']}` on rank {first.rank}"
    else:
        message = f"`{jt.name}` must run {side} its `{anchor_name}` {_where(group)}"
        if len(mbs) == 1:
            message = f"`{d['job']}` must run {side} `{d['anchor']}` on {numbered('rank', _ranks(group))}"
    return Diagnostic(
        "S103",
        message,
        _span(exp, group),
        label=f"{_on_rank(group, first)}`{d['job']}` runs at step {d['step']}; "
        f"`{d['anchor']}` at step {d['anchor_step']}",
        help=f"`{jt.name}` is declared `{side} {anchor_name}`",
    )


@rank_check("S103", _render_backward_first, _render_weight_first, _render_anchor)
def local_order(view: RankJobs, out: Findings) -> None:
    """S103: a backward before its forward, a weight gradient before its input gradient, an auxiliary job on the
    wrong side of the job it serves."""
    # First, at C speed, whether anything can be wrong (an over-approximation: the loop below decides).
    suspect = any(map(operator.lt, view.gradient_steps(), view.steps(FORWARD)))
    suspect = suspect or any(map(operator.lt, view.steps(BACKWARD_W), view.steps(BACKWARD_B)))
    suspect = suspect or any(_anchor_suspect(view, t) for t in view.aux)
    if not suspect:
        return
    exp, rank, pos = view.exp, view.rank, view.pos
    for base, c, mb in view.bases():
        split = view.backward_split(base)
        if split is None:
            continue
        b, bb, bw = split
        if b < 0 and bb < 0 and bw < 0:
            continue  # no backward at all: S101's, and the micro-batch's auxiliary jobs are not looked at
        f = pos[base + FORWARD]
        grad = b if b >= 0 else bb
        if f >= 0 and grad >= 0 and grad < f:
            gcode = base + (BACKWARD if b >= 0 else BACKWARD_B)
            detail = {"job": exp.label(gcode), "step": grad, "forward": exp.label(base), "forward_step": f}
            out.add(_render_backward_first, view.site(grad), rank, mb, key=c, chunk=c, **detail)
        if b < 0 and bb >= 0 and bw >= 0 and bw < bb:
            detail = {"job": exp.label(base + BACKWARD_W), "step": bw, "input": exp.label(base + BACKWARD_B)}
            out.add(_render_weight_first, view.site(bw), rank, mb, key=c, chunk=c, input_step=bb, **detail)
        for t in view.aux:
            if pos[base + t] >= 0:
                _anchor(view, base, t, mb, out)


def _anchor_suspect(view: RankJobs, t: int) -> bool:
    """Whether any job of auxiliary type `t` may be on the wrong side of its anchor (a quick over-approximation)."""
    jt = view.exp.defn.job_types[t]
    anchor_name = jt.before or jt.after
    if anchor_name is None:
        return False
    anchor_t = view.exp.defn.type_index(anchor_name)
    anchors = view.gradient_steps() if anchor_t == BACKWARD else view.steps(anchor_t)
    if jt.before is not None:
        return any(map(operator.gt, view.steps(t), anchors))
    return any(map(operator.lt, view.steps(t), anchors))


def _anchor(view: RankJobs, base: int, t: int, mb: int, out: Findings) -> None:
    exp, pos = view.exp, view.pos
    jt = exp.defn.job_types[t]
    anchor_name = jt.before or jt.after
    if anchor_name is None:
        return
    p = pos[base + t]
    anchor_t = exp.defn.type_index(anchor_name)
    a = pos[base + anchor_t]
    if anchor_t == BACKWARD and a < 0:
        a = pos[base + BACKWARD_B]  # a split backward anchors on its input-gradient part
    if a < 0:
        return
    if (jt.before is not None and p > a) or (jt.after is not None and p < a):
        detail = {"job": exp.label(base + t), "step": p, "anchor": exp.label(base + anchor_t), "anchor_step": a}
        out.add(_render_anchor, view.site(p), view.rank, mb, key=t, type=t, **detail)


# ---------------------------------------------------------------------------------------- S101: jobs that never run


def _render_missing(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    type_name = exp.defn.job_types[first.detail["type"]].name
    ranks = _ranks(group)
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
        _span(exp, group),
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


# ------------------------------------------------------------------- S115-S118: where the memory actions run
#
# A recompute rebuilds a (chunk, micro-batch)'s activations for its backward, so it runs after the forward and
# before the backward (or backward_b). An offload copies the forward's activations to the host, its reload copies
# them back, and the backward needs them back: forward, offload, reload, backward, in this order on the rank.


def _render_action(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    d = first.detail
    chunk = f" (chunk {d['chunk']})" if exp.vpp > 1 else ""
    mbs = _mbs(group)
    which = f"micro-batch {mbs[0]}" if len(mbs) == 1 else f"micro-batches {ranges(mbs)}"
    if d["other_step"] is None:
        where = f"`{d['job']}` runs at step {d['step']}; there is no `{d['other']}`"
    else:
        where = f"`{d['job']}` runs at step {d['step']}; `{d['other']}` at step {d['other_step']}"
    return Diagnostic(
        group.code,
        f"{d['what']} of {which} {d['rule']} on {numbered('rank', _ranks(group))}{chunk}",
        _span(exp, group),
        label=f"{_on_rank(group, first)}{where}",
        help=d["help"],
    )


def _render_recompute(exp: Expansion, group: Group) -> Diagnostic:
    return _render_action(exp, group)


def _render_offload(exp: Expansion, group: Group) -> Diagnostic:
    return _render_action(exp, group)


def _render_reload(exp: Expansion, group: Group) -> Diagnostic:
    return _render_action(exp, group)


def _render_unreloaded(exp: Expansion, group: Group) -> Diagnostic:
    return _render_action(exp, group)


def _gradient_step(pos: list[int], base: int) -> int:
    """The step of the job that needs a (chunk, micro-batch)'s activations: its backward, or its backward_b."""
    b = pos[base + BACKWARD]
    return b if b >= 0 else pos[base + BACKWARD_B]


def _actions_of(view: RankJobs, role: Memory) -> tuple[MemoryActions, list[int]] | None:
    """The schedule's memory actions and those of `role` this rank runs (None: it runs none)."""
    actions = MemoryActions.of(view.exp)
    if actions is None:
        return None
    present = [t for t in actions.of_role(role) if max(view.steps(t), default=-1) >= 0]
    return (actions, present) if present else None


def _article(noun: str) -> str:
    return "an" if noun[:1] in "aeiou" else "a"


def _gradient_type(pos: list[int], base: int) -> int:
    return BACKWARD if pos[base + BACKWARD] >= 0 else BACKWARD_B


def _action_finding(view: RankJobs, out: Findings, render: Render, base: int, c: int, mb: int, step: int, **d):
    exp = view.exp
    other = d.pop("other_code")
    other_step = view.pos[other] if view.pos[other] >= 0 else None
    detail = {"job": exp.label(base + d.pop("t")), "step": step, "other": exp.label(other), "other_step": other_step}
    out.add(render, view.site(step), view.rank, mb, key=(c, d["rule"]), chunk=c, **detail, **d)


@rank_check("S115", _render_recompute)
def recompute_order(view: RankJobs, out: Findings) -> None:
    """S115: a recompute (an action that rebuilds activations) before its (chunk, micro-batch)'s forward, or after
    its backward (or backward_b)."""
    found = _actions_of(view, Memory.REBUILDS)
    if found is None:
        return
    actions, types = found
    names, pos = view.exp.type_names, view.pos
    for rt in types:
        name, ft = names[rt], actions.after[rt]
        forward = names[ft]
        for base, c, mb in view.bases():
            grad = _gradient_step(pos, base)
            p = pos[base + rt]
            if p < 0:
                continue
            f = pos[base + ft]
            if f < 0 or p < f:
                what = dict(rule=f"runs before its {forward}", other_code=base + ft)
                help_text = (
                    f"{_article(name)} {name} re-runs the {forward}'s ops from its stage input: move it after the "
                    f"{forward}"
                )
            elif grad >= 0 and p > grad:
                what = dict(rule="runs after its backward", other_code=base + _gradient_type(pos, base))
                help_text = f"the backward needs the recomputed activations: move the {name} before it"
            else:
                continue
            what["help"] = help_text
            _action_finding(view, out, _render_recompute, base, c, mb, p, t=rt, what=f"the {name}", **what)


@rank_check("S116", _render_offload)
def offload_order(view: RankJobs, out: Findings) -> None:
    """S116: an offload (an action that moves activations out) before its (chunk, micro-batch)'s forward (nothing
    to copy yet), or after its backward."""
    found = _actions_of(view, Memory.MOVES_OUT)
    if found is None:
        return
    actions, types = found
    names, pos = view.exp.type_names, view.pos
    for ot in types:
        name, ft = names[ot], actions.after[ot]
        forward = names[ft]
        for base, c, mb in view.bases():
            grad = _gradient_step(pos, base)
            p = pos[base + ot]
            if p < 0:
                continue
            f = pos[base + ft]
            if f < 0 or p < f:
                what = dict(rule=f"runs before its {forward}", other_code=base + ft)
                help_text = (
                    f"{_article(name)} {name} copies the {forward}'s activations to the host: move it after the "
                    f"{forward}"
                )
            elif grad >= 0 and p > grad:
                what = dict(rule="runs after its backward", other_code=base + _gradient_type(pos, base))
                help_text = f"the backward has freed the activations: {name} between the {forward} and the backward"
            else:
                continue
            _action_finding(
                view, out, _render_offload, base, c, mb, p, t=ot, what=f"the {name}", help=help_text, **what
            )


@rank_check("S117", _render_reload)
def reload_order(view: RankJobs, out: Findings) -> None:
    """S117: a reload (an action that restores activations from the host) with no offload before it, or after the
    backward that needs it."""
    found = _actions_of(view, Memory.RESTORES)
    if found is None:
        return
    actions, types = found
    names, pos = view.exp.type_names, view.pos
    for lt in types:
        name, ot = names[lt], actions.after[lt]
        offload = names[ot]
        for base, c, mb in view.bases():
            grad = _gradient_step(pos, base)
            p = pos[base + lt]
            if p < 0:
                continue
            o = pos[base + ot]
            if o < 0 or p < o:
                rule = f"runs before its {offload}" if o >= 0 else f"has no {offload}"
                what = dict(rule=rule, other_code=base + ot)
                help_text = (
                    f"{_article(name)} {name} copies back what its {offload} moved: {offload} first (after the "
                    f"{names[actions.after[ot]]})"
                )
            elif grad >= 0 and p > grad:
                what = dict(rule="runs after its backward", other_code=base + _gradient_type(pos, base))
                help_text = f"the backward needs the activations back: {name} before it"
            else:
                continue
            _action_finding(view, out, _render_reload, base, c, mb, p, t=lt, what=f"the {name}", help=help_text, **what)


@rank_check("S118", _render_unreloaded)
def backward_without_reload(view: RankJobs, out: Findings) -> None:
    """S118: the backward of an offloaded (chunk, micro-batch) with no reload (no action that restores what the
    offload moved) before it: its activations are on the host."""
    found = _actions_of(view, Memory.MOVES_OUT)
    if found is None:
        return
    actions, moved_by = found
    pos = view.pos
    for ot in moved_by:
        restored_by = [t for t in actions.of_role(Memory.RESTORES) if actions.after[t] == ot]
        if not restored_by:
            continue
        lt = restored_by[0]
        for base, c, mb in view.bases():
            grad = _gradient_step(pos, base)
            o = pos[base + ot]
            if o < 0 or grad < 0 or grad < o or any(pos[base + t] >= 0 for t in restored_by):
                continue  # not offloaded, no backward, offloaded after it (S116's) or restored (S117 checks where)
            name = view.exp.type_names[lt]
            help_text = f"add a `{name}` of this micro-batch before its backward (early enough to hide the copy)"
            _action_finding(
                view,
                out,
                _render_unreloaded,
                base,
                c,
                mb,
                grad,
                t=_gradient_type(pos, base),
                what="the backward",
                rule="runs while its activations are offloaded",
                other_code=base + lt,
                help=help_text,
            )
