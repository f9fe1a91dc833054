from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

EXPLANATION = Explanation(
    "After every step each process checks the loss and the parameters it trains: a NaN or an infinity stops the "
    "run, naming the step (and the rank and the parameter), before that state is saved; a checkpoint holding "
    "one is not resumed. The loss alone would not show it: Paddle's softmax turns NaN logits into a uniform "
    "distribution, whose finite cross entropy repeats every step. Usually the learning rate is too high.",
    cmd("ppdsl run 1f1b --pp 2 -m 2 --steps 2 --optimizer sgd --lr 1e30", paddle=True),
    cmd("ppdsl run 1f1b --pp 2 -m 2 --steps 2 --optimizer sgd --lr 0.01", paddle=True),
)
