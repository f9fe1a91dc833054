from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Every value is an integer (`int`), a real number (`float`) or a condition (`bool`), known before the "
    "schedule runs. Conditions (`if`, `require`, `when`, `and`, `or`, `not`) take a condition; counts, loop "
    "bounds, chunks and micro-batches take an integer; costs and memory take a number. A number is not a "
    "condition: compare it (`pp > 1`); a condition is not a number: choose one (`if c then 1 else 0`). The two "
    "branches of `if ... then ... else` have one type, and a `let` keeps the type of the name it rebinds.",
    sched(
        """
        require pp : "needs more than one stage"
        order {
            forward * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        require pp > 1 : "needs more than one stage"
        order {
            forward * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
