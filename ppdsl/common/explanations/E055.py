from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "A rule's `attr` changes how the ops it matches are run, never what they compute: it takes only the "
    "communication and scheduling attributes Paddle's own pipeline passes set (`use_calc_stream`, "
    "`dynamic_shape`, `force_record_event`, `event_to_record`). Any other attribute, a softmax's `axis` or "
    "gelu's `approximate`, would train another model than the one `check` proved; the stream and the "
    'priority are the rule\'s own `stream = "..."` and `priority = ...`.',
    sched('rule "pd_op.softmax" { attr axis = 1 }\n' + GPIPE, "--pp 2 -m 2"),
    sched('rule "pd_op.send_v2" { attr use_calc_stream = true }\n' + GPIPE, "--pp 2 -m 2"),
)
