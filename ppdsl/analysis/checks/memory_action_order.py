"""S115-S118, where the memory actions run: recompute, offload and reload between a micro-batch's forward and its
backward.

A recompute rebuilds a (chunk, micro-batch)'s activations for its backward, so it runs after the forward and before
the backward (or backward_b). An offload copies the forward's activations to the host, its reload copies them back,
and the backward needs them back: forward, offload, reload, backward, in this order on the rank."""

from __future__ import annotations

from ppdsl.analysis.checks.rank_jobs import RankJobs
from ppdsl.analysis.checks.registry import Findings, Group, Render, rank_check
from ppdsl.analysis.checks.wording import mbs_of, on_rank, ranks_of, span_of
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MemoryActions
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.common.text import numbered, ranges
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, FORWARD


def _render_action(exp: Expansion, group: Group) -> Diagnostic:
    first = group.findings[0]
    d = first.detail
    chunk = f" (chunk {d['chunk']})" if exp.vpp > 1 else ""
    mbs = mbs_of(group)
    which = f"micro-batch {mbs[0]}" if len(mbs) == 1 else f"micro-batches {ranges(mbs)}"
    if d["other_step"] is None:
        where = f"`{d['job']}` runs at step {d['step']}; there is no `{d['other']}`"
    else:
        where = f"`{d['job']}` runs at step {d['step']}; `{d['other']}` at step {d['other_step']}"
    return Diagnostic(
        group.code,
        f"{d['what']} of {which} {d['rule']} on {numbered('rank', ranks_of(group))}{chunk}",
        span_of(exp, group),
        label=f"{on_rank(group, first)}{where}",
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


def _memory_action_types(view: RankJobs) -> tuple[int, int, int] | None:
    actions = MemoryActions.of(view.exp)
    return None if actions is None else (actions.recompute, actions.offload, actions.reload)


def _action_finding(view: RankJobs, out: Findings, render: Render, base: int, c: int, mb: int, step: int, **d):
    exp = view.exp
    other = d.pop("other_code")
    other_step = view.pos[other] if view.pos[other] >= 0 else None
    detail = {"job": exp.label(base + d.pop("t")), "step": step, "other": exp.label(other), "other_step": other_step}
    out.add(render, view.site(step), view.rank, mb, key=(c, d["rule"]), chunk=c, **detail, **d)


@rank_check("S115", _render_recompute)
def recompute_order(view: RankJobs, out: Findings) -> None:
    """S115: a recompute before its (chunk, micro-batch)'s forward, or after its backward (or backward_b)."""
    types = _memory_action_types(view)
    if types is None or max(view.steps(types[0]), default=-1) < 0:
        return
    rt = types[0]
    pos = view.pos
    for base, c, mb in view.bases():
        grad = _gradient_step(pos, base)
        p = pos[base + rt]
        if p < 0:
            continue
        f = pos[base + FORWARD]
        g_type = BACKWARD if pos[base + BACKWARD] >= 0 else BACKWARD_B
        if f < 0 or p < f:
            what = dict(rule="runs before its forward", other_code=base + FORWARD)
            help_text = "a recompute re-runs the forward's ops from its stage input: move it after the forward"
        elif grad >= 0 and p > grad:
            what = dict(rule="runs after its backward", other_code=base + g_type)
            help_text = "the backward needs the recomputed activations: move the recompute before it"
        else:
            continue
        what["help"] = help_text
        _action_finding(view, out, _render_recompute, base, c, mb, p, t=rt, what="the recompute", **what)


@rank_check("S116", _render_offload)
def offload_order(view: RankJobs, out: Findings) -> None:
    """S116: an offload before its (chunk, micro-batch)'s forward (nothing to copy yet), or after its backward."""
    types = _memory_action_types(view)
    if types is None or max(view.steps(types[1]), default=-1) < 0:
        return
    ot = types[1]
    pos = view.pos
    for base, c, mb in view.bases():
        grad = _gradient_step(pos, base)
        p = pos[base + ot]
        if p < 0:
            continue
        f = pos[base + FORWARD]
        if f < 0 or p < f:
            what = dict(rule="runs before its forward", other_code=base + FORWARD)
            help_text = "an offload copies the forward's activations to the host: move it after the forward"
        elif grad >= 0 and p > grad:
            g_type = BACKWARD if pos[base + BACKWARD] >= 0 else BACKWARD_B
            what = dict(rule="runs after its backward", other_code=base + g_type)
            help_text = "the backward has freed the activations: offload between the forward and the backward"
        else:
            continue
        _action_finding(view, out, _render_offload, base, c, mb, p, t=ot, what="the offload", help=help_text, **what)


@rank_check("S117", _render_reload)
def reload_order(view: RankJobs, out: Findings) -> None:
    """S117: a reload with no offload before it, or after the backward that needs it."""
    types = _memory_action_types(view)
    if types is None or max(view.steps(types[2]), default=-1) < 0:
        return
    _, ot, lt = types
    pos = view.pos
    for base, c, mb in view.bases():
        grad = _gradient_step(pos, base)
        p = pos[base + lt]
        if p < 0:
            continue
        o = pos[base + ot]
        if o < 0 or p < o:
            what = dict(rule="runs before its offload" if o >= 0 else "has no offload", other_code=base + ot)
            help_text = "a reload copies back what its offload moved: offload first (after the forward)"
        elif grad >= 0 and p > grad:
            g_type = BACKWARD if pos[base + BACKWARD] >= 0 else BACKWARD_B
            what = dict(rule="runs after its backward", other_code=base + g_type)
            help_text = "the backward needs the activations back: reload before it"
        else:
            continue
        _action_finding(view, out, _render_reload, base, c, mb, p, t=lt, what="the reload", help=help_text, **what)


@rank_check("S118", _render_unreloaded)
def backward_without_reload(view: RankJobs, out: Findings) -> None:
    """S118: the backward of an offloaded (chunk, micro-batch) with no reload before it: its activations are on the
    host."""
    types = _memory_action_types(view)
    if types is None or max(view.steps(types[1]), default=-1) < 0:
        return
    _, ot, lt = types
    pos = view.pos
    for base, c, mb in view.bases():
        grad = _gradient_step(pos, base)
        o = pos[base + ot]
        if o < 0 or grad < 0 or grad < o or pos[base + lt] >= 0:
            continue  # not offloaded, no backward, offloaded after it (S116's) or reloaded (S117 checks where)
        g_type = BACKWARD if pos[base + BACKWARD] >= 0 else BACKWARD_B
        help_text = "add a `reload` of this micro-batch before its backward (early enough to hide the copy)"
        _action_finding(
            view,
            out,
            _render_unreloaded,
            base,
            c,
            mb,
            grad,
            t=g_type,
            what="the backward",
            rule="runs while its activations are offloaded",
            other_code=base + lt,
            help=help_text,
        )
