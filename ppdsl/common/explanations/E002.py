from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A name, job type, region, function or setting is not defined where it is used. Sizes (`pp`, `vpp`, "
    "`microbatches`) and parameters are visible everywhere; `rank` in an order, a memory limit and per-job "
    "costs; `chunk` and `stage` in per-job costs and memory; `let` and `for` names after they are bound.",
    sched(
        """
        order {
            repeat micro_batches { forward }
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            repeat microbatches { forward }
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
