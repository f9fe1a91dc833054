from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A job runs once per rank, chunk and micro-batch. Here one runs twice (an explicit `mb = K` does not move "
    "the job type's counter, so the next plain job takes the same micro-batch again), or a micro-batch has both "
    "a whole backward and a split one.",
    sched(
        """
        order {
            forward(mb = 0)
            forward * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            forward(mb = 0)
            for i in 1 .. microbatches { forward(mb = i) }
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
