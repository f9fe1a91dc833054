"""docs/security.md states limits with their figures: each figure must be the constant it names, so the doc cannot
drift from the code (a limit changed in code fails here until the doc says the new figure)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from ppdsl.common.codes import lookup

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
UNITS = {"MiB": 2**20, "GiB": 2**30}
ROW = re.compile(r"^\| (?P<what>[^|]+?) \| (?P<value>[^|]+?) \| `(?P<constant>[\w.]+)` \| (?P<code>E\d{3}) \|$")


def _figure(text: str) -> float:
    """`16 MiB`, `1,000`, `1e15` as a number."""
    number, _, unit = text.replace(",", "").partition(" ")
    return float(number) * UNITS[unit] if unit else float(number)


def _limit_rows() -> list[re.Match]:
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index("## Limits")
    rows = [ROW.match(line) for line in lines[start:] if line.startswith("| ") and "`" in line]
    assert all(rows), "a row of the Limits table is not `| what | figure | `module.CONSTANT` | Ecode |`"
    return rows


def _constant(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_limit_in_the_doc_is_the_constant_in_code() -> None:
    rows = _limit_rows()
    assert len(rows) >= 10  # the table is there and was parsed
    wrong = [
        f"{m['what']}: the doc says {m['value']}, {m['constant']} is {_constant(m['constant'])}"
        for m in rows
        if _figure(m["value"]) != _constant(m["constant"])
    ]
    assert not wrong, "docs/security.md disagrees with the code:\n" + "\n".join(wrong)


def test_every_code_the_doc_names_is_registered() -> None:
    codes = set(re.findall(r"\bE\d{3}\b", DOC.read_text(encoding="utf-8")))
    assert codes and not [c for c in sorted(codes) if lookup(c) is None]
