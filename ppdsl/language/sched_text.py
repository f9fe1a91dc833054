"""User text written into `.sched` source (by `ppdsl import`, `ppdsl synth`): the language has no escapes, so
a STRING cannot hold `"` or a line break and a docstring ends at the first `\"\"\"`. What cannot be written is
replaced, so the text never ends its literal and never becomes items of the file."""

from __future__ import annotations

from ppdsl.language.pysource import py_text


def sched_string(text: str) -> str:
    """`text` as a `.sched` STRING literal (`"..."`): `"` becomes `'`, characters that are not printable (a
    line break, a NUL, a bidi override) are written as Python escapes (`\\n`)."""
    return '"' + py_text(text).replace('"', "'") + '"'


def sched_docstring_text(text: str) -> str:
    """`text` on a line of a `.sched` docstring: each `"` written `\\"` (so no two quotes meet and a last one
    cannot join the closing quotes), characters that are not printable as Python escapes."""
    return py_text(text).replace('"', '\\"')
