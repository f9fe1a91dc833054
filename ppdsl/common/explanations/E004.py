from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A job or a function is given arguments it does not take, or the wrong number of them: a job takes "
    "`chunk = <int>` and `mb = <int>`; `min` and `max` take two or more numbers, `abs` one, `ceildiv` two "
    "integers. A job type that `receives` or `sends` for another must say which with `before` / `after`.",
    sched(
        """
        order {
            forward(chunk = 0, stage = 0) * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            forward(chunk = 0) * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
