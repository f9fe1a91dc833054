from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, sched

EXPLANATION = Explanation(
    "Nesting is bounded so that a schedule from anywhere is checked in a bounded time and stack: at most 64 "
    "levels of blocks (`{ ... }`), at most 20 loops inside one another in an order (`repeat`, `for` and "
    "`job * n` each compile to a Python loop, and Python allows 20), and expressions at most 100 levels "
    "deep (operators, calls, parentheses). The message points at the first block or expression past the limit.",
    sched(
        "order {\n"
        + "".join("    " * (i + 1) + "repeat 1 {\n" for i in range(21))
        + "    " * 22
        + "forward\n"
        + "".join("    " * (21 - i) + "}\n" for i in range(21))
        + "    backward  optimizer\n}\n",
        "--pp 1 -m 1",
    ),
    sched(
        "fn one() = 1\norder {\n    repeat one() * microbatches { forward }\n"
        "    backward * microbatches  optimizer\n}\n",
        "--pp 1 -m 1",
    ),
)
