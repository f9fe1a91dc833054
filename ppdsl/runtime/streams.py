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


def _set_attr(op, name: str, value) -> None:
    if isinstance(value, bool):
        op.set_bool_attr(name, value)
    elif isinstance(value, int):
        op.set_int_attr(name, value)
    elif isinstance(value, float):
        op.set_float_attr(name, value)
    else:
        op.set_str_attr(name, str(value))


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
    return template.format(**{f: attrs[f] for f in fields})


def apply_rules(programs: Iterable[tuple[str, object]], rules: Sequence[dict]) -> int:
    """Apply `rules` to every op of each (job type, program); returns how many ops were touched."""
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
