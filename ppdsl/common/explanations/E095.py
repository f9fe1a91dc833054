from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

TIED_1F1B = (
    "tied.sched",
    """schedule "1F1B-tied"

order {
    let warmup = pp - rank
    repeat warmup { forward }
    repeat microbatches - warmup { backward forward }
    repeat warmup { backward }
    sync_shared
    optimizer
}
""",
)

EXPLANATION = Explanation(
    "A parameter several stages use (a tied embedding and LM head: `--model gpt_tied`, or a head that multiplies "
    "with the embedding's weight in a `ctx.pipeline` stack) gets a copy on each stage, and each stage's backward "
    "computes only its part of the gradient. The schedule's `sync_shared` job sums the parts among the ranks "
    "holding a copy, so every copy takes the same update. It is a collective every holder must join: a holder "
    "whose order has no `sync_shared` would train a copy on part of its gradient, or leave the others waiting, "
    "so the run is refused. Add `sync_shared` to the order of every rank holding the parameter, after its last "
    "backward and before `optimizer`.",
    cmd(
        "ppdsl run 1f1b --pp 2 -m 4 --batch-size 8 --steps 1 --model gpt_tied --nproc-per-node 2",
        note="1F1B's order has no `sync_shared`: the first and the last stage share the token embedding",
        paddle=True,
    ),
    cmd(
        "ppdsl run tied.sched --pp 2 -m 4 --batch-size 8 --steps 1 --model gpt_tied --nproc-per-node 2",
        files=(TIED_1F1B,),
        paddle=True,
    ),
)
