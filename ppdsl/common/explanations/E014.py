from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A function (`fn name(args) = expr`) is a formula: it may call other functions, but not itself, directly or "
    "through others, so that every call ends. One call may make at most 10,000 calls in all: a function that "
    "calls another twice doubles what it costs, and a chain of them grows past any use.",
    sched(
        """
        fn warmup(r) = if r == 0 then 0 else warmup(r - 1) + 1
        order {
            forward * (pp - 1 - warmup(rank))
            repeat microbatches - (pp - 1 - warmup(rank)) { forward backward }
            backward * (pp - 1 - warmup(rank))
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        fn warmup(r) = pp - 1 - r
        order {
            forward * warmup(rank)
            repeat microbatches - warmup(rank) { forward backward }
            backward * warmup(rank)
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
