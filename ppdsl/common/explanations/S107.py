from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Micro-batches are numbered 0 .. microbatches - 1. A job with another number (an explicit `mb = K`, or a "
    "counter run past the end) does not exist at these sizes.",
    sched(
        """
        order {
            forward * microbatches
            backward(mb = microbatches)
            backward * (microbatches - 1)
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            forward * microbatches
            backward(mb = microbatches - 1)
            backward * (microbatches - 1)
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
