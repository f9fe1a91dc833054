from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A `memory` declaration says what a job of its type does to memory, with the verb of that type: a compute "
    "job `allocates` or `frees` (`memory forward allocates 2`); a recompute says what its forward `keeps` "
    "for it (the stage input: `memory recompute keeps 0.1`), an offload what it `moves` to the host "
    "(`memory offload moves 0.5`). A reload brings back what its offload moved, so it has no declaration.",
    sched(
        """
        memory recompute allocates 1
        order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
    sched(
        """
        memory recompute keeps 0.1
        order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
)
