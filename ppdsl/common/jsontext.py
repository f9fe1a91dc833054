"""JSON text from outside (cost files, profiles) parsed with bounds, so that no input can raise past the reader.

`json.loads` recurses once per nesting level (10,000 `[` give `RecursionError`), turns integer literals of more
than 4,300 digits into `ValueError` through Python's int-string limit, and accepts `NaN` / `Infinity`, which
are not JSON. `parse_json` refuses each with a message in the reader's words (`JsonError`), and the readers
check every value they use on top of it.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

MAX_DEPTH = 64  # far more than any file ppdsl reads (a cost file nests 3 deep, a Chrome trace 4)

# a JSON string (escapes included), removed before the brackets are counted: a `[` inside a string does not nest
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_LONG_INTEGER = 300  # digits: past this an integer literal is read as a float (then `inf`, which readers refuse)


class JsonError(ValueError):
    """Text that is not JSON ppdsl reads: the message says where and why, without Python's words."""


def nesting_depth(text: str) -> int:
    """The deepest nesting of `[` / `{` outside strings (a cheap pre-scan: no recursion, one pass of regexes)."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(1 if b in "[{" else -1 for b in brackets), default=0)


def _constant(name: str) -> Any:
    raise JsonError(f"`{name}` is not a JSON number (write a finite number)")


def _integer(digits: str) -> int | float:
    return float(digits) if len(digits) > _LONG_INTEGER else int(digits)


def parse_json(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of `text`; raises JsonError (not JSON, nested deeper than `max_depth`, `NaN` / `Infinity`)."""
    depth = nesting_depth(text)
    if depth > max_depth:
        raise JsonError(f"nested {depth} levels deep, more than the {max_depth} a file ppdsl reads may have")
    try:
        return json.loads(text, parse_constant=_constant, parse_int=_integer)
    except json.JSONDecodeError as e:
        raise JsonError(f"{e.msg[:1].lower()}{e.msg[1:]} at line {e.lineno}, column {e.colno}") from None
    except RecursionError:  # (the pre-scan bounds the depth; a smaller stack than usual would still land here)
        raise JsonError("nested too deeply") from None
