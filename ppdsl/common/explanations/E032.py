from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd
from ppdsl.common.explanations.shared_texts import GPIPE

USER_JOBS = """job loss : forward ops "pd_op.mean" after forward
job reductions : forward ops "pd_op.mean", "pd_op.sum" after forward
order {
    repeat microbatches { forward loss reductions }
    backward * microbatches
    optimizer
}
"""

EXPLANATION = Explanation(
    "Each op of the training program must belong to exactly one job type: the types of a region (built in, or "
    "declared with `job NAME : REGION ops ...`) split its ops by name pattern. Two types whose patterns match "
    "the same op, in the same region, make that op ambiguous: make the patterns disjoint, or drop a type.",
    cmd("ppdsl run example.sched --pp 2 -m 2 --steps 1", files=((SCHED, USER_JOBS),), paddle=True),
    cmd("ppdsl run example.sched --pp 2 -m 2 --steps 1", files=((SCHED, GPIPE + "\n"),), paddle=True),
)
