from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Commands whose output grows with the sizes estimate it before they start and refuse, in well under a "
    "second, what would not fit their budget: `trace`, `expand`, `show` and `plot` hold every job (about 1 KiB "
    "each) and are bounded to 1 GiB of memory unless `--max-memory` raises it; `sweep` multiplies that by its "
    "points; `synth` bounds its problem (ranks x micro-batches x chunks) to what its time limit can search "
    "(`--max-problem` raises it). The message gives the figure and the budget.",
    cmd("ppdsl trace fthenb --pp 64 -m 16384 -o big.json"),
    cmd("ppdsl trace fthenb --pp 8 -m 64 -o small.json"),
)
