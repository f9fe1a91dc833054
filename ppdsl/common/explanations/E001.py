from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "The text does not follow the grammar (`ppdsl/language/sched.lark`). The caret marks the first token that "
    "cannot continue what comes before it, and the label lists what could. After an error the parser skips to "
    "the next statement or top-level item, so each mistake is reported once. An unclosed `{` is reported at "
    "the brace that is open.",
    sched(
        """
        require microbatches >= pp "needs a micro-batch per stage"
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 4",
    ),
    sched(
        """
        require microbatches >= pp : "needs a micro-batch per stage"
        order { forward * microbatches  backward * microbatches  optimizer }
        """,
        "--pp 2 -m 4",
    ),
)
