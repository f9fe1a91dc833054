from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A recompute re-runs the forward of its (chunk, micro-batch), so it comes after that forward; an offload "
    "copies the forward's activations to the host store and frees them, so it too comes after the forward, and "
    "the backward of that (chunk, micro-batch) must wait for the reload that copies them back (of the same "
    "fraction, so that it copies back what was moved). The runtime checks this for every rank before it builds "
    "the plan: out of order, a job would read activations that were never made or already freed. `ppdsl check` "
    "refuses such a schedule first (S115-S117); a plan built from Python without a check meets this.",
    cmd(
        "python -c 'from ppdsl.runtime.plan import build_plan; ...'",
        note="a rank's order: F0 offload0 B0 (the backward before the reload)",
        setting="a plan built from Python with memory jobs",
        paddle=True,
    ),
    cmd(
        "python -c 'from ppdsl.runtime.plan import build_plan; ...'",
        note="a rank's order: F0 offload0 reload0 B0",
        setting="a plan built from Python with memory jobs",
        paddle=True,
    ),
)
