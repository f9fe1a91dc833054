"""The readable form of compiled code, for a plan module: user names as written where Python allows them
(`readable_name`), expressions with only the parentheses a person writes (`readable_expr`), and the names a plan
module keeps for itself (`PLAN_NAMES`), which no user name may take.
"""

from __future__ import annotations

import ast as pyast
import builtins
import keyword
import re

# What a generated plan module defines or uses itself (`ppdsl/codegen/templates/`): no user name may take these.
PLAN_NAMES = frozenset(
    "SCHEDULE SOURCE SOURCE_SHA256 INCLUDED_SHA256 PPDSL_VERSION PARAMS JOB_TYPES PLACEMENT STREAM_RULES REQUIRES "
    "TYPE_CHECKING annotations paddle stage_of stream_rules check_requires job_list build_plan main_program "
    "startup_program params jobs next_mb holds broken req ok sizes rules rule priority".split()
)
_RESERVED = PLAN_NAMES | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
_EXPONENT = re.compile(r"(\d)e\+(\d)")
# The commonest expressions, a value or `(a op b)` of two values (a user's name or a small integer): what
# `readable_expr` makes of them is known without Python's parser, which was a third of a long `compile`.
_ATOM = r"[vu]_[A-Za-z0-9_]+|0|[1-9][0-9]{0,17}"
_SIMPLE_EXPR = re.compile(rf"({_ATOM})|\(({_ATOM}) (\+|-|\*|//|%|==|!=|<=|>=|<|>) ({_ATOM})\)")


def readable_name(name: str) -> str:
    """The Python name of user name `name` in readable code: `name` itself where that is safe, else `name_`.

    Unsafe: a Python keyword or builtin, a name the plan module uses, or one starting or ending with `_`. The
    result ends in `_` exactly when `name` is unsafe or already ends in `_`, so two user names never meet.
    """
    unsafe = name in _RESERVED or name.startswith("_") or name.endswith("_")
    return f"{name}_" if unsafe else name


def readable_expr(src: str) -> str:
    """An expression from `ExprCompiler` as a person writes it: user names unmangled, only the needed parentheses."""
    simple = _SIMPLE_EXPR.fullmatch(src)
    if simple is not None:
        alone, left, op, right = simple.groups()
        if alone is not None:
            return _readable_atom(alone)
        return f"{_readable_atom(left)} {op} {_readable_atom(right)}"
    return _readable_by_python(src)


def _readable_by_python(src: str) -> str:
    """`readable_expr` of any expression: Python's parser, the names renamed, Python's unparser."""
    tree = pyast.parse(src, mode="eval")
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Name) and node.id.startswith(("v_", "u_")):  # a user's value or function
            node.id = readable_name(node.id[2:])
    return _EXPONENT.sub(r"\1e\2", pyast.unparse(tree))  # `1e+20` as ruff format writes it, `1e20`


def _readable_atom(atom: str) -> str:
    return readable_name(atom[2:]) if atom[0] in "vu" else atom
