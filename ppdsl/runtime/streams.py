"""Apply a schedule's stream / priority / attribute rules to the ops of its job programs.

Generalises Paddle's `_pir_overlap_send_recv`, which hard-codes `send_stream_{ring_id}` /
`recv_stream_{ring_id}` for `pd_op.send_v2` / `pd_op.recv_v2`: here any op-name pattern, any stream template
over the op's attributes, any priority and attributes, optionally only in one job type.
"""

from __future__ import annotations

import fnmatch
import string
from collections.abc import Iterable, Sequence

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.rule_settings import (
    MAX_STREAM_NAME,
    RULE_ATTRIBUTES,
    attribute_problem,
    stream_template_problem,
)

# Paddle 3.3.1's setters, by the type RULE_ATTRIBUTES gives an attribute (there is no set_float_attr).
_SETTERS = {bool: "set_bool_attr", int: "set_int_attr", str: "set_str_attr"}


def check_rule(rule: dict) -> None:
    """`resolve` checked a schedule's rules; a plan module's STREAM_RULES may be edited by hand, and a wrong
    type reaches Paddle as a crash (`attr axis = true` on a softmax: a segfault), so check them again here."""
    problems = [p for name, value in (rule.get("attrs") or {}).items() if (p := attribute_problem(name, value, None))]
    if rule.get("stream") and (problem := stream_template_problem(rule["stream"], None)):
        problems.append(problem)
    if problems:
        raise DiagnosticError(problems)


def _set_attr(op, name: str, value: bool | int | str) -> None:
    getattr(op, _SETTERS[RULE_ATTRIBUTES[name].kind])(name, value)


def stream_name(template: str, op) -> str:
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    attrs = op.attrs() if fields else {}
    missing = [f for f in fields if f not in attrs]
    if missing:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E033",
                    f"stream `{template}` names attribute `{missing[0]}`, which `{op.name()}` does not have",
                    help="use attributes the matched ops have, e.g. `{ring_id}` for send_v2 / recv_v2",
                )
            ]
        )
    try:
        name = template.format(**{f: attrs[f] for f in fields})
    except (ValueError, TypeError):  # a format the value does not take: `{ring_id:s}` of an integer
        raise DiagnosticError(
            [
                Diagnostic(
                    "E057",
                    f"stream `{template}` cannot be filled in with the attributes of `{op.name()}`",
                    help="a field's format does not fit the attribute's value: write the field as `{name}`",
                )
            ]
        ) from None
    if len(name) > MAX_STREAM_NAME:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E057",
                    f"stream `{template}` of `{op.name()}` is {len(name)} characters long, more than {MAX_STREAM_NAME}",
                    help="name op attributes with short values in the template",
                )
            ]
        )
    return name


def apply_rules(programs: Iterable[tuple[str, object]], rules: Sequence[dict]) -> int:
    """Apply `rules` to every op of each (job type, program); returns how many ops were touched."""
    for rule in rules:
        check_rule(rule)
    touched = 0
    for job_type, program in programs:
        for op in program.global_block().ops:
            for rule in rules:
                if rule.get("job") not in (None, job_type):
                    continue
                if not fnmatch.fnmatchcase(op.name(), rule["pattern"]):
                    continue
                for name, value in (rule.get("attrs") or {}).items():
                    _set_attr(op, name, value)
                if rule.get("stream"):
                    op.set_execution_stream(stream_name(rule["stream"], op))
                if rule.get("priority") is not None:
                    op.set_scheduling_priority(int(rule["priority"]))
                touched += 1
    return touched
