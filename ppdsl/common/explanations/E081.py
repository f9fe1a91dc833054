from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "`memory <subject> <setting> = ...` names a memory setting: `memory host limit` (the host memory all "
    "ranks' offloads may hold together), `memory recompute fraction` and `memory offload fraction` (the part "
    "of a micro-batch's activations each recompute rebuilds or each offload moves). Nothing else is one.",
    sched(
        """
        memory reload fraction = 0.5
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
    sched(
        """
        memory offload fraction = 0.5
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
)
