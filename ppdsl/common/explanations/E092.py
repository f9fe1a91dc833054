from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "With data-parallel replicas (`--dp` above 1) each replica of a rank computes the gradients of its own "
    "micro-batches, and the replicas must add them up before the optimizer, or each steps to different "
    "parameters. A chunk's `reduce_grads` does it: the all-reduce of that chunk's gradients over the rank's "
    "replicas, once a step, after the chunk's last backward / backward_w. ppdsl adds none itself: the order says "
    "where it runs (right after the chunk's last backward, it overlaps the other chunks' backwards on the "
    "collective stream). The message is located at the chunk's last gradient job, where the reduction can start.",
    sched(
        """
        order {
            forward * microbatches
            backward * microbatches
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
