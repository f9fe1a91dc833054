from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A rank's order may take a number of evaluation steps (a statement, or a function call) proportional to "
    "the jobs the rank owns at these sizes: 16 per job plus 65,536. Far more than any schedule needs, it stops "
    "an order whose loops run away (loops inside loops multiply) in well under a second, at the loop that "
    "runs out.",
    sched(
        """
        order {
            for a in 0 .. 4000 {
                for b in 0 .. 4000 {
                    if a == 0 and b == 0 { forward * microbatches backward * microbatches }
                }
            }
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
