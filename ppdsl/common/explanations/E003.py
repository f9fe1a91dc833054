from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Something is defined twice in one file (a parameter, job type, cost, memory setting, placement, order, "
    "a table's rank row), or a built-in name is redefined (`pp`, `rank`, `forward`, ...). An including file "
    "may override what an included file defines; within one file, keep one definition.",
    sched(
        """
        cost forward = 1
        cost forward = 2
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        cost forward = 2
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 4",
    ),
)
