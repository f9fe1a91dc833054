from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "`ppdsl synth` found no schedule within the memory limit, because there is none: a rank's first stage keeps "
    "a micro-batch's activation until its backward there, which comes after the micro-batch's forwards on all "
    "of the rank's later stages, so every schedule holds one micro-batch's forwards on all of a rank's stages "
    "at once (two chunk activations for a V). The message says how much that is.",
    cmd("ppdsl synth --pp 4 -m 8 --vpp 2 --placement vshape --memory-limit 1.5 --time-limit 1 -o found.sched"),
    cmd("ppdsl synth --pp 4 -m 8 --vpp 2 --placement vshape --memory-limit 2 --time-limit 1 -o found.sched"),
)
