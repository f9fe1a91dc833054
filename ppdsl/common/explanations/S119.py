from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Offloaded activations are held in host memory from the offload's copy until the reload's copy ends; "
    "`memory host limit` bounds what all ranks hold there together. The message names the offload whose copy "
    "takes the host over the limit, and when.",
    sched(
        """
        memory host limit = 2
        order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
        """,
        "--pp 2 -m 2",
    ),
    sched(
        """
        memory host limit = 4
        order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
        """,
        "--pp 2 -m 2",
    ),
)
