"""The language's three types, `int`, `float` and `bool`: their names in messages, and values written as text.

One table for the compiler (`lowering`), the command line's `--param` values (`ppdsl.analysis.expand`) and the
code generator. A parameter's type is its default's; every expression has a type known before it runs, so a
condition is never counted and a number is never tested for truth.
"""

from __future__ import annotations

import math
import re

from ppdsl.common.text import show  # noqa: F401  (the language's spelling of a value; defined below the language)

INT, FLOAT, BOOL = "int", "float", "bool"
NUMBER = "number"  # what an expectation means by "int or float"
ANY = "any"  # a function parameter its body only passes on: it takes what the call gives

_DESCRIPTIONS = {
    INT: "an integer (`int`)",
    FLOAT: "a real number (`float`)",
    BOOL: "a condition (`bool`)",
    NUMBER: "a number",
    ANY: "a value",
}
_INT_TEXT = re.compile(r"[+-]?\d+")
_FLOAT_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def type_of(value: object) -> str:
    """The type of a Python value as the language sees it (a bool is not an int here)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, float):
        return FLOAT
    return INT


def describe(ty: str) -> str:
    """`an integer (`int`)`: a type as messages name it."""
    return _DESCRIPTIONS[ty]


def accepts(expected: str, actual: str) -> bool:
    """A value of type `actual` may stand where `expected` is needed (an int is a number, and a float one)."""
    if expected == actual or expected == ANY:
        return True
    if expected == NUMBER:
        return actual in (INT, FLOAT)
    return expected == FLOAT and actual == INT


def convert(value: object, ty: str) -> int | float | bool:
    """`value` (a Python value, or text as written on the command line) as a value of type `ty`; ValueError if
    it is not one. An integer is accepted where a real number is expected."""
    if isinstance(value, str):
        return _parse(value.strip(), ty)
    actual = type_of(value)
    if not accepts(ty, actual) or (actual == FLOAT and not math.isfinite(value)):
        raise ValueError(value)
    return float(value) if ty == FLOAT else value


def _parse(text: str, ty: str) -> int | float | bool:
    if ty == BOOL:
        if text in ("true", "false"):
            return text == "true"
    elif ty == INT:
        if _INT_TEXT.fullmatch(text) and len(text) <= 1000:  # int() refuses over 4300 digits
            return int(text)
    elif _FLOAT_TEXT.fullmatch(text) and math.isfinite(float(text)):
        return float(text)
    raise ValueError(text)
