from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "An `include` names a file that cannot be read, or files include each other in a cycle. Included paths are "
    "relative to the including file.",
    sched(
        """
        include "common.sched"
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        include "common.sched"
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 4",
        [("common.sched", "cost forward = 2\n")],
    ),
)
