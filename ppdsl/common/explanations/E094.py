from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A collective reduces gradients, so it runs after the last job that computes them: a chunk's `reduce_grads` "
    "after that chunk's last backward (or backward_w, with a split backward), a `sync_shared` after the rank's "
    "last one. Earlier, it would reduce gradients that are still being added to. The message names the last "
    "gradient job and the step it runs at: move the collective after it.",
    sched(
        """
        order {
            forward * microbatches
            backward * (microbatches - 1)
            reduce_grads
            backward
            optimizer
        }
        """,
        "--pp 2 -m 4 --dp 2",
    ),
    sched(
        """
        order {
            forward * microbatches
            backward * microbatches
            reduce_grads
            optimizer
        }
        """,
        "--pp 2 -m 4 --dp 2",
    ),
)
