from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "An `offload` copies a (chunk, micro-batch)'s activations to host memory after its forward made them, on the "
    "rank's copy stream: before the forward there is nothing to copy, and after the backward nothing is left.",
    sched(
        """
        order { repeat microbatches { offload forward }  repeat microbatches { reload backward }  optimizer }
        """,
        "--pp 2 -m 2",
    ),
    sched(
        """
        order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
        """,
        "--pp 2 -m 2",
    ),
)
