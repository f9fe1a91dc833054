from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Evaluating an expression at these sizes divides by zero, or makes a number too large to use.",
    sched(
        """
        order {
            let per_rank = microbatches // (rank - 1)
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
            let per_rank = microbatches // max(1, rank - 1)
            forward * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
