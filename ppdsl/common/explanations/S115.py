from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A `recompute` re-runs a (chunk, micro-batch)'s forward ops from the stage input its forward kept, so that "
    "the backward finds the activations: it runs after that forward and before that backward (or backward_b) "
    "on the rank. It need not wait for the gradient: placed before the backward, it fills the wait for it.",
    sched(
        """
        order { forward * microbatches  backward * microbatches  recompute * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
    sched(
        """
        order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 2",
    ),
)
