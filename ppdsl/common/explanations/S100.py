from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A `require` states the sizes a schedule is written for; it is false for the sizes given, so the schedule is "
    "not defined there. The message is the schedule's own.",
    sched(
        """
        require microbatches >= pp : "needs at least as many micro-batches as stages"

        order {
            let warmup = min(pp - rank - 1, microbatches)
            forward * warmup
            repeat microbatches - warmup { forward backward }
            backward * warmup
            optimizer
        }
        """,
        "--pp 4 -m 2",
    ),
    sched(
        """
        require microbatches >= pp : "needs at least as many micro-batches as stages"

        order {
            let warmup = min(pp - rank - 1, microbatches)
            forward * warmup
            repeat microbatches - warmup { forward backward }
            backward * warmup
            optimizer
        }
        """,
        "--pp 4 -m 4",
    ),
)
