"""Wording shared by messages: counts with correct plurals, and sets of numbers as ranges (`ranks 0-3, 6`)."""

from __future__ import annotations

from collections.abc import Iterable


def plural(noun: str) -> str:
    """`jobs`, `micro-batches`."""
    return noun + ("es" if noun.endswith(("ch", "sh", "s", "x", "z")) else "s")


def count(n: int | float, noun: str, plural_form: str | None = None) -> str:
    """`1 job`, `3 jobs`, `1 activation`, `2.5 activations`, `8 micro-batches`."""
    shown = f"{n:g}" if isinstance(n, float) else f"{n:,}" if abs(n) >= 10_000 else str(n)
    return f"{shown} {noun if n == 1 else plural_form or plural(noun)}"


def ranges(numbers: Iterable[int], limit: int = 8) -> str:
    """`0-3, 6, 8-9`: sorted, runs of consecutive numbers joined; past `limit` runs, `and N more`."""
    values = sorted(set(numbers))
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    more = sum(b - a + 1 for a, b in runs[limit:])
    return ", ".join(shown) + (f" and {more} more" if more else "")


def numbered(noun: str, numbers: Iterable[int], plural_form: str | None = None) -> str:
    """`rank 2`, `ranks 0-3`, `micro-batches 0-7`."""
    values = sorted(set(numbers))
    return f"{noun if len(values) == 1 else plural_form or plural(noun)} {ranges(values)}"
