from __future__ import annotations

from ppdsl.common.explanations.example import Explanation, cmd

HAND_PLAN = """import ppdsl
from ppdsl.runtime.env import import_paddle
from ppdsl.runtime.builtin_models import load_model
from ppdsl.plan.spec import plan_module_spec
from ppdsl.runtime.plan import build_plan
from ppdsl.runtime.program import build_training_program

paddle = import_paddle()
program = build_training_program(paddle, load_model(None), micro_batch_size=4, num_stages=2, microbatches=2, lr=0.01)
full = [("forward", 0, 0), ("forward", 0, 1), ("backward", 0, 0), ("backward", 0, 1), ("optimizer", 0, 0)]
job_types = [jt.to_dict() for jt in ppdsl.load("fthenb").job_types]
orders = [full, {rank1}]
stages = [[0], [1]]
build_plan(program.main, program.startup, plan_module_spec(job_types, stages, orders, [], microbatches=2))
"""

EXPLANATION = Explanation(
    "Run on one process, a plan runs every op of the program in some job. An op whose job type and stage no "
    "rank's job list names would never run. `ppdsl check` proves job lists complete (S101) before `ppdsl run` "
    "builds a plan, so this is met only by job lists handed to `ppdsl.runtime.plan.build_plan` unchecked.",
    cmd(
        "python build.py",
        files=(("build.py", HAND_PLAN.format(rank1="[job for job in full if job[0] != 'forward']")),),
        paddle=True,
    ),
    cmd("python build.py", files=(("build.py", HAND_PLAN.format(rank1="full")),), paddle=True),
)
