from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A stage without layers still receives every micro-batch and sends it on, so it costs a rank and a hop and "
    "does nothing; in Megatron-LM such layouts have deadlocked (Megatron-LM #1852). It is refused unless the "
    "partition says it is meant: `partition = [...] allow empty` in the file.",
    sched(
        """
        partition = [5, 0, 5, 4]
        order { forward * microbatches backward * microbatches optimizer }
        """,
        "--pp 4 -m 8",
    ),
    sched(
        """
        partition = [5, 0, 5, 4] allow empty
        order { forward * microbatches backward * microbatches optimizer }
        """,
        "--pp 4 -m 8",
    ),
)
