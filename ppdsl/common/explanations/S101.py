from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Every rank runs, for each of its chunks and every micro-batch, a forward and a backward (whole, or "
    "`backward_b` + `backward_w`), and one of each auxiliary job type the schedule uses. Some are missing: "
    "usually a count that is too small for these sizes.",
    sched(
        """
        order {
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
