from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "Training (`ppdsl run`), `--model` memory measurement and plan building need PaddlePaddle, which is not "
    "installed in this Python environment. Everything else (`check`, `expand`, `compile`, `trace`, ...) works "
    "without it.",
    cmd("ppdsl run 1f1b", note="in an environment without PaddlePaddle", paddle=True),
    cmd("pip install 'ppdsl[paddle]'", "ppdsl run 1f1b", paddle=True),
)
