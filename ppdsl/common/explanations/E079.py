from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "With data-parallel replicas (`--dp` above 1) a schedule must reduce each chunk's gradients (`reduce_grads`, "
    "E092), and where those reductions start is what hides their time behind the backwards. Synth's engines do not "
    "place collective jobs yet, so a schedule they found would be refused at that degree: synth says so before it "
    "searches. Search at dp 1, then place the `reduce_grads` in the written order (after each chunk's last "
    "backward) and check it with `--dp`.",
    cmd("ppdsl synth --pp 4 -m 8 --dp 2 --time-limit 1 -o found.sched"),
    cmd("ppdsl synth --pp 4 -m 8 --time-limit 1 -o found.sched"),
)
