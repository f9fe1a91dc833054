from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

ENDS_ONLY = (
    "ends.py",
    '''"""A model placed by hand on the first and the last stage only."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [8, 16])
        h = paddle.matmul(x, paddle.static.create_parameter([16, 16], "float32", name="w_first"))
    with ctx.stage(ctx.num_stages - 1):
        h = paddle.matmul(h, paddle.static.create_parameter([16, 16], "float32", name="w_last"))
        return paddle.mean(h * h)
''',
)

EXPLANATION = Explanation(
    "Every pipeline stage must hold some of the model's ops. A model that places its ops by hand (`with "
    "ctx.stage(s):`, or a program of your own whose ops carry chunk ids) and leaves a stage out would train "
    "with ranks that only pass values on, their share of the work on another rank. `ctx.pipeline` refuses "
    "such a split (E039); a hand-placed model is refused the same way, naming the empty stages. Spread the "
    "layers over `ctx.num_stages` (`ctx.layer_stage(i, layers)`), or run fewer stages. A partition that gives a "
    "stage no layer (`partition = [...] allow empty`, which the checker accepts) is refused here too: the runtime "
    "cannot yet run a stage that only passes values on, so give every stage a layer.",
    cmd(
        "ppdsl run 1f1b --pp 4 -m 4 --batch-size 4 --steps 1 --model ends:build",
        files=(ENDS_ONLY,),
        note="the model places ops on the first and last stages only",
        paddle=True,
    ),
    cmd("ppdsl run 1f1b --pp 2 -m 4 --batch-size 4 --steps 1 --model ends:build", files=(ENDS_ONLY,), paddle=True),
)
