from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

OWN_PROGRAM = """\
import paddle
from paddle.distributed.passes import pipeline_scheduler_pass
from ppdsl.runtime import paddle_pass
from ppdsl.runtime.own_program import set_op_roles

paddle.enable_static()
paddle_pass.install()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [-1, 4], "float32")
    loss = paddle.mean(paddle.nn.Linear(4, 1)(x) ** 2)
    paddle.optimizer.SGD(0.1).minimize(loss)
# set_op_roles(main, loss)
attrs = {"num_micro_batches": 4, "pp_degree": 1, "pp_stage": 0}
plan = pipeline_scheduler_pass.apply_pass(main, startup, "ppdsl:1f1b", attrs)
"""

EXPLANATION = Explanation(
    "A plan runs a program's forward and backward once per micro-batch and its optimizer once per step, so each "
    "op needs its role (`op_role`: 0 forward, 1 backward, 2 optimizer). A program built with "
    "`optimizer.minimize(loss)` outside Paddle's `pir_op_role_guard` has none: "
    "`ppdsl.runtime.own_program.set_op_roles(main, loss)` sets them in one call. The plan then adds each "
    "micro-batch's gradients into accumulators (the optimizer steps on their mean, the full batch's gradient), "
    "which the startup program creates: pass it, and run it after the plan is built.",
    cmd("python own.py", files=(("own.py", OWN_PROGRAM),), paddle=True),
    cmd("python own.py", files=(("own.py", OWN_PROGRAM.replace("# set_op_roles", "set_op_roles")),), paddle=True),
)
