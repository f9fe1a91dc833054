from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A schedule written as `table`s has rows for the sizes its tables are for: the first table whose `when` "
    "holds is used, and it needs a row for every rank. None fits the sizes given.",
    sched(
        """
        table {
            rank 0: F0 F1 B0 B1 optimizer
            rank 1: F0 B0 F1 B1 optimizer
        }
        """,
        "--pp 4 -m 2",
    ),
    sched(
        """
        table {
            rank 0: F0 F1 B0 B1 optimizer
            rank 1: F0 B0 F1 B1 optimizer
        }
        """,
        "--pp 2 -m 2",
    ),
)
