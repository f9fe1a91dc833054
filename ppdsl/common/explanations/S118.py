from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "After an `offload`, a (chunk, micro-batch)'s activations are on the host: its backward cannot run until a "
    "`reload` has brought them back, so every offloaded micro-batch has a reload before its backward.",
    sched(
        """
        order { repeat microbatches { forward offload }  backward * microbatches  optimizer }
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
