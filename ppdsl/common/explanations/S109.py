from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "`placement stage = EXPR` must give every (rank, chunk) its own global stage, covering 0 .. pp * vpp - 1 "
    "exactly once.",
    sched(
        """
        placement stage = rank
        order {
            for chunk in 0 .. vpp { forward * microbatches }
            for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches }
            optimizer
        }
        """,
        "--pp 2 -m 4 --vpp 2",
    ),
    sched(
        """
        placement stage = rank * vpp + chunk
        order {
            for chunk in 0 .. vpp { forward * microbatches }
            for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches }
            optimizer
        }
        """,
        "--pp 2 -m 4 --vpp 2",
    ),
)
