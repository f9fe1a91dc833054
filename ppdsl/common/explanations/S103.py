from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Within a rank, a backward needs its own forward's activations, a weight gradient (`backward_w`) comes after "
    "its input gradient (`backward_b`), and an auxiliary job keeps its declared `before` / `after` side of the "
    "job it serves. A rank that would wait for a job it runs later itself is reported here too.",
    sched(
        """
        order {
            backward(mb = 0)
            forward * microbatches
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
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
