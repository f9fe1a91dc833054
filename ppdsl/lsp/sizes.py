"""The sizes (and other `ppdsl check` options) the language server checks a file at.

Where they come from, first found wins:

1. the file's own directive, a comment line `# ppdsl: --pp 4 -m 8 [--vpp 2] [--dp 2] [--param k=v] [--rendezvous]
   [--cost forward=1,backward=2] [--memory-limit 12] [--max-jobs N]` (the options as `ppdsl check` spells them,
   within its caps; `--max-jobs` at most its default, `DEFAULT_MAX_JOBS`: a file may lower the work a check of it
   takes on, never raise it, for the file may be anyone's and the server holds every job it expands);
2. the workspace settings `ppdsl.pp`, `ppdsl.microbatches`, `ppdsl.vpp` (initializationOptions, or the client's
   `workspace/configuration`), each one that is given;
3. the default: pp 4, microbatches 8, and the smallest vpp from 1 to 4 that the schedule's `require`s accept
   (as `ppdsl compare` picks it); if none does, microbatches = pp (`zbvpp` needs it); if still none, the sizes
   whose `require`s fail fewest, and those failures are reported. A setting or directive that gives a size
   fixes it.

A directive that cannot be read is a diagnostic (E098) on its line; the file is then checked at the settings' or
the default sizes, so the rest of its diagnostics still show.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from ppdsl.analysis.costs import CostSpec, parse_cost_pairs
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.sizes import MAX_SIZE, parse_params
from ppdsl.common.units import parse_memory_limit
from ppdsl.language.ir import ScheduleDef

DEFAULT_PP = 4
DEFAULT_MICROBATCHES = 8
AUTO_VPP = (1, 2, 3, 4)
# `# ppdsl: ...` on a line of its own (the options after the colon)
DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*ppdsl:(.*)$", re.M)
SETTING_KEYS = {"pp": "pp", "microbatches": "microbatches", "vpp": "vpp"}


@dataclass(frozen=True)
class Sizes:
    """What one check runs at: `ppdsl check`'s options. `vpp` None: the smallest the `require`s accept."""

    pp: int = DEFAULT_PP
    microbatches: int = DEFAULT_MICROBATCHES
    vpp: int | None = None
    params: tuple[str, ...] = ()
    rendezvous: bool = False
    cost: str | None = None
    memory_limit: str | None = None
    max_jobs: int = DEFAULT_MAX_JOBS
    dp: int = 1  # data-parallel replicas (`--dp`): a schedule for them is checked with them
    source: str = "default"  # "directive", "settings" or "default": said in hovers and code lenses
    given: frozenset[str] = field(default_factory=frozenset)  # which fields were written

    def scenarios(self, defn: ScheduleDef) -> list[Scenario]:
        """The scenarios to try in order (several only when vpp is left to the `require`s); raises
        DiagnosticError (E007) for a parameter, cost or limit `ppdsl check` would refuse."""
        params = parse_params(list(self.params))
        costs = CostSpec.read(parse_cost_pairs(self.cost), None)
        # The editor checks without a model, so a limit counts activations: bytes are refused as `check` refuses them
        limit = parse_memory_limit(self.memory_limit, measured=False) if self.memory_limit is not None else None
        base = Scenario(
            defn, self.pp, self.microbatches, 1, params, costs, self.rendezvous, None, limit, self.max_jobs, dp=self.dp
        )
        vpps = AUTO_VPP if self.vpp is None else (self.vpp,)
        # microbatches left to the default: also pp of them, for a schedule that needs microbatches == pp
        counts = (self.microbatches,) if "microbatches" in self.given else (self.microbatches, self.pp)
        return [base.with_(microbatches=m, vpp=v) for m in dict.fromkeys(counts) for v in vpps]


def from_settings(settings: dict | None) -> Sizes:
    """The sizes the workspace settings give (`{"pp": 4, "microbatches": 8, "vpp": 2}`, the same under a
    `ppdsl` key, or flat as VS Code names them, `{"ppdsl.pp": 4}`); values that are not sizes (`null`, text)
    are ignored, and the default stands for them."""
    if not isinstance(settings, dict):
        return Sizes()
    if isinstance(settings.get("ppdsl"), dict):
        settings = settings["ppdsl"]
    found = {}
    for key, name in SETTING_KEYS.items():
        value = settings.get(key, settings.get(f"ppdsl.{key}"))
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SIZE:
            found[name] = value
    if not found:
        return Sizes()
    return Sizes(**found, source="settings", given=frozenset(found))


