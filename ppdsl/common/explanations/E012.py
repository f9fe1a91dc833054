from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "A parameter has one value for the whole run: its default, or the one given with `--param NAME=VALUE`. The "
    "default is a literal (`2`, `0.5`, `true`), whose type is the parameter's. A value computed from the sizes "
    "belongs in the order (`let`) or in a function (`fn`).",
    sched(
        """
        param warmup = pp - 1
        order {
            forward * warmup
            forward * (microbatches - warmup)
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        param extra = 0
        order {
            let warmup = pp - 1 + extra
            forward * warmup
            forward * (microbatches - warmup)
            backward * microbatches
            optimizer
        }
        """,
        "--pp 2 -m 4",
    ),
)
