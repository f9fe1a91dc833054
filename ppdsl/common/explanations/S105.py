from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Run together, the ranks wait for each other in a cycle: each waits to receive an activation or gradient "
    "that the next one sends only later. The notes give the cycle and the rank x step grid with the job each "
    "rank is stuck at. With `--rendezvous` a send also waits for its receive.",
    sched(
        """
        order {
            if rank == 0 {
                repeat microbatches { forward backward }
            } else {
                forward * microbatches
                backward * microbatches
            }
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        order {
            let warmup = min(pp - rank - 1, microbatches)
            forward * warmup
            repeat microbatches - warmup { forward backward }
            backward * warmup
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
