"""The include policy: which files an `include` may read, and how much a file and its includes may read in all.

A schedule from a pull request may include anything it names. So an include reads only a regular `.sched` file
(never a device such as `/dev/zero`, a FIFO, a directory, or a file of another kind, which is refused before a
byte of it is read and never quoted), each file once per resolution (17 files that each include the next six
times are 17 reads, not 6^16), and within named bounds: the depth of a chain of includes, the include statements
expanded, and the bytes included in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ppdsl.common.diagnostics import Diagnostic, Span
from ppdsl.common.files import record_input
from ppdsl.common.regular_files import NotRegular, TooLarge, kind, open_regular, read_capped

MAX_INCLUDE_DEPTH = 32  # files in one chain of includes (a includes b includes c ...)
MAX_INCLUDES = 1_000  # include statements expanded in one resolution, whatever the files
MAX_INCLUDE_BYTES = 16 * 1024 * 1024  # text included in one resolution, all files together
SCHED_SUFFIX = ".sched"


class IncludeRefused(Exception):
    """An include the policy refuses; `diagnostic` says why (E005, E066 or E067)."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@dataclass
class IncludeBudget:
    """What one resolution has included so far: statements expanded, bytes read, the files (by device and inode,
    so that two paths or a symlink to one file are one file)."""

    statements: int = 0
    bytes: int = 0
    files: set[tuple[int, int]] = field(default_factory=set)

    def admit(self, named: str, chain: tuple[str, ...], span: Span) -> None:
        """Count one more include statement, from a file `chain[-1]` that `chain` includes; refuse it past the
        bounds on statements and on the depth of the chain."""
        self.statements += 1
        if self.statements > MAX_INCLUDES:
            raise IncludeRefused(
                Diagnostic(
                    "E066",
                    f"too many includes: more than {MAX_INCLUDES:,} include statements in all",
                    span,
                    label=f"include {MAX_INCLUDES + 1:,}",
                    help="include each file once, from the file that needs it",
                )
            )
        if len(chain) >= MAX_INCLUDE_DEPTH:
            shown = [Path(f).name for f in chain]
            if len(shown) > 8:
                shown = [*shown[:3], f"... {len(shown) - 6} more ...", *shown[-3:]]
            raise IncludeRefused(
                Diagnostic(
                    "E066",
                    f"includes are nested too deeply: `{named}` would be file {len(chain) + 1} of one chain (at most "
                    f"{MAX_INCLUDE_DEPTH})",
                    span,
                    label="one include too deep",
                    help="include the common definitions from fewer levels",
                    notes=["the chain: " + " -> ".join(shown)],
                )
            )

    def read(self, target: Path, named: str, span: Span) -> str | None:
        """The text of `target`, or None if this resolution has read the file already. Only a regular `.sched`
        file is opened, without blocking (a FIFO swapped in after the check is refused, not waited on), and read
        up to what is left of the byte budget."""
        if target.suffix != SCHED_SUFFIX:
            raise IncludeRefused(_not_sched(named, span, f"it is not a `{SCHED_SUFFIX}` file"))
        try:
            f, info = open_regular(target)
        except NotRegular as err:
            raise IncludeRefused(_not_sched(named, span, f"it is {kind(err.mode)}, not a regular file")) from None
        except (OSError, ValueError) as err:
            raise IncludeRefused(
                Diagnostic(
                    "E005",
                    f"cannot include `{named}`: {getattr(err, 'strerror', None) or err}",
                    span,
                    help="paths are relative to the including file",
                )
            ) from None
        record_input(target)  # an output naming this file is refused (E050)
        with f:
            key = (info.st_dev, info.st_ino)
            if key in self.files:
                return None
            self.files.add(key)
            try:
                data = read_capped(f, MAX_INCLUDE_BYTES - self.bytes)
            except TooLarge:
                raise IncludeRefused(
                    Diagnostic(
                        "E066",
                        f"the includes are too large: more than {MAX_INCLUDE_BYTES // (1024 * 1024)} MiB of included "
                        f"text in all, `{named}` included",
                        span,
                        label="past the budget",
                        help="a schedule's includes are definitions, a few KiB: is this the file you meant?",
                    )
                ) from None
        self.bytes += len(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise IncludeRefused(
                Diagnostic("E005", f"cannot include `{named}`: not UTF-8 text", span, help="include a `.sched` file")
            ) from None


def _not_sched(named: str, span: Span, why: str) -> Diagnostic:
    return Diagnostic(
        "E067",
        f"cannot include `{named}`: {why}",
        span,
        label="not a schedule file",
        help=f"an include names a `{SCHED_SUFFIX}` file, relative to the including file",
    )
