from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "`/` divides into a real number; counts, loop bounds, chunks, micro-batches, stages and priorities are "
    "integers. Use `//` (floor division) or `ceildiv(a, b)` where an integer is needed.",
    sched(
        """
        order {
            forward * (microbatches / 2)
            forward * (microbatches / 2)
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            forward * (microbatches // 2)
            forward * (microbatches - microbatches // 2)
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
