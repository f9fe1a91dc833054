from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Each rank runs the optimizer once, as its last job: it applies the gradients every micro-batch accumulated.",
    sched(
        """
        order {
            forward * microbatches
            optimizer
            backward * microbatches
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            forward * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
