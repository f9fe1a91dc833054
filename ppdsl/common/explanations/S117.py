from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A `reload` copies back what its (chunk, micro-batch)'s `offload` moved to the host, for the backward: it "
    "runs after that offload and before that backward (early enough, the copy hides behind compute).",
    sched(
        """
        order { forward * microbatches  repeat microbatches { reload backward }  optimizer }
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
