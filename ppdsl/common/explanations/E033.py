from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "A stream rule's `stream` template names op attributes in braces (`send_stream_{ring_id}`); an op the rule "
    "matches must have each of them.",
    cmd(
        "ppdsl run example.sched --pp 2 -m 2 --steps 1",
        files=((SCHED, 'rule "pd_op.matmul" { stream = "stream_{ring_id}" }\n' + GPIPE + "\n"),),
        paddle=True,
    ),
    cmd(
        "ppdsl run example.sched --pp 2 -m 2 --steps 1",
        files=((SCHED, 'rule "pd_op.matmul" { stream = "compute_stream" }\n' + GPIPE + "\n"),),
        paddle=True,
    ),
)
