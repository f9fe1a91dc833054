"""ScheduleDef -> a plan module: one readable Python file that `ppdsl compile` writes and the runtime imports.

The order body is the checked order of the IR, lowered by the order compiler's readable backend
(`language/readable_order.py`), the sibling of the checker's, so the plan's `job_list` and `ppdsl expand` cannot
drift apart; everything else (job types, placement, stream rules, requires)
is data or a one-line expression. The templates are `templates/*.py.jinja`; the filters they use are in
`FILTERS`, and emit code already in `ruff format` style (a line fits in 120 columns or its brackets are split one
item per line with a trailing comma), so the output does not depend on ruff being installed.
"""

from __future__ import annotations

import ast as pyast
import hashlib
import math
import os
import re
import shlex
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from ppdsl.analysis.expand import lone_reduction_types
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Span
from ppdsl.common.files import SCHEDULE_BYTES, InputError, read_input
from ppdsl.common.version import __version__
from ppdsl.language import types
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.pysource import LINE_LENGTH, py_path, py_str, py_text
from ppdsl.language.readable_order import readable_expr, readable_job_list, readable_name


class Code(str):
    """Python source to put into a literal as it is (a function name), not as a string."""


# ---------------------------------------------------------------------- filters: Python text in ruff format style


def py_literal(value: object, head: str = "", indent: int = 0, explode: int = 0, tail: int = 0) -> str:
    """`value` as ruff format writes it, after `head` on a line indented by `indent` columns.

    On one line if it fits (counting `tail` characters after it), else its brackets split one item per line with a
    trailing comma, recursively. `explode` splits the outermost levels even when they fit: the trailing comma is
    "magic" to ruff, which then keeps them split (a table of dicts reads better that way).
    """
    flat = _flat(value)
    splittable = isinstance(value, (list, tuple, dict)) and len(value) > 0
    if not splittable or (explode <= 0 and indent + len(head) + len(flat) + tail <= LINE_LENGTH):
        return flat
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        items = []
        for key, item in value.items():
            key_text = f"{_flat(key)}: "
            items.append(f"{pad}{key_text}{py_literal(item, key_text, indent + 4, explode - 1, 1)},")
        opening, closing = "{", "}"
    else:
        items = [f"{pad}{py_literal(item, '', indent + 4, explode - 1, 1)}," for item in value]
        opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
    return opening + "\n" + "\n".join(items) + "\n" + " " * indent + closing


