"""The registry of per-rank checks: `@rank_check` records a check with the code it reports and the renderers of its
findings, `Findings` groups what the checks find into diagnostics (one per renderer and statement), and
`check_ranks` runs every registered check on every rank."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ppdsl.analysis.checks.rank_jobs import RankJobs, index_rank, used_types
from ppdsl.analysis.expansion import Expansion
from ppdsl.common.diagnostics import Diagnostic

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
RankRun = Callable[[RankJobs, "Findings"], None]


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
    `render` one of `renders`. Checks run (and their diagnostics are
    listed) in the order `ppdsl.analysis.checks` imports their modules."""

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
