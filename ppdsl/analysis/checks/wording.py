"""What a diagnostic says of a group of findings: where it is, which ranks and micro-batches it concerns, which jobs
(the phrases every check's renderers share)."""

from __future__ import annotations

from ppdsl.analysis.checks.registry import Finding, Group
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Span
from ppdsl.common.text import numbered


def span_of(exp: Expansion, group: Group) -> Span:
    return exp.defn.sites[group.site].span


def ranks_of(group: Group) -> list[int]:
    return sorted(group.ranks)


def mbs_of(group: Group) -> list[int]:
    return sorted(group.mbs)


def where(group: Group) -> str:
    """`on rank 0`, `on ranks 0-3, micro-batches 0-7`."""
    text = f"on {numbered('rank', ranks_of(group))}"
    mbs = mbs_of(group)
    return text + (f", {numbered('micro-batch', mbs, 'micro-batches')}" if len(mbs) > 1 else "")


def on_rank(group: Group, finding: Finding) -> str:
    """`rank r: ` when a group spans several ranks, so a label about one occurrence says which."""
    return f"rank {finding.rank}: " if len(ranks_of(group)) > 1 else ""


def jobs_named(group: Group, limit: int = 4) -> str:
    names = list(dict.fromkeys(f.detail["job"] for f in group.findings))
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    if group.total > len(group.findings):  # not every finding was kept in detail
        return shown + " and others"
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
