from __future__ import annotations

from ppdsl.common.explanations.example import SCHED, Explanation, cmd

ONE_F_ONE_B = """
order {
    let warmup = min(pp - rank - 1, microbatches)
    forward * warmup
    repeat microbatches - warmup { forward backward }
    backward * warmup
    optimizer
}
"""

EXPLANATION = Explanation(
    "A plan specification (`ppdsl.plan.spec.PlanSpec`) records the fingerprint of the schedule it was "
    "checked from: the sha256 of the `.sched` text and of every file it includes, in order. Whatever reuses a "
    "plan or a state made under it against a source compares the two, for another text may order the jobs, "
    "and so the floating-point sums, differently: a `--resume` checkpoint saved under another text, or a "
    "rank handed a plan of another schedule than its launch checked. The message names both fingerprints; "
    "resume under the text the checkpoint was saved with, or start afresh.",
    cmd(
        "ppdsl run example.sched --pp 2 -m 2 --steps 2 --save-dir ckpt",
        "echo '# edited' >> example.sched",
        "ppdsl run example.sched --pp 2 -m 2 --steps 4 --resume ckpt",
        files=((SCHED, ONE_F_ONE_B.strip("\n") + "\n"),),
        paddle=True,
    ),
    cmd(
        "ppdsl run example.sched --pp 2 -m 2 --steps 2 --save-dir ckpt",
        "ppdsl run example.sched --pp 2 -m 2 --steps 4 --resume ckpt",
        files=((SCHED, ONE_F_ONE_B.strip("\n") + "\n"),),
        paddle=True,
    ),
)
