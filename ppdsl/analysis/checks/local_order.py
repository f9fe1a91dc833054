"""S103, the local order: forward precedes backward / backward_b, backward_b precedes backward_w, and an auxiliary
job keeps its declared `before` / `after` side of its anchor."""

from __future__ import annotations

import operator

from ppdsl.analysis.checks.rank_jobs import RankJobs
from ppdsl.analysis.checks.registry import Findings, Group, rank_check
from ppdsl.analysis.checks.wording import mbs_of, on_rank, ranks_of, span_of, where
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.text import numbered, ranges
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W, FORWARD


def _render_backward_first(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    mbs = mbs_of(group)
    d = first.detail
    chunk = f" (chunk {d['chunk']})" if exp.vpp > 1 else ""
    if len(mbs) == 1:
        subject = f"backward of micro-batch {mbs[0]} runs before its forward"
    else:
        subject = f"backwards of micro-batches {ranges(mbs)} run before their forwards"
    return Diagnostic(
        "S103",
        f"{subject} on {numbered('rank', ranks_of(group))}{chunk}",
        span_of(exp, group),
        label=f"{on_rank(group, first)}`{d['job']}` runs at step {d['step']}; "
        f"`{d['forward']}` runs at step {d['forward_step']}",
        help="a backward needs the activations of its own forward: move it later",
    )


def _render_weight_first(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    mbs = mbs_of(group)
    d = first.detail
    chunk = f" (chunk {d['chunk']})" if exp.vpp > 1 else ""
    if len(mbs) == 1:
        subject = f"weight gradient of micro-batch {mbs[0]} runs before its input gradient"
    else:
        subject = f"weight gradients of micro-batches {ranges(mbs)} run before their input gradients"
    return Diagnostic(
        "S103",
        f"{subject} on {numbered('rank', ranks_of(group))}{chunk}",
        span_of(exp, group),
        label=f"{on_rank(group, first)}`{d['job']}` at step {d['step']}, `{d['input']}` at step {d['input_step']}",
        help="run `backward_w` after the `backward_b` of the same micro-batch",
    )


def _render_anchor(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    d = first.detail
    jt = exp.defn.job_types[d["type"]]
    side = "before" if jt.before else "after"
    anchor_name = jt.before or jt.after
    mbs = mbs_of(group)
    if group.total == 1:
        message = f"`{d['job']}` must run {side} `{d['anchor']}` on rank {first.rank}"
    else:
        message = f"`{jt.name}` must run {side} its `{anchor_name}` {where(group)}"
        if len(mbs) == 1:
            message = f"`{d['job']}` must run {side} `{d['anchor']}` on {numbered('rank', ranks_of(group))}"
    return Diagnostic(
        "S103",
        message,
        span_of(exp, group),
        label=f"{on_rank(group, first)}`{d['job']}` runs at step {d['step']}; "
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
