from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd
from ppdsl.common.explanations.shared_texts import MODEL

EXPLANATION = Explanation(
    "`--model module:function` names a function that builds the model's forward pass (see the README's "
    "`--model` contract). The module must be importable from the current directory or `PYTHONPATH`, and define "
    "that function.",
    cmd("ppdsl run 1f1b --steps 1 --model mymodel.build", files=(MODEL,)),
    cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
)
