from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A `cost` or `comm` declaration must give every job (each rank and chunk) a time from 0 to 1e15: a "
    "negative, infinite or undefined (NaN) cost makes the makespan and the bubble meaningless. A `memory` "
    "declaration, the `memory limit` and the host limit must be finite and not negative: the verb "
    "(`allocates`, `frees`, `keeps`, `moves`) says which way memory goes, the number how much. Zero is a time: "
    "a job that takes none (the optimizer's default), no latency, or no bandwidth term. The message names the "
    "rank where it goes wrong.",
    sched(
        """
        cost forward = 1 - rank
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 3 -m 2",
    ),
    sched(
        """
        cost forward = 1 + rank
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 3 -m 2",
    ),
)