def directive(text: str, file: str) -> tuple[Span, str] | None:
    """Where the file's `# ppdsl:` directive is and what it says (its first one), or None."""
    m = DIRECTIVE.search(text)
    if m is None:
        return None
    line = text.count("\n", 0, m.start()) + 1
    line_start = text.rfind("\n", 0, m.start()) + 1
    col = m.start() - line_start + 1 + len(m.group(0)) - len(m.group(0).lstrip())  # from the `#`
    return Span(file, line, col, line, m.end() - line_start + 1), m.group(1)


def sizes_for(text: str, file: str, settings: Sizes) -> tuple[Sizes, list[Diagnostic]]:
    """The sizes of this file: its directive over the settings; an unreadable directive is E098, and the
    settings stand."""
    found = directive(text, file)
    if found is None:
        return settings, []
    span, options = found
    try:
        return parse_directive(options, settings), []
    except DiagnosticError as err:
        return settings, [replace(d, code="E098", span=span) for d in err.diagnostics]


_INT_FLAGS = {"--pp": "pp", "--microbatches": "microbatches", "-m": "microbatches", "--vpp": "vpp",
              "--dp": "dp", "--max-jobs": "max_jobs"}  # fmt: skip
_TEXT_FLAGS = {"--cost": "cost", "--memory-limit": "memory_limit"}
_MAX_JOBS_MESSAGE = (
    "the `# ppdsl:` directive's `--max-jobs` must be from 1 to "
    f"{DEFAULT_MAX_JOBS} (`ppdsl check`'s default), got `{{}}`: a file does not raise what the server takes on"
)
_MAX_JOBS_HELP = "check a larger expansion on the command line: `ppdsl check FILE --pp N -m M --max-jobs J`"
_HELP = "write the sizes as `ppdsl check` takes them: `# ppdsl: --pp 4 -m 8 [--vpp 2] [--param name=value]`"


def parse_directive(options: str, settings: Sizes) -> Sizes:
    """The options of a `# ppdsl:` line; pp and microbatches must both be given. Raises DiagnosticError."""

    def bad(message: str) -> DiagnosticError:
        return DiagnosticError([Diagnostic("E098", message, help=_HELP)])

    try:
        words = shlex.split(options, comments=False)
    except ValueError as err:
        raise bad(f"the `# ppdsl:` directive cannot be read: {err}") from None
    values: dict = {}
    params: list[str] = []
    i = 0
    while i < len(words):
        flag, _, inline = words[i].partition("=") if words[i].startswith("--") else (words[i], "", "")
        i += 1
        if flag == "--rendezvous":
            values["rendezvous"] = True
            continue
        if flag not in _INT_FLAGS and flag not in _TEXT_FLAGS and flag != "--param":
            raise bad(f"the `# ppdsl:` directive has an unknown option `{flag}`")
        if inline:
            value = inline
        elif i < len(words):
            value, i = words[i], i + 1
        else:
            raise bad(f"the `# ppdsl:` directive's `{flag}` needs a value")
        if flag == "--param":
            params.append(value)
        elif flag in _TEXT_FLAGS:
            values[_TEXT_FLAGS[flag]] = value
        else:
            high = DEFAULT_MAX_JOBS if flag == "--max-jobs" else MAX_SIZE
            if not re.fullmatch(r"[0-9]+", value):
                raise bad(f"the `# ppdsl:` directive's `{flag}` must be an integer from 1 to {high}, got `{value}`")
            if not 1 <= int(value) <= high and flag == "--max-jobs":
                # the file is anyone's (a cloned repository): it may lower what the server takes on, not raise it
                raise DiagnosticError([Diagnostic("E098", _MAX_JOBS_MESSAGE.format(value), help=_MAX_JOBS_HELP)])
            if not 1 <= int(value) <= high:
                raise bad(f"the `# ppdsl:` directive's `{flag}` must be an integer from 1 to {high}, got `{value}`")
            values[_INT_FLAGS[flag]] = int(value)
    missing = [f"`{flag}`" for flag, key in (("--pp", "pp"), ("-m", "microbatches")) if key not in values]
    if missing:
        raise bad(f"the `# ppdsl:` directive must give {' and '.join(missing)}")
    if params:
        values["params"] = tuple(params)
    return Sizes(**values, source="directive", given=frozenset(values))
