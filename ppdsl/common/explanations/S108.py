from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Each rank holds chunks 0 .. vpp - 1. A job on another chunk does not exist at these sizes: the chunk "
    "expression, or the `chunk` loop, goes past `vpp`.",
    sched(
        """
        order {
            for chunk in 0 .. 2 { forward * microbatches }
            for c in 0 .. 2 { backward(chunk = 1 - c) * microbatches }
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            for chunk in 0 .. vpp { forward * microbatches }
            for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches }
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
