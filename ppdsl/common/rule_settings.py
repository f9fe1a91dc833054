"""What a `rule` may set on the ops it matches: where and when an op runs, never what it computes.

A rule's `attr` once set any attribute: `attr axis = 1` on a softmax trained another model after `check` passed,
`attr axis = true` crashed Paddle, a real number had no setter in Paddle 3.3.1. Now `attr` takes only the
communication and scheduling attributes Paddle's own pipeline passes set (`_pir_overlap_send_recv` in
`paddle/distributed/passes/pass_utils.py`, `_add_dependency` in `pipeline_pass_base.py`), each with the type
Paddle gives it; a stream template is bounded. `resolve` reports a breach at the rule (E055-E057) and the
runtime checks the same table again before it sets anything (a plan module can be edited by hand).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from ppdsl.common.diagnostics import Diagnostic, Span


@dataclass(frozen=True)
class RuleAttribute:
    kind: type  # bool, int or str: Paddle's set_bool_attr / set_int_attr / set_str_attr
    meaning: str


RULE_ATTRIBUTES: dict[str, RuleAttribute] = {
    "use_calc_stream": RuleAttribute(bool, "a communication op runs on the compute stream"),
    "dynamic_shape": RuleAttribute(bool, "send_v2 / recv_v2 send each tensor's shape first"),
    "force_record_event": RuleAttribute(bool, "the op records an event when it finishes"),
    "event_to_record": RuleAttribute(str, "the name of the event it records"),
}
# Set by the rule's own items, not by `attr`.
_ITEMS = {"execution_stream": 'stream = "..."', "scheduling_priority": "priority = ..."}

MAX_STREAM_NAME = 128  # characters of a stream name, once its template is filled in
MAX_FORMAT_WIDTH = 32  # width or precision of a field of a stream template: `{ring_id:>4}`
# Python's format spec: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_FORMAT_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<precision>\d+))?[bcdeEfFgGnosxX%]?")


_EXAMPLE = {bool: "true", int: "0", str: '"name"'}


def _kind_name(kind: type) -> str:
    return {bool: "`true` or `false`", int: "an integer", str: 'a string "..."'}[kind]


def _value_text(value: object) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'the string "{value}"'
    return f"the {'integer' if isinstance(value, int) else 'real number'} `{value}`"


def allowed_attributes_help() -> str:
    listed = ", ".join(f"`{name}` ({_kind_name(a.kind)})" for name, a in RULE_ATTRIBUTES.items())
    return f"`attr` sets only where and when an op runs, never what it computes: {listed}"


def attribute_problem(name: str, value: object, span: Span | None) -> Diagnostic | None:
    """Why a rule may not set `name = value` (E055: not such an attribute, E056: the wrong type), or None."""
    known = RULE_ATTRIBUTES.get(name)
    if known is None:
        if name in _ITEMS:
            return Diagnostic(
                "E055", f"`{name}` is set by the rule's `{_ITEMS[name]}`", span, help=f"write `{_ITEMS[name]}`"
            )
        return Diagnostic(
            "E055",
            f"a rule cannot set `{name}`: it is not a stream, scheduling or communication attribute",
            span,
            label="would change what the op computes, or is unknown to Paddle's passes",
            help=allowed_attributes_help(),
        )
    if type(value) is not known.kind:  # bool is an int to isinstance
        return Diagnostic(
            "E056",
            f"`{name}` takes {_kind_name(known.kind)}, not {_value_text(value)}",
            span,
            help=f"write `attr {name} = {_EXAMPLE[known.kind]}` ({known.meaning})",
        )
    return None


def stream_template_problem(template: str, span: Span | None) -> Diagnostic | None:
    """Why `template` is not a bounded stream template (E057), or None: fields name op attributes only
    (`{ring_id}`, no `.x`, `[i]` or `!r`), with a width and precision of at most MAX_FORMAT_WIDTH, and the name
    has at most MAX_STREAM_NAME characters besides the fields' values."""

    def problem(message: str, help: str) -> Diagnostic:
        return Diagnostic("E057", f"stream `{template}`: {message}", span, help=help)

    try:
        parts = list(string.Formatter().parse(template))
    except ValueError:
        return problem(
            "its braces do not pair up", "write `{attribute}` for an op attribute and `{{` / `}}` for a brace"
        )
    length = 0
    for text, field, spec, conversion in parts:
        length += len(text)
        if field is None:
            continue
        if not field.isidentifier() or conversion:
            return problem(
                f"`{{{field}{'!' + conversion if conversion else ''}}}` is not an op attribute's name",
                "a field names an attribute of the matched op: `send_stream_{ring_id}`",
            )
        shape = _FORMAT_SPEC.fullmatch(spec or "")
        if shape is None:
            return problem(f"`{{{field}:{spec}}}` has a format this template cannot use", "write `{name}`")
        for what in ("width", "precision"):
            size = shape.group(what)
            if size and int(size) > MAX_FORMAT_WIDTH:
                return problem(
                    f"the {what} of `{field}` is {size}, more than {MAX_FORMAT_WIDTH}",
                    f"a field is at most {MAX_FORMAT_WIDTH} characters wide",
                )
        length += int(shape.group("width") or 0)
    if length > MAX_STREAM_NAME:
        return problem(f"the name is {length} characters long, more than {MAX_STREAM_NAME}", "name it shorter")
    return None
