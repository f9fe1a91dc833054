from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd

HEAD_AFTER = """job head : forward ops "pd_op.matmul" after forward
order {
    repeat microbatches { forward head }
    backward * microbatches
    optimizer
}
"""
LOSS_AFTER = HEAD_AFTER.replace('head : forward ops "pd_op.matmul"', 'loss : forward ops "pd_op.mean"').replace(
    "forward head", "forward loss"
)

EXPLANATION = Explanation(
    "A job type of your own takes the ops its `ops` patterns match out of its region; the ops left run in the "
    "region's built-in job. When a built-in job uses the result of an op your type took, and your type runs "
    "after it (`after forward`), that job would read a value not computed yet. The checker cannot see this: "
    "which op goes where is known only once the real program is split. Give your type ops whose results only "
    "later jobs read (the loss at the end of the forward, say), or the ops' users too.",
    cmd(
        "ppdsl run example.sched --pp 2 -m 2 --steps 1",
        files=((SCHED, HEAD_AFTER),),
        note="the forward's bias add reads the matmul that `head` runs later",
        paddle=True,
    ),
    cmd("ppdsl run example.sched --pp 2 -m 2 --steps 1", files=((SCHED, LOSS_AFTER),), paddle=True),
)
