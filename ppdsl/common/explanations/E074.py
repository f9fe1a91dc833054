from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A collective is a rendezvous: a member goes on from a `sync_shared` only when every rank whose order has it "
    "has joined it. A rank that joins it before a send its peer waits for blocks that peer, and the peer never "
    "joins: the ranks wait for each other through the collective, as in a deadlock of sends and receives (S105). "
    "The notes give the cycle, each rank's order up to where it is stuck and the rank x step grid. Join the "
    "collective after the jobs the other members wait for: after the rank's last send and receive of the step.",
    sched(
        """
        job send_backward : backward after backward sends
        order {
            forward * microbatches
            if rank == 1 {
                repeat microbatches - 1 { backward send_backward }
                backward
                sync_shared
                send_backward
            } else {
                repeat microbatches { backward send_backward }
                sync_shared
            }
            optimizer
        }
        """,
        "--pp 2 -m 2",
    ),
    sched(
        """
        job send_backward : backward after backward sends
        order {
            forward * microbatches
            repeat microbatches { backward send_backward }
            sync_shared
            optimizer
        }
        """,
        "--pp 2 -m 2",
    ),
)
