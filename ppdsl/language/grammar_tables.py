"""The parser of `sched.lark`, built once per process from LALR tables shipped beside the grammar as JSON.

Lark's own `cache=True` keeps pickled tables in the shared temp directory and unpickles whatever file sits at
the expected name, without an ownership check: anyone who plants that file first runs code in every later
`ppdsl` process (issue 15). So nothing is read from or written to any cache here. Building the tables takes
~40 ms, a tenth of `ppdsl check`'s start-up; loading them from `sched.tables.json` (package data, as trusted
as this code, and JSON, which cannot run code) takes ~6 ms. The file is keyed by the grammar's hash, Lark's
version and the options: when any differs (the grammar was edited, Lark upgraded) the tables are built instead,
and `tests/language/test_grammar_tables.py` fails until `pytest --update-golden` rewrites the file.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import lark
from lark import Lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

GRAMMAR = "sched.lark"
TABLES = "sched.tables.json"
TABLES_PATH = Path(__file__).with_name(TABLES)

# The parser's options: one source for building the tables and for their key.
LARK_OPTIONS: dict[str, Any] = {"parser": "lalr", "propagate_positions": True, "maybe_placeholders": False}
# Options that name where the grammar came from, not what it parses (and are not JSON): left out of the file.
_LOCATION_OPTIONS = ("import_paths", "source_path")

# JSON has no tuples and only string keys; Lark's tables have both. They are written as these one-key objects.
_TUPLE, _PAIRS = "__tuple__", "__pairs__"


def _grammar_text() -> str:
    return resources.files(__package__).joinpath(GRAMMAR).read_text(encoding="utf-8")


def tables_key() -> str:
    """What the shipped tables must have been built from: the grammar's text, Lark's version and the options."""
    basis = json.dumps([_grammar_text(), lark.__version__, sorted(LARK_OPTIONS.items())])
    return hashlib.sha256(basis.encode("utf-8")).hexdigest()


def build_parser() -> Lark:
    """The parser built from the grammar, with no cache anywhere."""
    return Lark.open_from_package(__package__, GRAMMAR, ("",), **LARK_OPTIONS)


def _encode(value: Any) -> Any:
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {key: _encode(item) for key, item in value.items()}
        return {_PAIRS: [[_encode(key), _encode(item)] for key, item in value.items()]}
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"cannot write a {type(value).__name__} into the parse tables")


def _decode(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and _TUPLE in obj:
        return tuple(obj[_TUPLE])
    if len(obj) == 1 and _PAIRS in obj:
        return {key: item for key, item in obj[_PAIRS]}  # a tuple key was decoded to a tuple already
    return obj


def tables_text(parser: Lark) -> str:
    """The JSON text of `parser`'s tables (what `sched.tables.json` holds), keyed by `tables_key()`."""
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    data["options"] = {name: value for name, value in data["options"].items() if name not in _LOCATION_OPTIONS}
    body = {"key": tables_key(), "data": _encode(data), "memo": _encode(memo)}
    return json.dumps(body, separators=(",", ":"), sort_keys=True) + "\n"


def _shipped_parser() -> Lark | None:
    """The parser from the shipped tables, or None when they are missing or built from another grammar."""
    try:
        body = json.loads(TABLES_PATH.read_text(encoding="utf-8"), object_hook=_decode)
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("key") != tables_key():
        return None
    # Lark.load takes the same {"data", "memo"} dict its pickle cache holds; here it never saw a pickle.
    return Lark.load({"data": body["data"], "memo": body["memo"]})


@functools.lru_cache(maxsize=1)
def parser() -> Lark:
    """The `.sched` parser, made once per process: from the shipped tables when current, else built."""
    return _shipped_parser() or build_parser()
