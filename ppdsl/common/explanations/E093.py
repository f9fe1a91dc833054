from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A collective runs once a step: a chunk's `reduce_grads` reduces all of that chunk's gradients, a "
    "`sync_shared` those of the shared parameters. A second one is a second rendezvous every member would have to "
    "join, and it reduces gradients already reduced. Keep one, after the last job whose gradients it reduces.",
    sched(
        """
        order {
            forward * microbatches
            backward * microbatches
            reduce_grads
            reduce_grads
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
