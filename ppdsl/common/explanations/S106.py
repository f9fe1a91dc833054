from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A rank holds more in-flight activations than its `memory limit` (or `--memory-limit`): a forward allocates "
    "its activations and its backward frees them, so each forward run ahead of a backward adds to the peak.",
    sched(
        """
        memory limit = pp - rank
        order {
            forward * microbatches
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        memory limit = pp - rank

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
