from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A `repeat` count, a `* N` count or a `for` range evaluates to a negative number, or to more iterations "
    "than any complete schedule needs at these sizes. A count that can go negative for some sizes needs "
    "`max(0, ...)` or a `require`.",
    sched(
        """
        order {
            forward * (pp - rank - 2)
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
            forward * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
