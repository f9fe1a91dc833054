from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A memory action's fraction (`memory recompute fraction = 0.5`) is the part of a (chunk, micro-batch)'s "
    "activations it handles: a literal number above 0 and at most 1, the same for every such job of the "
    "schedule (the runtime builds one partial program for it). Which micro-batches are recomputed or "
    "offloaded at all is the order's choice.",
    sched(
        """
        memory recompute fraction = 1.5
        order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
    sched(
        """
        memory recompute fraction = 0.5
        order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
)
