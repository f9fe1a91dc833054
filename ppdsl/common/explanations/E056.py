from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched
from ppdsl.common.explanations.shared_texts import GPIPE

EXPLANATION = Explanation(
    "Each attribute a rule may set has the type Paddle gives it: `use_calc_stream`, `dynamic_shape` and "
    "`force_record_event` are `true` or `false`, `event_to_record` a string. Paddle has no setter for a real "
    "number, and a value of another type than the op's crashes it.",
    sched('rule "pd_op.send_v2" { attr use_calc_stream = 1 }\n' + GPIPE, "--pp 2 -m 2"),
    sched('rule "pd_op.send_v2" { attr use_calc_stream = true }\n' + GPIPE, "--pp 2 -m 2"),
)
