from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "With data-parallel replicas (`--dp` above 1) a schedule must reduce each chunk's gradients (`reduce_grads`, "
    "E092), and where those reductions start is what hides their time behind the backwards. `ppdsl synth --dp D` "
    "places them (each chunk's right after its last backward / backward_w, the orders searched with them timed), "
    "but the memory actions' engines time no collective yet, so with `--memory-actions` synth refuses a degree "
    "above 1 before it searches. Search with the reductions and no actions, or with the actions at dp 1 and place "
    "the `reduce_grads` in the written order yourself (after each chunk's last backward), then check it with "
    "`--dp`.",
    cmd("ppdsl synth --pp 4 -m 8 --dp 2 --memory-actions recompute --time-limit 1 -o found.sched"),
    cmd("ppdsl synth --pp 4 -m 8 --dp 2 --time-limit 1 -o found.sched"),
)
