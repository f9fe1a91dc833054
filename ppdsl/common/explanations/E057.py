from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "A rule's `stream` is a template over the matched op's attributes: `send_stream_{ring_id}`. A field names "
    "an attribute (no `.x`, `[i]` or `!r`); its width and precision are at most 32 (`{ring_id:>4}`), and the "
    "name at most 128 characters; braces pair up, `{{` and `}}` are literal braces.",
    sched('rule "pd_op.send_v2" { stream = "send_{ring_id:>3000000000}" }\n' + GPIPE, "--pp 2 -m 2"),
    sched('rule "pd_op.send_v2" { stream = "send_{ring_id:>3}" }\n' + GPIPE, "--pp 2 -m 2"),
)
