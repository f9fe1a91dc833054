"""What compiled schedule code runs with: the helpers its Python calls (`_ceildiv`, `_checked`) and its bounds."""

from __future__ import annotations

BIG = 1 << 62  # no schedule counts past this; a value rebound in a loop that does is growing without end


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)


def checked(value):
    """A function's result: an integer past any count is a function growing without end (`x * x` nested)."""
    if value.__class__ is int and (value > BIG or value < -BIG):
        raise OverflowError(value)
    return value


def namespace() -> dict:
    """A fresh namespace for compiled code: the helpers it calls by name."""
    return {"_ceildiv": ceildiv, "_BIG": BIG, "_checked": checked}
