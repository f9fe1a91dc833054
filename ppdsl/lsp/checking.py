"""One check of an editor buffer, as `ppdsl check` makes it: the same resolution, the same `Scenario`, the same
`check`, so the same diagnostics (codes, spans, labels, help).

The buffer's text is resolved in place of the file on disk (what it includes is read from disk, as saved). The
sizes come from `ppdsl.lsp.sizes`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ppdsl.analysis.check import CheckResult, check
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.resolve import resolve_text
from ppdsl.lsp.sizes import Sizes, sizes_for
from ppdsl.lsp.syntax import ItemCache


@dataclass
class Checked:
    """What one check of a buffer found: the diagnostics of `ppdsl check` at `sizes` (and the directive's own,
    E098), the resolved schedule and the check's result when it got that far."""

    path: str
    sizes: Sizes
    diagnostics: list[Diagnostic] = field(default_factory=list)
    defn: ScheduleDef | None = None
    result: CheckResult | None = None
    seconds: float = 0.0

    @property
    def size_text(self) -> str:
        """The sizes checked and where they came from: `pp=4 vpp=1 microbatches=8 (default)`."""
        r = self.result
        if r is None:
            s = self.sizes
            return f"pp={s.pp} vpp={s.vpp or 1} microbatches={s.microbatches} ({s.source})"
        return f"pp={r.pp} vpp={r.vpp} microbatches={r.microbatches} ({self.sizes.source})"


def check_text(
    text: str, path: str, settings: Sizes, previous: Checked | None = None, cache: ItemCache | None = None
) -> Checked:
    """Check `text` as the file `path` at the sizes its directive, else `settings`, give. Never raises for a
    wrong file: everything found is in the result. `previous` (the last check of the same document): when the
    sizes are left to the default, the ones it settled on are tried first, so an edit checks once, not at
    every vpp again. `cache`: the items parsed before, kept while their text is (`ppdsl.lsp.syntax`)."""
    start = time.perf_counter()
    sizes, directive_problems = sizes_for(text, path, settings)
    out = Checked(path, sizes, list(directive_problems))
    try:
        out.defn = resolve_text(text, path, (cache or ItemCache()).parse)
    except DiagnosticError as err:
        out.diagnostics.extend(err.diagnostics)
    if out.defn is not None:
        try:
            scenarios = sizes.scenarios(out.defn)
        except DiagnosticError as err:  # a `--param`, `--cost` or `--memory-limit` of the directive
            out.diagnostics.extend(err.diagnostics)
        else:
            if previous is not None and previous.result is not None and previous.sizes == sizes:
                settled = (previous.result.microbatches, previous.result.vpp)
                scenarios.sort(key=lambda s: (s.microbatches, s.vpp) != settled)  # stable: the rest keep their order
            out.result = _first_accepted(scenarios)
            out.diagnostics.extend(out.result.diagnostics)
    out.seconds = time.perf_counter() - start
    return out


def _first_accepted(scenarios: list[Scenario]) -> CheckResult:
    """The check at the first scenario whose `require`s (S100) hold; when none does, the one that fails fewest."""
    results = []
    for scenario in scenarios:
        result = check(scenario)
        if not any(d.code == "S100" for d in result.diagnostics):
            return result
        results.append(result)
    return min(results, key=lambda r: sum(d.code == "S100" for d in r.diagnostics))