def _flat(value: object) -> str:
    if isinstance(value, Code):
        return str(value)
    if isinstance(value, str):
        return py_str(value)
    if isinstance(value, (bool, int)) or value is None:
        return repr(value)
    if isinstance(value, float):
        return readable_expr(repr(value)) if math.isfinite(value) else f"float({py_str(repr(value))})"
    if isinstance(value, list):
        return "[" + ", ".join(map(_flat, value)) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_flat, value)) + (",)" if len(value) == 1 else ")")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flat(k)}: {_flat(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no Python literal for {value!r}")


def py_def(name: str, params: list[str], returns: str) -> str:
    """A `def` line, split as ruff format splits it when it is longer than a line."""
    one_line = f"def {name}({', '.join(params)}) -> {returns}:"
    if len(one_line) <= LINE_LENGTH:
        return one_line
    inner = "    " + ", ".join(params)
    if len(inner) <= LINE_LENGTH:
        return f"def {name}(\n{inner}\n) -> {returns}:"
    return f"def {name}(\n" + "".join(f"    {p},\n" for p in params) + f") -> {returns}:"


def py_call(function: str, args: list[str], indent: int = 4) -> str:
    """A call statement at `indent`, split as ruff format splits it when it is longer than a line."""
    pad = " " * indent
    one_line = f"{pad}{function}({', '.join(args)})"
    if len(one_line) <= LINE_LENGTH:
        return one_line
    inner = f"{pad}    {', '.join(args)}"
    if len(inner) <= LINE_LENGTH:
        return f"{pad}{function}(\n{inner}\n{pad})"
    return f"{pad}{function}(\n" + "".join(f"{pad}    {a},\n" for a in args) + f"{pad})"


def py_fstring(text: str, fields: str) -> str:
    """An f-string literal: `text` as it is (its braces escaped), then `fields`, a format string of the code's own."""
    return "f" + py_str(text.replace("{", "{{").replace("}", "}}") + fields)


def py_comment(text: str, indent: int = 0) -> str:
    """`# text`, wrapped to the line length (for prose: docstrings and declarations' explanations), every
    character that could end the comment or disguise the code escaped (`py_text`)."""
    width = LINE_LENGTH - indent - 2
    return "\n".join(" " * indent + "# " + line for line in textwrap.wrap(py_text(text), width))


FILTERS = {
    "pystr": py_str,
    "pyliteral": py_literal,
    "pydef": py_def,
    "pycall": py_call,
    "pyfstring": py_fstring,
    "pycomment": py_comment,
    "pytext": py_text,
    "docstring": lambda text: _docstring_text(text, wrap=False),
}


@lru_cache(maxsize=1)
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("ppdsl.codegen", "templates"),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=StrictUndefined,  # a misspelt context name is an error, not an empty string in the output
        autoescape=False,  # Python source, not HTML
    )
    env.filters.update(FILTERS)
    return env


# ---------------------------------------------------------------------- the module


def module_stem(name: str) -> str:
    """A schedule name as a module name: `Interleaved1F1B` -> `interleaved1f1b`, `ZB-H1` -> `zb_h1`."""
    return re.sub(r"[^0-9a-z_]", "_", name.lower()) or "schedule"


def generate_plan_module(defn: ScheduleDef, source_path: str | Path, *, literal: Scenario | None = None) -> str:
    """The plan module of `defn`, read from `source_path` (as the user named it: the module records it).

    With `literal`, `job_list` is the expanded order of that scenario's sizes and parameters as a literal (and
    refuses other sizes); their expansion errors are raised as `DiagnosticError`, as `ppdsl expand` raises them.
    """
    source = str(source_path)
    where = _Locations(defn.path, source)
    params = [_Param(p.name, p.default) for p in defn.params.values()]
    context = {
        "name": defn.name,
        "summary": _docstring_text(defn.summary),
        "command": _command(source, literal),
        "source": source,
        "sha256": _sha256(Path(source_path), defn.sources.get(defn.path, "")),
        "included": {where.path(f): _sha256(Path(f), text) for f, text in defn.sources.items() if f != defn.path},
        "version": __version__,
        "params": params,
        "params_dict": {p.name: p.default for p in params},
        "job_types": [jt.to_dict() for jt in defn.job_types],
        "placement": _placement(defn),
        "rules": _rules(defn, where),
        "requires": [
            {
                "data": {"where": where(r.span), "condition": r.source, "message": r.message},
                "python": readable_expr(r.condition.source),
            }
            for r in defn.requires
        ],
        "job_list": _job_list(defn, where, literal),
        "functions": _functions(defn, where),
    }
    sizes = ["pp: int", "vpp: int", "microbatches: int"]
    keywords = ["*", *(p.declaration for p in params)] if params else []
    stage_keywords = keywords
    if context["placement"]["uses_microbatches"]:  # a placement expression may read it: stage_of takes it then
        stage_keywords = ["*", "microbatches: int", *keywords[1:]]
    context["sig"] = {  # parameter lists of the generated functions
        "sizes": [*sizes, *keywords],
        "rank_sizes": ["rank: int", *sizes, *keywords],
        "stage_of": ["rank: int", "chunk: int", "pp: int", "vpp: int", *stage_keywords],
        "pass_params": "".join(f", {p.python}={p.python}" for p in params),
    }
    helpers = {"_check_sizes", *context["job_list"]["helpers"]}
    if any("_ceildiv(" in text for text in _expression_texts(context)):
        helpers.add("_ceildiv")
    context["helpers"] = helpers
    return _environment().get_template("plan.py.jinja").render(context)


@dataclass(frozen=True)
class _Param:
    name: str  # as the schedule spells it (PARAMS' keys)
    default: int | float | bool

    @property
    def python(self) -> str:
        return readable_name(self.name)

    @property
    def declaration(self) -> str:
        kind = "bool" if isinstance(self.default, bool) else "float" if isinstance(self.default, float) else "int"
        return f"{self.python}: {kind} = {_flat(self.default)}"


class _Locations:
    """`file:line` of a span as the plan shows it: the root file as the user named it, an included file relative to
    the root's folder (never an absolute path, so the output is the same on every machine)."""

    def __init__(self, root: str, shown_root: str):
        self.root, self.shown_root = root, shown_root
        self.root_dir = Path(root).resolve().parent

    def path(self, file: str) -> str:
        if file == self.root:
            return self.shown_root
        try:
            relative = os.path.relpath(Path(file).resolve(), self.root_dir)
        except ValueError:  # another drive
            return Path(file).name
        return (Path(self.shown_root).parent / relative).as_posix()

    def __call__(self, span: Span | None) -> str:
        """`file:line`, the file as `py_path` shows it: what the plan's comments, docstrings and messages carry."""
        if span is None:
            return py_path(self.shown_root)
        return f"{py_path(self.path(span.file))}:{span.line}"


def _sha256(path: Path, text: str) -> str:
    """Of the file's bytes, which is what a staleness check reads; of the text if the file is gone."""
    try:
        data = read_input(path, SCHEDULE_BYTES)
    except InputError:
        data = text.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def _docstring_text(text: str, wrap: bool = True) -> str:
    """`text` as the source of a docstring whose value is `text` again, wrapped to the line length: backslashes,
    quotes that could end it (two in a row, a last one) and characters that are not printable (`py_text`) escaped."""
    lines = textwrap.wrap(text, LINE_LENGTH - 4) if wrap else [text]
    return "\n".join(_docstring_line(line) for line in lines)


def _docstring_line(text: str) -> str:
    text = py_text(text.replace("\\", "\\\\"))  # backslashes first: py_text's escapes are meant as escapes
    return re.sub(r'"(?="|$)|(?<=")"', r'\\"', text)


def _command(source: str, sizes: Scenario | None) -> str:
    words = ["ppdsl", "compile", shlex.quote(source)]  # a command to paste into a shell
    if sizes is not None:
        words += ["--pp", str(sizes.pp), "-m", str(sizes.microbatches), "--vpp", str(sizes.vpp)]
        for key, value in (sizes.params or {}).items():
            words += ["--param", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
        words.append("--literal")
    return " ".join(words)


def _placement(defn: ScheduleDef) -> dict:
    out = {"kind": defn.placement_kind, "python": None, "uses_microbatches": False}
    if defn.placement_kind == "expr":
        python = readable_expr(defn.placement.source)
        names = {n.id for n in pyast.walk(pyast.parse(python, mode="eval")) if isinstance(n, pyast.Name)}
        out.update(python=python, uses_microbatches="microbatches" in names)
    return out


def _rules(defn: ScheduleDef, where: _Locations) -> list[dict]:
    """Each rule as data; a priority that is an expression of the sizes becomes a function `_priority_<i>`."""
    rules = []
    for i, (rule, priority) in enumerate(zip(defn.rules, defn.rule_priorities, strict=True)):
        value: object = None
        function = None
        if priority is not None:
            python = readable_expr(priority.source)
            try:
                value = int(pyast.literal_eval(python))
            except ValueError:
                function = {"name": f"_priority_{i}", "python": python, "where": where(rule.span)}
                value = Code(function["name"])
        rules.append(
            {
                "data": {
                    "pattern": rule.pattern,
                    "job": rule.job,
                    "stream": rule.stream,
                    "priority": value,
                    "attrs": dict(rule.attrs),
                },
                "function": function,
            }
        )
    return rules


def _job_list(defn: ScheduleDef, where: _Locations, sizes: Scenario | None) -> dict:
    if sizes is not None:
        exp = sizes.with_(schedule=defn).expansion()
        literal = {"pp": sizes.pp, "vpp": sizes.vpp, "microbatches": sizes.microbatches}
        literal.update({readable_name(k): v for k, v in exp.params.items()})
        return {
            "form": "literal",
            "sizes": literal,
            "sizes_expr": {key: Code(key) for key in literal},
            "orders": {r: exp.job_tuples(r) for r in range(exp.pp)},
            "helpers": ["_check_rank"],
        }
    if defn.tables:
        names = [jt.name for jt in defn.job_types]
        lone = lone_reduction_types(defn)  # one replica's plan: its reductions are no work (`job_list` is dp 1's)
        tables = []
        for i, table in enumerate(defn.tables, 1):
            tables.append(
                {
                    "name": f"_TABLE_{i}",
                    "where": where(table.span),
                    "when": None if table.when is None else readable_expr(table.when.source),
                    "rows": {
                        rank: [(names[t], c, mb) for t, c, mb, _ in row if t not in lone] for rank, row in table.rows
                    },
                }
            )
        return {
            "form": "table",
            "tables": tables,
            "where": where(defn.tables[0].span),
            "helpers": ["_check_rank", "_table_order"],
        }
    body, helpers = readable_job_list(defn, where)
    return {"form": "order", "body": body, "helpers": ["_check_rank", *sorted(helpers)]}


def _functions(defn: ScheduleDef, where: _Locations) -> list[dict]:
    """Each `fn` as a Python function: its arguments, then the sizes and parameters it reads, annotated with the
    types its calls give them."""
    sizes = {"pp": types.INT, "vpp": types.INT, "microbatches": types.INT}
    sizes.update({p.name: types.type_of(p.default) for p in defn.params.values()})
    out = []
    for fn in defn.functions:
        args = [*zip(fn.params, fn.param_types, strict=True), *((g, sizes[g]) for g in fn.globals)]
        out.append(
            {
                "name": readable_name(fn.name),
                "params": [f"{readable_name(name)}: {ty}" for name, ty in args],
                "returns": fn.result_type,
                "python": readable_expr(fn.source),
                "where": where(fn.span),
                "text": " ".join(fn.text.split()),
            }
        )
    return out


def _expression_texts(context: dict) -> list[str]:
    texts = [r["python"] for r in context["requires"]]
    texts += [fn["python"] for fn in context["functions"]]
    texts += [r["function"]["python"] for r in context["rules"] if r["function"]]
    texts += [t["when"] or "" for t in context["job_list"].get("tables", [])]
    return [*texts, context["placement"]["python"] or ""]


__all__ = ["FILTERS", "generate_plan_module", "module_stem", "py_def", "py_literal"]
