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
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, Memory


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


def _between_forward_and_backward(view: RankJobs, out: Findings, role: Memory, render: Render, early, late) -> None:
    """Each action of `role` this rank runs that comes before its (chunk, micro-batch)'s source job (its `after`:
    the forward) or after its backward (or backward_b); `early(name, forward)` and `late(name, forward)` word the
    help for each."""
    found = _actions_of(view, role)
    if found is None:
        return
    actions, types = found
    names, pos = view.exp.type_names, view.pos
    for t in types:
        name, ft = names[t], actions.after[t]
        forward = names[ft]
        for base, c, mb in view.bases():
            grad = _gradient_step(pos, base)
            p = pos[base + t]
            if p < 0:
                continue
            f = pos[base + ft]
            if f < 0 or p < f:
                what = dict(rule=f"runs before its {forward}", other_code=base + ft, help=early(name, forward))
            elif grad >= 0 and p > grad:
                other = base + _gradient_type(pos, base)
                what = dict(rule="runs after its backward", other_code=other, help=late(name, forward))
            else:
                continue
            _action_finding(view, out, render, base, c, mb, p, t=t, what=f"the {name}", **what)


@rank_check("S115", _render_recompute)
def recompute_order(view: RankJobs, out: Findings) -> None:
    """S115: a recompute (an action that rebuilds activations) before its (chunk, micro-batch)'s forward, or after
    its backward (or backward_b)."""
    _between_forward_and_backward(
        view,
        out,
        Memory.REBUILDS,
        _render_recompute,
        lambda name, forward: (
            f"{_article(name)} {name} re-runs the {forward}'s ops from its stage input: move it after the {forward}"
        ),
        lambda name, forward: f"the backward needs the recomputed activations: move the {name} before it",
    )


@rank_check("S116", _render_offload)
def offload_order(view: RankJobs, out: Findings) -> None:
    """S116: an offload (an action that moves activations out) before its (chunk, micro-batch)'s forward (nothing
    to copy yet), or after its backward."""
    _between_forward_and_backward(
        view,
        out,
        Memory.MOVES_OUT,
        _render_offload,
        lambda name, forward: (
            f"{_article(name)} {name} copies the {forward}'s activations to the host: move it after the {forward}"
        ),
        lambda name, forward: f"the backward has freed the activations: {name} between the {forward} and the backward",
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
