"""Run one per-rank check alone on a small literal order, and what its diagnostics say (for the tests of each check
in this folder)."""

from __future__ import annotations

from ppdsl.analysis.check import check_expansion
from ppdsl.analysis.checks import Findings, index_rank, used_types
from ppdsl.analysis.expand import expand
from ppdsl.common.diagnostics import Diagnostic
from ppdsl.language.resolve import resolve_text

SEND_AFTER = 'job send_backward : backward ops "pd_op.send_v2" after backward sends\n'


def run(check, source: str, pp: int = 1, m: int = 2, vpp: int = 1) -> list[Diagnostic]:
    """The diagnostics of one per-rank check alone, on every rank of `source` (a `table`)."""
    exp = expand(resolve_text(source, "t.sched"), pp, m, vpp)
    used = used_types(exp)
    aux = [t for t, jt in enumerate(exp.defn.job_types) if not jt.builtin and t in used]
    out = Findings()
    for rank in range(pp):
        check(index_rank(exp, rank, aux), out)
    return out.diagnostics(exp)


def said(diagnostics: list[Diagnostic]) -> list[tuple[str, str, str | None]]:
    return [(d.code, d.message, d.label) for d in diagnostics]


def codes(source: str, pp: int = 1, m: int = 2, vpp: int = 1) -> list[str]:
    """The codes the whole check (`check_expansion`: every registered check) reports on `source`."""
    return [d.code for d in check_expansion(expand(resolve_text(source, "t.sched"), pp, m, vpp)).diagnostics]
