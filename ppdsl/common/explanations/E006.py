from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A schedule says which jobs each rank runs, in an `order { ... }` body (run once per rank) or in `table`s "
    "(literal rows, one per rank). This file has neither, so there is nothing to check or run.",
    sched(
        """
        schedule "Mine"
        cost forward = 1
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        schedule "Mine"
        cost forward = 1
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 4",
    ),
)
