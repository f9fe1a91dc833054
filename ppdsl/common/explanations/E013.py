from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A parameter has one value for the whole schedule, but `rank`, `chunk` and `stage` differ from job to job. "
    "What depends on the rank belongs in the order, which runs once per rank: `let warmup = pp - rank - 1`.",
    sched(
        """
        param warmup = pp - rank - 1
        order {
            forward * warmup
            repeat microbatches - warmup { forward backward }
            backward * warmup
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            let warmup = pp - rank - 1
            forward * warmup
            repeat microbatches - warmup { forward backward }
            backward * warmup
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
