from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "A memory limit is read in the unit memory is counted in, and says which one it is: without --model memory is "
    "counted in activations (a forward holds 1), so the limit is a bare number; with --model it is measured in "
    "bytes, so the limit carries a unit (`2GiB`, `4096B`). A limit in the other unit is refused rather than "
    "read as a number of this one (`2GiB` is not 2147483648 activations). A schedule's own `memory limit` "
    "counts activations: under --model, give the limit in bytes with --memory-limit, which replaces it.",
    cmd("ppdsl check 1f1b --pp 4 -m 8 --memory-limit 2GiB"),
    cmd("ppdsl check 1f1b --pp 4 -m 8 --memory-limit 4"),
)
