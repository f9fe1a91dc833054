"""The long form of every diagnostic code: what it means, a wrong example and the fixed one (`ppdsl explain CODE`).

Kept apart from `codes.py`, which every command imports for exit statuses, because only `explain`, the docs and
the tests read these texts. An example is a command line and the files it reads; for a code a `.sched` file can
produce, the file is `example.sched` and the command `ppdsl check` with the sizes. tests/common/test_codes.py runs
every example that needs no PaddlePaddle and checks that the wrong one reports its code and the fixed one does
not.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

SCHED = "example.sched"


@dataclass(frozen=True)
class Example:
    """Commands run in one directory holding `files` (name, text); the last command is the one that shows the code.
    `paddle`: it runs training or builds a program, so it needs PaddlePaddle. `setting`: what else it needs that
    a working installation does not have (the tests then check it as a command line, without running it)."""

    commands: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()
    note: str = ""
    paddle: bool = False
    setting: str = ""

    @property
    def runs_anywhere(self) -> bool:
        return not self.paddle and not self.setting

    @property
    def sched(self) -> str | None:
        """The `.sched` text of a schedule example."""
        return dict(self.files).get(SCHED)


@dataclass(frozen=True)
class Explanation:
    text: str
    wrong: Example
    fixed: Example


def sched(text: str, args: str, extra: tuple[tuple[str, str], ...] = ()) -> Example:
    """A schedule example: `text` (dedented) as example.sched, checked at the sizes `args`."""
    return Example((f"ppdsl check {SCHED} {args}",), ((SCHED, textwrap.dedent(text).strip("\n") + "\n"), *extra))


def cmd(
    *commands: str, files: tuple[tuple[str, str], ...] = (), note: str = "", paddle: bool = False, setting: str = ""
) -> Example:
    return Example(tuple(commands), files, note, paddle, setting)


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
GPIPE = "order { forward * microbatches  backward * microbatches  optimizer }"
ONE_F_ONE_B = """
order {
    let warmup = min(pp - rank - 1, microbatches)
    forward * warmup
    repeat microbatches - warmup { forward backward }
    backward * warmup
    optimizer
}
"""
MODEL = (
    "mymodel.py",
    '''"""A two-layer model per stage (see the README's `--model` contract)."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [8, 16])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            w = paddle.static.create_parameter([16, 16], "float32", name=f"w{s}")
            h = paddle.tanh(paddle.matmul(h, w))
    with ctx.stage(ctx.num_stages - 1):
        return paddle.mean(h * h)
''',
)
STACK = (
    "stack.py",
    '''"""An nn.Layer stack placed on the stages by ctx.pipeline."""

from paddle import nn

BLOCKS = 1


class Head(nn.Layer):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(8, 8)

    def forward(self, x):
        return self.out(x).mean()


def build(ctx):
    with ctx.layers():
        embedding, blocks, head = nn.Linear(8, 8), [nn.Linear(8, 8) for _ in range(BLOCKS)], Head()
    x = ctx.data("x", [4, 8])
    return ctx.pipeline(embedding, blocks, head, inputs=[x])
''',
)
ELEMENTWISE = (
    "mymodel.py",
    '''"""A model with no matmul: nothing to put in backward_w."""


def build(ctx):
    paddle = ctx.paddle
    with ctx.stage(0):
        x = ctx.data("x", [2, 4])
    h = x
    for s in range(ctx.num_stages):
        with ctx.stage(s):
            scale = paddle.static.create_parameter([4], "float32", name=f"scale{s}")
            h = paddle.tanh(h * scale)
    with ctx.stage(ctx.num_stages - 1):
        return paddle.mean(h * h)
''',
)
TRACE = "ppdsl trace 1f1b --pp 2 -m 2 -o profile.json"
USER_JOBS = """job loss : forward ops "pd_op.mean" after forward
job reductions : forward ops "pd_op.mean", "pd_op.sum" after forward
order {
    repeat microbatches { forward loss reductions }
    backward * microbatches
    optimizer
}
"""
HEAD_AFTER = """job head : forward ops "pd_op.matmul" after forward
order {
    repeat microbatches { forward head }
    backward * microbatches
    optimizer
}
"""
LOSS_AFTER = HEAD_AFTER.replace('head : forward ops "pd_op.matmul"', 'loss : forward ops "pd_op.mean"').replace(
    "forward head", "forward loss"
)
HAND_PLAN = """import ppdsl
from ppdsl.runtime.env import import_paddle
from ppdsl.runtime.builtin_models import load_model
from ppdsl.runtime.plan import build_plan
from ppdsl.runtime.program import build_training_program

paddle = import_paddle()
program = build_training_program(paddle, load_model(None), micro_batch_size=4, num_stages=2, microbatches=2, lr=0.01)
full = [("forward", 0, 0), ("forward", 0, 1), ("backward", 0, 0), ("backward", 0, 1), ("optimizer", 0, 0)]
job_types = [jt.to_dict() for jt in ppdsl.load("fthenb").job_types]
orders = [full, {rank1}]
stages = [[0], [1]]
build_plan(program.main, program.startup, job_types=job_types, stage_of=stages, orders=orders, rules=[], microbatches=2)
"""

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

EXPLANATIONS: dict[str, Explanation] = {
    "E000": Explanation(
        "A file ppdsl was given cannot be read (it does not exist, is not readable, or is not UTF-8 text), or an "
        "output file cannot be written (its directory does not exist or is not writable). A schedule is a path or "
        "the name of a shipped schedule (`ppdsl list`); a name that is neither is read as a path.",
        cmd("ppdsl check 1f1b.shed --pp 4 -m 8"),
        cmd("ppdsl check 1f1b --pp 4 -m 8"),
    ),
    "E001": Explanation(
        "The text does not follow the grammar (`ppdsl/language/sched.lark`). The caret marks the first token that "
        "cannot continue what comes before it, and the label lists what could. After an error the parser skips to "
        "the next statement or top-level item, so each mistake is reported once. An unclosed `{` is reported at "
        "the brace that is open.",
        sched(
            """
            require microbatches >= pp "needs a micro-batch per stage"
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            require microbatches >= pp : "needs a micro-batch per stage"
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E002": Explanation(
        "A name, job type, region, function or setting is not defined where it is used. Sizes (`pp`, `vpp`, "
        "`microbatches`) and parameters are visible everywhere; `rank` in an order, a memory limit and per-job "
        "costs; `chunk` and `stage` in per-job costs and memory; `let` and `for` names after they are bound.",
        sched(
            """
            order {
                repeat micro_batches { forward }
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                repeat microbatches { forward }
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E003": Explanation(
        "Something is defined twice in one file (a parameter, job type, cost, memory setting, placement, order, "
        "a table's rank row), or a built-in name is redefined (`pp`, `rank`, `forward`, ...). An including file "
        "may override what an included file defines; within one file, keep one definition.",
        sched(
            """
            cost forward = 1
            cost forward = 2
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            cost forward = 2
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E004": Explanation(
        "A job or a function is given arguments it does not take, or the wrong number of them: a job takes "
        "`chunk = <int>` and `mb = <int>`; `min` and `max` take two or more numbers, `abs` one, `ceildiv` two "
        "integers. A job type that `receives` or `sends` for another must say which with `before` / `after`.",
        sched(
            """
            order {
                forward(chunk = 0, stage = 0) * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward(chunk = 0) * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E005": Explanation(
        "An `include` names a file that cannot be read, or files include each other in a cycle. Included paths are "
        "relative to the including file.",
        sched(
            """
            include "common.sched"
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            include "common.sched"
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 4",
            [("common.sched", "cost forward = 2\n")],
        ),
    ),
    "E006": Explanation(
        "A schedule says which jobs each rank runs, in an `order { ... }` body (run once per rank) or in `table`s "
        "(literal rows, one per rank). This file has neither, so there is nothing to check or run.",
        sched(
            """
            schedule "Mine"
            cost forward = 1
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            schedule "Mine"
            cost forward = 1
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E007": Explanation(
        "A command-line value cannot be used: sizes must be integers from 1 up, `--param` must name a parameter of "
        "the schedule (`name=value`), `--cost` a job type, and options that go together must be given together.",
        cmd("ppdsl check 1f1b --pp 0 -m 8"),
        cmd("ppdsl check 1f1b --pp 4 -m 8"),
    ),
    "E008": Explanation(
        "A cost file (`--costs FILE`, as `ppdsl calibrate` writes it) is not a JSON object of the expected form "
        '`{"costs": {type: time}, "stages": {stage: {type: time}}, "latency": t, "bandwidth": b, "unit": "s"}`: '
        "a key it does not know (a typo, or a profile or summary passed as a cost file), a job type the schedule "
        "does not have, a time that is not a number from 0 to 1e15 (`NaN`, `Infinity`, negative, a string), or a "
        "time unit other than `s`, `ms` and `us`. Nothing runs with the schedule's own costs instead.",
        cmd("ppdsl check 1f1b --pp 4 -m 8 --costs costs.json", files=(("costs.json", '{"costs": {"forward": 1,}}\n'),)),
        cmd("ppdsl check 1f1b --pp 4 -m 8 --costs costs.json", files=(("costs.json", '{"costs": {"forward": 1}}\n'),)),
    ),
    "E009": Explanation(
        "A profile (`ppdsl calibrate`, `ppdsl plot --measured`) must be a Chrome trace whose compute events "
        "(ph `X`) name a job `type` in their args, as `ppdsl trace` and `ppdsl run --profile` write them.",
        cmd("ppdsl calibrate profile.json -o costs.json", files=(("profile.json", '{"traceEvents": []}\n'),)),
        cmd(TRACE, "ppdsl calibrate profile.json -o costs.json"),
    ),
    "E010": Explanation(
        "`/` divides into a real number; counts, loop bounds, chunks, micro-batches, stages and priorities are "
        "integers. Use `//` (floor division) or `ceildiv(a, b)` where an integer is needed.",
        sched(
            """
            order {
                forward * (microbatches / 2)
                forward * (microbatches / 2)
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward * (microbatches // 2)
                forward * (microbatches - microbatches // 2)
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E011": Explanation(
        "Every value is an integer (`int`), a real number (`float`) or a condition (`bool`), known before the "
        "schedule runs. Conditions (`if`, `require`, `when`, `and`, `or`, `not`) take a condition; counts, loop "
        "bounds, chunks and micro-batches take an integer; costs and memory take a number. A number is not a "
        "condition: compare it (`pp > 1`); a condition is not a number: choose one (`if c then 1 else 0`). The two "
        "branches of `if ... then ... else` have one type, and a `let` keeps the type of the name it rebinds.",
        sched(
            """
            require pp : "needs more than one stage"
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            require pp > 1 : "needs more than one stage"
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E012": Explanation(
        "A parameter has one value for the whole run: its default, or the one given with `--param NAME=VALUE`. The "
        "default is a literal (`2`, `0.5`, `true`), whose type is the parameter's. A value computed from the sizes "
        "belongs in the order (`let`) or in a function (`fn`).",
        sched(
            """
            param warmup = pp - 1
            order {
                forward * warmup
                forward * (microbatches - warmup)
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            param extra = 0
            order {
                let warmup = pp - 1 + extra
                forward * warmup
                forward * (microbatches - warmup)
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E013": Explanation(
        "A parameter has one value for the whole schedule, but `rank`, `chunk` and `stage` differ from job to job. "
        "What depends on the rank belongs in the order, which runs once per rank: `let warmup = pp - rank - 1`.",
        sched(
            """
            param warmup = pp - rank - 1
            order {
                forward * warmup
                repeat microbatches - warmup { forward backward }
                backward * warmup
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                let warmup = pp - rank - 1
                forward * warmup
                repeat microbatches - warmup { forward backward }
                backward * warmup
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E014": Explanation(
        "A function (`fn name(args) = expr`) is a formula: it may call other functions, but not itself, directly or "
        "through others, so that every call ends. One call may make at most 10,000 calls in all: a function that "
        "calls another twice doubles what it costs, and a chain of them grows past any use.",
        sched(
            """
            fn warmup(r) = if r == 0 then 0 else warmup(r - 1) + 1
            order {
                forward * (pp - 1 - warmup(rank))
                repeat microbatches - (pp - 1 - warmup(rank)) { forward backward }
                backward * (pp - 1 - warmup(rank))
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            fn warmup(r) = pp - 1 - r
            order {
                forward * warmup(rank)
                repeat microbatches - warmup(rank) { forward backward }
                backward * warmup(rank)
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "E015": Explanation(
        "Before running anything, ppdsl counts the fewest jobs the sizes need (a forward and a backward for each "
        "rank, chunk and micro-batch, and an optimizer per rank), and refuses sizes over the limit, 8,388,608 jobs "
        "unless `--max-jobs` raises it; an order that runs more jobs than the limit is refused too. Time and memory "
        "grow with the jobs: the default covers pp=64, vpp=4, 4096 micro-batches.",
        cmd("ppdsl check 1f1b --pp 100000 -m 100000"),
        cmd("ppdsl check 1f1b --pp 64 -m 512"),
    ),
    "E020": Explanation(
        "`ppdsl import` reads PyTorch pipelining's compute-only CSV: one row per rank, one action per step "
        "(`<stage><F|B|I|W><micro-batch>`, an empty field for an idle step), each stage on one rank only.",
        cmd("ppdsl import schedule.csv -o imported.sched", files=(("schedule.csv", "0F0,0X0\n1F0,1B0\n"),)),
        cmd("ppdsl import schedule.csv -o imported.sched", files=(("schedule.csv", "0F0,0B0\n1F0,1B0\n"),)),
    ),
    "E030": Explanation(
        "Training (`ppdsl run`), `--model` memory measurement and plan building need PaddlePaddle, which is not "
        "installed in this Python environment. Everything else (`check`, `expand`, `compile`, `trace`, ...) works "
        "without it.",
        cmd("ppdsl run 1f1b", note="in an environment without PaddlePaddle", paddle=True),
        cmd("pip install 'ppdsl[paddle]'", "ppdsl run 1f1b", paddle=True),
    ),
    "E031": Explanation(
        "`--model module:function` names a function that builds the model's forward pass (see the README's "
        "`--model` contract). The module must be importable from the current directory or `PYTHONPATH`, and define "
        "that function.",
        cmd("ppdsl run 1f1b --steps 1 --model mymodel.build", files=(MODEL,)),
        cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
    ),
    "E032": Explanation(
        "Each op of the training program must belong to exactly one job type: the types of a region (built in, or "
        "declared with `job NAME : REGION ops ...`) split its ops by name pattern. Two types whose patterns match "
        "the same op, in the same region, make that op ambiguous: make the patterns disjoint, or drop a type.",
        cmd("ppdsl run example.sched --pp 2 -m 2 --steps 1", files=((SCHED, USER_JOBS),), paddle=True),
        cmd("ppdsl run example.sched --pp 2 -m 2 --steps 1", files=((SCHED, GPIPE + "\n"),), paddle=True),
    ),
    "E033": Explanation(
        "A stream rule's `stream` template names op attributes in braces (`send_stream_{ring_id}`); an op the rule "
        "matches must have each of them.",
        cmd(
            "ppdsl run example.sched --pp 2 -m 2 --steps 1",
            files=((SCHED, 'rule "pd_op.matmul" { stream = "stream_{ring_id}" }\n' + GPIPE + "\n"),),
            paddle=True,
        ),
        cmd(
            "ppdsl run example.sched --pp 2 -m 2 --steps 1",
            files=((SCHED, 'rule "pd_op.matmul" { stream = "compute_stream" }\n' + GPIPE + "\n"),),
            paddle=True,
        ),
    ),
    "E034": Explanation(
        "A schedule with `backward_b` / `backward_w` splits each backward into the input gradient and the weight "
        "gradient. ppdsl splits matmul weight gradients on 3-D `[micro-batch, sequence, hidden]` inputs; a model "
        "with none has nothing to put in `backward_w`. Use a schedule with whole backwards for it.",
        cmd(
            "ppdsl run zbh1 --pp 2 -m 2 --steps 1 --model mymodel:build",
            files=(ELEMENTWISE,),
            note="with a model that has no matmul",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --pp 2 -m 2 --steps 1 --model mymodel:build", files=(ELEMENTWISE,), paddle=True),
    ),
    "E035": Explanation(
        "Run on one process, a plan runs every op of the program in some job. An op whose job type and stage no "
        "rank's job list names would never run. `ppdsl check` proves job lists complete (S101) before `ppdsl run` "
        "builds a plan, so this is met only by job lists handed to `ppdsl.runtime.plan.build_plan` unchecked.",
        cmd(
            "python build.py",
            files=(("build.py", HAND_PLAN.format(rank1="[job for job in full if job[0] != 'forward']")),),
            paddle=True,
        ),
        cmd("python build.py", files=(("build.py", HAND_PLAN.format(rank1="full")),), paddle=True),
    ),
    "E036": Explanation(
        "Paddle's executor splits each step's batch into `microbatches` equal parts along its first dimension, so "
        "the batch size must be a multiple of the number of micro-batches.",
        cmd("ppdsl run 1f1b --pp 4 -m 8 --batch-size 30"),
        cmd("ppdsl run 1f1b --pp 4 -m 8 --batch-size 32", paddle=True),
    ),
    "E037": Explanation(
        "`--resume DIR` continues from a checkpoint written by `--save-dir DIR`: `checkpoint.npz` (one process) or "
        "`checkpoint.step<N>.rank<r>.npz` (one per rank and saved step), of the same run: the same schedule text and "
        "sizes, model, batch size, `--lr`, `--optimizer` and `--seed`, for any of them changes what the next step "
        "computes. `--steps` is the total of the run, so a checkpoint past it is refused rather than doing nothing.",
        cmd("ppdsl run 1f1b --steps 2 --resume no_such_dir", paddle=True),
        cmd("ppdsl run 1f1b --steps 2 --save-dir ckpt", "ppdsl run 1f1b --steps 2 --resume ckpt", paddle=True),
    ),
    "E038": Explanation(
        "A multi-process run starts one process per pipeline rank: `--nproc-per-node` times `--nnodes` must equal "
        "`--pp`; several nodes need `--master HOST:PORT`, and `--node-rank` must be one of the nodes.",
        cmd("ppdsl run 1f1b --pp 4 -m 8 --nproc-per-node 2 --dry-run"),
        cmd("ppdsl run 1f1b --pp 4 -m 8 --nproc-per-node 4 --dry-run"),
    ),
    "E039": Explanation(
        "`ctx.pipeline` places an `nn.Layer` stack on the stages: the embedding on the first, the head on the "
        'last, the blocks between by `split` ("uniform", "params", or the blocks where stages start). It '
        "refuses a split that leaves a stage without a layer, cut points that are not ascending block indices, and "
        "a trainable weight used on two stages (tied embeddings: each rank would update its own copy).",
        cmd(
            "ppdsl run 1f1b --pp 4 -m 4 --batch-size 4 --steps 1 --model stack:build",
            files=(STACK,),
            note="one block for four stages: stages 1 and 2 hold nothing",
            paddle=True,
        ),
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --batch-size 4 --steps 1 --model stack:build",
            files=(STACK,),
            paddle=True,
        ),
    ),
    "E040": Explanation(
        "A rank of a multi-process run raised an error or the launcher stopped; the message is that rank's error "
        "(its file `rank<r>.error` and the launcher's logs in the launch's directory, `launch-<n>/` in the run "
        "directory, have the details). A receive that waits longer than `--comm-timeout` stops the run naming the"
        " rank, the job and the peer. Each rank is its own process: a `--model` module must be importable there "
        "too (the current directory and `PYTHONPATH` are).",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --comm-timeout 0.001",
            note="no activation crosses a link within a millisecond: the first receive gives up",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2", paddle=True),
    ),
    "E041": Explanation(
        "`ppdsl synth --exact` models the schedule in CP-SAT, OR-Tools' constraint solver, and `--periodic` solves "
        "its repeated block there too; OR-Tools is an optional dependency (the `synth` extra; the `test` extra has "
        "it too). Without these options, synth searches without it, only less strongly.",
        cmd(
            "ppdsl synth --pp 2 -m 4 --exact -o found.sched",
            note="in an environment without OR-Tools",
            setting="OR-Tools not installed",
        ),
        cmd("pip install 'ppdsl[synth]'", "ppdsl synth --pp 2 -m 4 --exact -o found.sched", setting="network"),
    ),
    "E042": Explanation(
        "`ppdsl synth` checks the file it writes before it writes it: the checker must prove it valid with the "
        "makespan the search measured. They share one execution model, so this never happens unless ppdsl has a "
        "bug: nothing is written, and the message says what the checker found. Please report it with the command.",
        cmd(
            "ppdsl synth --pp 4 -m 8 --memory-limit 4 -o found.sched",
            note="(only with a bug in ppdsl synth)",
            setting="a bug in ppdsl synth",
        ),
        cmd("ppdsl synth --pp 4 -m 8 --memory-limit 4 --time-limit 1 -o found.sched"),
    ),
    "E043": Explanation(
        "A job type of your own takes the ops its `ops` patterns match out of its region; the ops left run in the "
        "region's built-in job. When a built-in job uses the result of an op your type took, and your type runs "
        "after it (`after forward`), that job would read a value not computed yet. The checker cannot see this: "
        "which op goes where is known only once the real program is split. Give your type ops whose results only "
        "later jobs read (the loss at the end of the forward, say), or the ops' users too.",
        cmd(
            "ppdsl run example.sched --pp 2 -m 2 --steps 1",
            files=((SCHED, HEAD_AFTER),),
            note="the forward's bias add reads the matmul that `head` runs later",
            paddle=True,
        ),
        cmd("ppdsl run example.sched --pp 2 -m 2 --steps 1", files=((SCHED, LOSS_AFTER),), paddle=True),
    ),
    "E044": Explanation(
        "A plan runs a program's forward and backward once per micro-batch and its optimizer once per step, so each "
        "op needs its role (`op_role`: 0 forward, 1 backward, 2 optimizer). A program built with "
        "`optimizer.minimize(loss)` outside Paddle's `pir_op_role_guard` has none: "
        "`ppdsl.runtime.own_program.set_op_roles(main, loss)` sets them in one call. The plan then adds each "
        "micro-batch's gradients into accumulators (the optimizer steps on their mean, the full batch's gradient), "
        "which the startup program creates: pass it, and run it after the plan is built.",
        cmd("python own.py", files=(("own.py", OWN_PROGRAM),), paddle=True),
        cmd("python own.py", files=(("own.py", OWN_PROGRAM.replace("# set_op_roles", "set_op_roles")),), paddle=True),
    ),
    "E045": Explanation(
        "`ppdsl run --nproc-per-node` binds the files of a launch to it: each rank gets the sha256 of the launch's "
        "`spec.json` on its command line, and the spec holds the sha256 of `plan.json`. A rank reads each file once "
        "(never through a symlink, a regular file only) and compares its bytes before it parses them, so a file "
        "changed after the launcher wrote it (by anyone who can write the run directory) is refused rather than "
        "obeyed: the spec names the model module every rank runs. Run `ppdsl run` again, with a `--run-dir` only "
        "you can write.",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2",
            note="while its ranks start, `spec.json` of the launch is rewritten",
            setting="a launch's spec.json replaced while its ranks start",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2", paddle=True),
    ),
    "E046": Explanation(
        "`ppdsl run --model module:function` calls the function once, with the model context (`ctx`: sizes, "
        "`ctx.data`, `ctx.stage`, `ctx.layers`, `ctx.pipeline`), inside the program it builds; it must take that "
        "one argument and return the loss.",
        cmd(
            "ppdsl run 1f1b --steps 1 --model nomodel:build",
            files=(("nomodel.py", "def build():\n    pass\n"),),
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
    ),
    "E047": Explanation(
        "The model function raised while it built the program: the message is the error and the line of the model's "
        "own code it came from (Paddle's shape checks raise here too: a weight that does not match its input, a "
        "layer called with the wrong inputs). `ctx.pipeline` calls `head(h, *head_inputs)`: a head that takes the "
        "labels needs `head_inputs=[labels]`.",
        cmd(
            "ppdsl run 1f1b --steps 1 --model badmodel:build",
            files=(("badmodel.py", MODEL[1].replace("[16, 16]", "[17, 16]")),),
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
    ),
    "E048": Explanation(
        "The model function must return the loss of one micro-batch: one float number, a Value of the program "
        "(shape [] or [1], as `paddle.mean(...)` gives). None (a forgotten `return`), a tuple, or a loss per "
        "example are refused before anything trains.",
        cmd(
            "ppdsl run 1f1b --steps 1 --model badmodel:build",
            files=(("badmodel.py", MODEL[1].replace("return paddle.mean", "paddle.mean")),),
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --steps 1 --model mymodel:build", files=(MODEL,), paddle=True),
    ),
    "E049": Explanation(
        "A rank of `ppdsl run --nproc-per-node` runs the `--model` module from the source bytes its launcher "
        "read, not by importing it again: the launch's spec holds the sha256 of the module's file (and of each "
        "package `__init__.py` above it), the rank reads each file once, compares and runs those bytes. A file "
        "edited or replaced between the launch and a rank's start is refused; so is a module that is not Python "
        "source (a compiled extension), whose bytes a rank could not run this way. Start the run again once the "
        "model's files are as you want them.",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --model mymodel:build",
            files=(MODEL,),
            note="`mymodel.py` is edited while the ranks start",
            setting="a model file edited while the ranks start",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --model mymodel:build", files=(MODEL,), paddle=True),
    ),
    "E050": Explanation(
        "An output (`-o`, `--summary-json`, `--profile`) names a file the command reads: its schedule, a file the "
        "schedule includes, a cost file, a CSV, a profile. Writing it would destroy the input, so nothing is "
        "written. The same file under another name (a symlink, a hard link) is the same file.",
        cmd("ppdsl compile example.sched -o example.sched", files=((SCHED, GPIPE + "\n"),)),
        cmd("ppdsl compile example.sched -o plan_example.py", files=((SCHED, GPIPE + "\n"),)),
    ),
    "E051": Explanation(
        "ppdsl reads regular files only. A directory, a FIFO (a named pipe), a device (`/dev/zero`, `/dev/stdin`) "
        "or a socket is refused before anything is read: reading one may never end, or never stop growing. Save "
        "what a pipe or a program produces to a file first.",
        cmd("ppdsl check /dev/zero --pp 2 -m 4"),
        cmd("ppdsl check example.sched --pp 2 -m 4", files=((SCHED, GPIPE + "\n"),)),
    ),
    "E052": Explanation(
        "Each kind of input has a size ppdsl reads at most, far above any real file of the kind: 16 MiB for a "
        "schedule and each file it includes, 1 MiB for a cost file, 64 MiB for a PyTorch CSV or a profile. A "
        "larger file is refused before it is read, so a wrong path cannot exhaust the memory.",
        cmd("ppdsl check huge.sched --pp 2 -m 4", setting="a schedule file larger than 16 MiB"),
        cmd("ppdsl check example.sched --pp 2 -m 4", files=((SCHED, GPIPE + "\n"),)),
    ),
    "E053": Explanation(
        "An output is written to a regular file (replaced whole: a new file is written beside it and renamed over "
        "it, so a failure leaves the old one), or written through to a character device or a FIFO (`/dev/null`, "
        "`/dev/stdout`, a pipe), which are never replaced. A directory, a block device or a socket is refused, and "
        "a write that fails (no space left on the disk, `/dev/full`) is this error: a file being replaced keeps "
        "its old content.",
        cmd("ppdsl compile 1f1b -o ."),
        cmd("ppdsl compile 1f1b -o plan_1f1b.py"),
    ),
    "E054": Explanation(
        "ppdsl writes only into a directory that no other user can change: owned by you or by root, and not "
        "writable by its group (unless it is your private group) or by everyone. A sticky directory everyone "
        "may write (`/tmp`) is shared: there ppdsl only makes new files and replaces its own. A run directory "
        "(`--run-dir`, default `ppdsl-run/`) and a save directory (`--save-dir`) are checked as ssh checks "
        "`~/.ssh`, every directory above them too, because the ranks and a resumed run open their files by name "
        "later. Otherwise another user (you may be root) could swap `spec.json` or plant a symlink where ppdsl "
        "writes.",
        cmd("ppdsl compile 1f1b", setting="the current directory is another user's"),
        cmd("ppdsl compile 1f1b", note="(in a directory of your own)"),
    ),
    "E055": Explanation(
        "A rule's `attr` changes how the ops it matches are run, never what they compute: it takes only the "
        "communication and scheduling attributes Paddle's own pipeline passes set (`use_calc_stream`, "
        "`dynamic_shape`, `force_record_event`, `event_to_record`). Any other attribute, a softmax's `axis` or "
        "gelu's `approximate`, would train another model than the one `check` proved; the stream and the "
        'priority are the rule\'s own `stream = "..."` and `priority = ...`.',
        sched('rule "pd_op.softmax" { attr axis = 1 }\n' + GPIPE, "--pp 2 -m 2"),
        sched('rule "pd_op.send_v2" { attr use_calc_stream = true }\n' + GPIPE, "--pp 2 -m 2"),
    ),
    "E056": Explanation(
        "Each attribute a rule may set has the type Paddle gives it: `use_calc_stream`, `dynamic_shape` and "
        "`force_record_event` are `true` or `false`, `event_to_record` a string. Paddle has no setter for a real "
        "number, and a value of another type than the op's crashes it.",
        sched('rule "pd_op.send_v2" { attr use_calc_stream = 1 }\n' + GPIPE, "--pp 2 -m 2"),
        sched('rule "pd_op.send_v2" { attr use_calc_stream = true }\n' + GPIPE, "--pp 2 -m 2"),
    ),
    "E057": Explanation(
        "A rule's `stream` is a template over the matched op's attributes: `send_stream_{ring_id}`. A field names "
        "an attribute (no `.x`, `[i]` or `!r`); its width and precision are at most 32 (`{ring_id:>4}`), and the "
        "name at most 128 characters; braces pair up, `{{` and `}}` are literal braces.",
        sched('rule "pd_op.send_v2" { stream = "send_{ring_id:>3000000000}" }\n' + GPIPE, "--pp 2 -m 2"),
        sched('rule "pd_op.send_v2" { stream = "send_{ring_id:>3}" }\n' + GPIPE, "--pp 2 -m 2"),
    ),
    "E058": Explanation(
        "An output path is followed through a symlink only if the symlink is yours or root's: another user's "
        "link could aim your write (as root, any write) at any file. In a shared sticky directory (`/tmp`), a file "
        "of another user's name is not replaced either. Remove the link, or name the file it points to.",
        cmd("ppdsl compile 1f1b -o /tmp/plan_1f1b.py", setting="another user's symlink at /tmp/plan_1f1b.py"),
        cmd("ppdsl compile 1f1b -o plan_1f1b.py"),
    ),
    "E059": Explanation(
        "`ppdsl fmt DIR` rewrites the `.sched` files under DIR, and nothing outside it: a symlink it meets that "
        "leads out of the tree is not followed, and is reported. A link to a file inside the tree is skipped (that "
        "file is formatted under its own name). To format the file a link points to, name that file.",
        cmd(
            "ln -s /etc/outside.sched schedules/link.sched",
            "ppdsl fmt schedules",
            setting="a symlink out of the tree",
        ),
        cmd("ppdsl fmt example.sched", files=((SCHED, GPIPE + "\n"),)),
    ),
    "E060": Explanation(
        "After every step each process checks the loss and the parameters it trains: a NaN or an infinity stops the "
        "run, naming the step (and the rank and the parameter), before that state is saved; a checkpoint holding "
        "one is not resumed. The loss alone would not show it: Paddle's softmax turns NaN logits into a uniform "
        "distribution, whose finite cross entropy repeats every step. Usually the learning rate is too high.",
        cmd("ppdsl run 1f1b --pp 2 -m 2 --steps 2 --optimizer sgd --lr 1e30", paddle=True),
        cmd("ppdsl run 1f1b --pp 2 -m 2 --steps 2 --optimizer sgd --lr 0.01", paddle=True),
    ),
    "E061": Explanation(
        "A checkpoint is read without trusting it: only a regular file (not a FIFO, device or directory), an "
        "uncompressed `.npz` archive whose members all pass their CRC check, numeric arrays whose headers match "
        "their bytes, and a `__meta__` JSON object with a whole-number step. Anything else was not written whole by "
        "ppdsl (a copy cut short, a disk error, another program's file) and is refused, naming the file.",
        cmd(
            "ppdsl run 1f1b --steps 2 --save-dir ckpt",
            "truncate -s 100 ckpt/checkpoint.npz",
            "ppdsl run 1f1b --steps 4 --resume ckpt",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --steps 2 --save-dir ckpt", "ppdsl run 1f1b --steps 4 --resume ckpt", paddle=True),
    ),
    "E062": Explanation(
        "In a multi-process run every rank writes its own checkpoint of each saved step, and `--resume` continues "
        "from the newest step every rank saved. When there is none (a run killed while its ranks were saving their "
        "first step), or a rank finds its file changed to another step when it starts, resuming would have the "
        "ranks train out of step, so it is refused, naming each rank's steps.",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 2 --steps 2 --nproc-per-node 2 --save-dir ckpt",
            "rm ckpt/checkpoint.step2.rank1.npz",
            "ppdsl run 1f1b --pp 2 -m 2 --steps 4 --nproc-per-node 2 --resume ckpt",
            paddle=True,
        ),
        cmd(
            "ppdsl run 1f1b --pp 2 -m 2 --steps 2 --nproc-per-node 2 --save-dir ckpt --save-every 1",
            "rm ckpt/checkpoint.step2.rank1.npz",
            "ppdsl run 1f1b --pp 2 -m 2 --steps 4 --nproc-per-node 2 --resume ckpt",
            note="each rank keeps its two newest steps: the run continues from step 1",
            paddle=True,
        ),
    ),
    "E063": Explanation(
        "A run holds a lock on its `--save-dir` (`flock` on `.ppdsl.lock` in it) while it trains, so two runs never "
        "write one directory's checkpoints and a later `--resume` never continues a mix of both. The lock ends with "
        "the process that holds it, also when it is killed.",
        cmd(
            "ppdsl run 1f1b --steps 1000 --save-dir ckpt",
            "ppdsl run 1f1b --steps 10 --save-dir ckpt",
            note="the second command is typed in another terminal while the first still trains",
            paddle=True,
        ),
        cmd(
            "ppdsl run 1f1b --steps 1000 --save-dir ckpt",
            "ppdsl run 1f1b --steps 10 --save-dir other",
            note="the second command is typed in another terminal while the first still trains",
            paddle=True,
        ),
    ),
    "E064": Explanation(
        "Every pipeline stage must hold some of the model's ops. A model that places its ops by hand (`with "
        "ctx.stage(s):`, or a program of your own whose ops carry chunk ids) and leaves a stage out would train "
        "with ranks that only pass values on, their share of the work on another rank. `ctx.pipeline` refuses "
        "such a split (E039); a hand-placed model is refused the same way, naming the empty stages. Spread the "
        "layers over `ctx.num_stages` (`ctx.layer_stage(i, layers)`), or run fewer stages.",
        cmd(
            "ppdsl run 1f1b --pp 4 -m 4 --batch-size 4 --steps 1 --model ends:build",
            files=(ENDS_ONLY,),
            note="the model places ops on the first and last stages only",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --pp 2 -m 4 --batch-size 4 --steps 1 --model ends:build", files=(ENDS_ONLY,), paddle=True),
    ),
    "E065": Explanation(
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
    ),
    "E066": Explanation(
        "Includes are bounded: a chain of at most 32 files including one another, at most 1,000 `include` "
        "statements expanded and 16 MiB of included text in all, whatever the files. A file included several times "
        "is read once. The message names the chain of files, or the figure that went over.",
        cmd(
            "ppdsl check main.sched --pp 2 -m 4",
            files=(
                ("main.sched", 'include "a0.sched"\n' + GPIPE + "\n"),
                *((f"a{i}.sched", f'include "a{i + 1}.sched"\n') for i in range(33)),
                ("a33.sched", "cost forward = 1\n"),
            ),
        ),
        cmd(
            "ppdsl check main.sched --pp 2 -m 4",
            files=(("main.sched", 'include "a0.sched"\n' + GPIPE + "\n"), ("a0.sched", "cost forward = 1\n")),
        ),
    ),
    "E067": Explanation(
        "`include` reads `.sched` files only, and only regular files: a device (`/dev/zero`), a FIFO, a directory "
        "or a file of another kind (`/etc/shadow`, a `.py`) is refused before it is read, and nothing of it is "
        "shown.",
        cmd("ppdsl check main.sched --pp 2 -m 4", files=(("main.sched", 'include "/dev/zero"\n' + GPIPE + "\n"),)),
        cmd(
            "ppdsl check main.sched --pp 2 -m 4",
            files=(("main.sched", 'include "common.sched"\n' + GPIPE + "\n"), ("common.sched", "cost forward = 1\n")),
        ),
    ),
    "E068": Explanation(
        "Commands whose output grows with the sizes estimate it before they start and refuse, in well under a "
        "second, what would not fit their budget: `trace`, `expand`, `show` and `plot` hold every job (about 1 KiB "
        "each) and are bounded to 1 GiB of memory unless `--max-memory` raises it; `sweep` multiplies that by its "
        "points; `synth` bounds its problem (ranks x micro-batches x chunks) to what its time limit can search "
        "(`--max-problem` raises it). The message gives the figure and the budget.",
        cmd("ppdsl trace fthenb --pp 64 -m 16384 -o big.json"),
        cmd("ppdsl trace fthenb --pp 8 -m 64 -o small.json"),
    ),
    "E070": Explanation(
        "`--master HOST:PORT` is the rendezvous address every node of a multi-node run meets at: a host name or "
        "IPv4 address, a colon, and a TCP port from 1 to 65535. It is checked before any process starts, for "
        "Paddle's launcher would only write its error to the run directory's `launch.log`.",
        cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 10.0.0.1:99999 --dry-run"),
        cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 10.0.0.1:8090 --dry-run"),
    ),
    "E071": Explanation(
        "Node 0 of a multi-node run serves the rendezvous on the port of `--master` (on every interface), so "
        "that port must be free there; a port another process holds would make the launcher talk to that "
        "process and wait forever. Node 0 tries the port before it starts anything.",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 0",
            note="while another process listens on port 8090",
            setting="port 8090 in use",
            paddle=True,
        ),
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8091 --node-rank 0",
            note="and the same with --node-rank 1 on the other node",
            paddle=True,
        ),
    ),
    "E072": Explanation(
        "Every rank of this node must be past the rendezvous (all nodes met, the process groups made) within "
        "`--rendezvous-timeout` seconds (default 60) of the launch; otherwise ppdsl stops the launcher and its "
        "ranks rather than wait forever. Usually a node was not started, or with another `--master` or "
        "`--nnodes`; on a very loaded machine Paddle itself may need longer to start.",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 0 "
            "--rendezvous-timeout 5",
            note="no node 1 is ever started",
            paddle=True,
        ),
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 0",
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 1 --nnodes 2 --master 127.0.0.1:8090 --node-rank 1",
            note="the two commands at once, one on each node",
            paddle=True,
        ),
    ),
    "E073": Explanation(
        "`ppdsl run --nproc-per-node` received SIGTERM, SIGINT (Ctrl-C) or SIGHUP. It stopped Paddle's launcher "
        "and every rank process of this node (SIGTERM, then SIGKILL after a few seconds), and says at which step. "
        "Had ppdsl itself been killed (SIGKILL), the ranks end as well: each process is tied to its parent's "
        "life. Checkpoints written so far (`--save-dir`) are whole; continue with `--resume`.",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --steps 100000",
            note="stopped with Ctrl-C",
            setting="a signal sent while it runs",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2 --steps 100", paddle=True),
    ),
    "E075": Explanation(
        "A `cost` or `comm` declaration must give every job (each rank and chunk) a time from 0 to 1e15: a "
        "negative, infinite or undefined (NaN) cost makes the makespan and the bubble meaningless. A `memory` "
        "declaration, the `memory limit` and the host limit must be finite and not negative: the verb "
        "(`allocates`, `frees`, `keeps`, `moves`) says which way memory goes, the number how much. Zero is a time: "
        "a job that takes none (the optimizer's default), no latency, or no bandwidth term. The message names the "
        "rank where it goes wrong.",
        sched(
            """
            cost forward = 1 - rank
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 3 -m 2",
        ),
        sched(
            """
            cost forward = 1 + rank
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 3 -m 2",
        ),
    ),
    "E076": Explanation(
        "`ppdsl plot --measured PROFILE` draws a profile's jobs over a schedule's memory and title: the profile "
        "must be a run of that schedule at those sizes. A profile from `ppdsl trace` or `ppdsl run --profile` says "
        "what it measured (its `otherData`); the plot takes the schedule and sizes from there when they are left out, "
        "and refuses other ones, or jobs that are not the schedule's.",
        cmd(
            "ppdsl trace 1f1b --pp 4 -m 8 -o profile.json",
            "ppdsl plot zbv --pp 2 -m 4 --vpp 2 --measured profile.json -o timeline.png",
        ),
        cmd("ppdsl trace 1f1b --pp 4 -m 8 -o profile.json", "ppdsl plot --measured profile.json -o timeline.png"),
    ),
    "E077": Explanation(
        "The language server (`ppdsl lsp`) holds and checks a document of at most 16 MiB, the size `ppdsl check` "
        "reads of a schedule (E052). A larger one is not kept, parsed or checked: it has this one diagnostic "
        "until it is smaller (close and reopen it, or let the editor send its whole text). A schedule that large "
        "is better split into files that `include` each other.",
        cmd(
            "ppdsl lsp",
            note="a 20 MiB huge.sched opened in an editor",
            setting="an editor running the language server",
        ),
        cmd(
            "ppdsl lsp",
            note="huge.sched split into parts that `include` each other, each opened in an editor",
            setting="an editor running the language server",
        ),
    ),
    "E078": Explanation(
        "The language server (`ppdsl lsp`) reads a message of at most 97 MiB (`Content-Length`): any document it "
        "holds (E077) fits, whatever its JSON escapes. A longer length is not read, for the server would have to "
        "hold it; and what follows it cannot be framed, so the server answers with an error and exits (status 1). "
        "A length that is only wrong costs that one message: the server answers it with a parse error and reads on "
        "at the next header. A client that sends such a length has a bug; restart the server once it is fixed.",
        cmd(
            "ppdsl lsp",
            note="a client that sends `Content-Length: 99999999999` before a message",
            setting="an editor running the language server",
        ),
        cmd(
            "ppdsl lsp",
            note="a client that sends each message's length in bytes of its UTF-8 body",
            setting="an editor running the language server",
        ),
    ),
    "E080": Explanation(
        "A `memory` declaration says what a job of its type does to memory, with the verb of that type: a compute "
        "job `allocates` or `frees` (`memory forward allocates 2`); a recompute says what its forward `keeps` "
        "for it (the stage input: `memory recompute keeps 0.1`), an offload what it `moves` to the host "
        "(`memory offload moves 0.5`). A reload brings back what its offload moved, so it has no declaration.",
        sched(
            """
            memory recompute allocates 1
            order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            memory recompute keeps 0.1
            order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "E081": Explanation(
        "`memory <subject> <setting> = ...` names a memory setting: `memory host limit` (the host memory all "
        "ranks' offloads may hold together), `memory recompute fraction` and `memory offload fraction` (the part "
        "of a micro-batch's activations each recompute rebuilds or each offload moves). Nothing else is one.",
        sched(
            """
            memory reload fraction = 0.5
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            memory offload fraction = 0.5
            order { forward * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "E082": Explanation(
        "A memory action's fraction (`memory recompute fraction = 0.5`) is the part of a (chunk, micro-batch)'s "
        "activations it handles: a literal number above 0 and at most 1, the same for every such job of the "
        "schedule (the runtime builds one partial program for it). Which micro-batches are recomputed or "
        "offloaded at all is the order's choice.",
        sched(
            """
            memory recompute fraction = 1.5
            order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            memory recompute fraction = 0.5
            order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "E083": Explanation(
        "The synthesizer's engines (greedy, CP-SAT, windows, periodic) time forwards and backwards only; a "
        "schedule with recompute, offload or reload jobs is checked and simulated by `ppdsl check` and "
        "`ppdsl plot`, whose executor models the copy stream, but synth refuses it rather than time it wrongly.",
        cmd(
            "python -c 'import ppdsl; from ppdsl.synth.problem import problem_from_expansion as p; "
            'p(ppdsl.expand("recompute.sched", pp=2, microbatches=2), "looped", "auto")\'',
            note="(through the Python API only: the command line's synth never reads a schedule)",
            setting="a Python caller handing synth a schedule with memory actions",
        ),
        cmd("ppdsl synth --pp 4 -m 8 --memory-limit 4 --time-limit 1 -o found.sched"),
    ),
    "E084": Explanation(
        "`--memory-actions` lists what the search may do to a (stage, micro-batch)'s activations besides keeping "
        "them: `recompute` (keep the stage input, re-run the forward before the backward) and `offload` (copy them "
        "to host memory after the forward, back before the backward), comma-separated.",
        cmd("ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions swap -o found.sched"),
        cmd("ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions recompute --time-limit 1 -o found.sched"),
    ),
    "E086": Explanation(
        "A recompute re-runs the forward of its (chunk, micro-batch), so it comes after that forward; an offload "
        "copies the forward's activations to the host store and frees them, so it too comes after the forward, and "
        "the backward of that (chunk, micro-batch) must wait for the reload that copies them back (of the same "
        "fraction, so that it copies back what was moved). The runtime checks this for every rank before it builds "
        "the plan: out of order, a job would read activations that were never made or already freed. `ppdsl check` "
        "refuses such a schedule first (S115-S117); a plan built from Python without a check meets this.",
        cmd(
            "python -c 'from ppdsl.runtime.plan import build_plan; ...'",
            note="a rank's order: F0 offload0 B0 (the backward before the reload)",
            setting="a plan built from Python with memory jobs",
            paddle=True,
        ),
        cmd(
            "python -c 'from ppdsl.runtime.plan import build_plan; ...'",
            note="a rank's order: F0 offload0 reload0 B0",
            setting="a plan built from Python with memory jobs",
            paddle=True,
        ),
    ),
    "E088": Explanation(
        "A memory limit is read in the unit memory is counted in, and says which one it is: without --model memory is "
        "counted in activations (a forward holds 1), so the limit is a bare number; with --model it is measured in "
        "bytes, so the limit carries a unit (`2GiB`, `4096B`). A limit in the other unit is refused rather than "
        "read as a number of this one (`2GiB` is not 2147483648 activations). A schedule's own `memory limit` "
        "counts activations: under --model, give the limit in bytes with --memory-limit, which replaces it.",
        cmd("ppdsl check 1f1b --pp 4 -m 8 --memory-limit 2GiB"),
        cmd("ppdsl check 1f1b --pp 4 -m 8 --memory-limit 4"),
    ),
    "E090": Explanation(
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
    ),
    "E091": Explanation(
        "`ppdsl run --nproc-per-node` writes the checked schedule's plan specification into the launch's "
        "directory (`plan.json`) and every rank builds its plan from it, not from the `.sched` file. A rank refuses "
        "a file that is not a whole plan of this ppdsl's format (not JSON, another format version, a field of the "
        "wrong kind, a job or stage out of range) rather than train something half read.",
        cmd(
            "ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2",
            note="while its ranks start, `plan.json` of the launch is overwritten",
            setting="a launch's plan.json replaced while its ranks start",
            paddle=True,
        ),
        cmd("ppdsl run 1f1b --pp 2 -m 4 --nproc-per-node 2", paddle=True),
    ),
    "E096": Explanation(
        "`ppdsl fmt` formats the files it is named and the `.sched` files under the directories it is named "
        "(hidden directories skipped); with no path, those under the working directory. When all the paths together "
        "hold no `.sched` file, a path is probably wrong (a typo, the wrong directory), and nothing is done.",
        cmd("ppdsl fmt .", files=(("notes.txt", "not a schedule\n"),)),
        cmd("ppdsl fmt .", files=(("notes.txt", "not a schedule\n"), (SCHED, GPIPE + "\n"))),
    ),
    "E097": Explanation(
        "`ppdsl fmt` changes only whitespace, and proves it before it writes: the formatted text must parse and "
        "hold the same tokens and comments in the same order. This never fails unless the formatter has a bug: the "
        "file is left as it was, and the other files are formatted. Please report it with the file.",
        cmd("ppdsl fmt example.sched", note="(only with a bug in ppdsl fmt)", setting="a bug in ppdsl fmt"),
        cmd("ppdsl fmt example.sched", files=((SCHED, GPIPE + "\n"),)),
    ),
    "E098": Explanation(
        "The language server (`ppdsl lsp`) checks a file at the sizes of its `# ppdsl:` line, written as `ppdsl "
        "check` takes them: `--pp` and `-m` (`--microbatches`), and optionally `--vpp`, `--param name=value`, "
        "`--rendezvous`, `--cost`, `--memory-limit` and `--max-jobs`. A directive with another option, a size that "
        "is not an integer from 1 up, a `--max-jobs` above `ppdsl check`'s default (a file may lower what the server "
        "takes on, not raise it), or without `--pp` and `-m` is reported on its line, and the file is checked "
        "at the workspace settings' or the default sizes (pp 4, microbatches 8) instead.",
        cmd(
            "ppdsl lsp",
            files=(("example.sched", "# ppdsl: --pp four -m 8\n" + GPIPE + "\n"),),
            note="example.sched opened in an editor",
            setting="an editor running the language server",
        ),
        cmd(
            "ppdsl lsp",
            files=(("example.sched", "# ppdsl: --pp 4 -m 8\n" + GPIPE + "\n"),),
            note="example.sched opened in an editor",
            setting="an editor running the language server",
        ),
    ),
    "E099": Explanation(
        "The language server speaks the Language Server Protocol through pygls, an optional dependency (the `lsp` "
        "extra; the `test` extra has it too). Every other command works without it.",
        cmd("ppdsl lsp", note="in an environment without pygls", setting="pygls not installed"),
        cmd("pip install 'ppdsl[lsp]'", "ppdsl lsp", setting="network"),
    ),
    "E100": Explanation(
        "A layer profile lists the model's layers in order, each with its forward, input-gradient backward "
        "(`backward_b`) and weight-gradient backward (`backward_w`) time, in one of two JSON forms: ppdsl's own, "
        '`{"layers": [{"name": "T", "forward": 1.7, "backward_b": 2.0, "backward_w": 1.1}, ...]}` (with optional '
        "`activation` and `params` per layer), or the compact form of public profile collections, a `pattern` of one "
        "letter per layer with per-letter `forward_ms`, `backward_ms` and `weight_ms` (and optional `activation` / "
        "`params`). A field missing, unknown or of the wrong kind is refused, located in the file, rather than read "
        "as zero.",
        cmd(
            "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
            files=(("model.json", '{"layers": [{"name": "T", "forward": 1}, {"name": "T", "forward": 1}]}\n'),),
            note="the layers give no backward times",
        ),
        cmd(
            "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
            files=(
                (
                    "model.json",
                    '{"layers": [{"name": "T", "forward": 1, "backward_b": 1, "backward_w": 1}, '
                    '{"name": "T", "forward": 1, "backward_b": 1, "backward_w": 1}]}\n',
                ),
            ),
        ),
    ),
    "E101": Explanation(
        "Every time and memory amount of a layer profile is a finite number from 0 to 1e15: a negative time would "
        "make a stage faster for holding more, and JSON has no NaN (ppdsl refuses it where a reader would accept it).",
        cmd(
            "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
            files=(
                (
                    "model.json",
                    '{"pattern": "TT", "forward_ms": {"T": -1.0}, "backward_ms": {"T": 2.0}, '
                    '"weight_ms": {"T": 1.0}}\n',
                ),
            ),
        ),
        cmd(
            "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
            files=(
                (
                    "model.json",
                    '{"pattern": "TT", "forward_ms": {"T": 1.0}, "backward_ms": {"T": 2.0}, "weight_ms": {"T": 1.0}}\n',
                ),
            ),
        ),
    ),
    "E102": Explanation(
        "In a profile's compact form each letter of `pattern` is one layer, and its times are looked up by that "
        "letter in `forward_ms`, `backward_ms` and `weight_ms`. A letter none of them gives would be a layer of "
        "unknown cost: the diagnostic points at it in the pattern.",
        cmd(
            "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
            files=(
                (
                    "model.json",
                    '{"pattern": "ETTL", "forward_ms": {"E": 2, "T": 1}, "backward_ms": {"E": 1, "T": 2}, '
                    '"weight_ms": {"E": 0, "T": 1}}\n',
                ),
            ),
            note="`L` (the head) has no times",
        ),
        cmd(
            "ppdsl check 1f1b --pp 2 -m 4 --layers model.json",
            files=(
                (
                    "model.json",
                    '{"pattern": "ETTL", "forward_ms": {"E": 2, "T": 1, "L": 3}, '
                    '"backward_ms": {"E": 1, "T": 2, "L": 2}, '
                    '"weight_ms": {"E": 0, "T": 1, "L": 0}}\n',
                ),
            ),
        ),
    ),
    "E103": Explanation(
        "A partition says how many of the model's layers each virtual stage holds, in stage order: `9,10,9,6` (on the "
        "command line) or `partition = [9, 10, 9, 6]` (in a file). It may also be a Megatron-LM layout string, as "
        '`--pipeline-model-parallel-layout` takes it: `"Et*8|t*9|t*8|t*7L"`, `E` the embedding, `t` a transformer '
        "block, `L` the loss and head, `|` between stages, `x*n` and `(...)*n` repeats. Anything else is refused, "
        "and so is Megatron's `m` (a multi-token prediction layer), which a layer profile does not describe.",
        cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 3;3;3;3"),
        cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 3,3,3,3"),
    ),
    "E104": Explanation(
        "A partition has one entry per virtual stage (pp x vpp of them, in stage order), places every layer of the "
        "profile (the embedding and the head are layers too), and, written as a Megatron layout, names each layer's "
        "kind as the profile has it. A partition that does not fit is refused rather than padded or cut.",
        cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 4,4,4"),
        cmd("ppdsl check 1f1b --pp 4 -m 8 --partition 4,4,4,4"),
    ),
    "E105": Explanation(
        "A stage without layers still receives every micro-batch and sends it on, so it costs a rank and a hop and "
        "does nothing; in Megatron-LM such layouts have deadlocked (Megatron-LM #1852). It is refused unless the "
        "partition says it is meant: `partition = [...] allow empty` in the file.",
        sched(
            """
            partition = [5, 0, 5, 4]
            order { forward * microbatches backward * microbatches optimizer }
            """,
            "--pp 4 -m 8",
        ),
        sched(
            """
            partition = [5, 0, 5, 4] allow empty
            order { forward * microbatches backward * microbatches optimizer }
            """,
            "--pp 4 -m 8",
        ),
    ),
    "E106": Explanation(
        "`ppdsl expand FILE --format megatron-layout` writes the schedule's partition as Megatron-LM's "
        "`--pipeline-model-parallel-layout`. It needs a partition (`--partition`, `--layers`, or the file's "
        "`partition`), a looped placement (Megatron puts virtual stage v * pp + r on rank r: a V-shaped placement "
        "cannot be said), and a model of an embedding first, transformer blocks and a loss last, the layer kinds "
        "the layout names.",
        cmd("ppdsl expand 1f1b --pp 4 -m 8 --format megatron-layout"),
        cmd("ppdsl expand 1f1b --pp 4 -m 8 --partition 5,5,5,4 --format megatron-layout"),
    ),
    "E110": Explanation(
        "Recompute, offload and reload jobs are placed by synth only when `--memory-actions` lets the search choose "
        "them; without it the costs of those jobs would time nothing, which is more likely a forgotten option than "
        "an intent. (A cost file's memory-action costs are left out instead: it may be calibrated on a run with them.)",
        cmd("ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --cost offload=0.25,reload=0.25 --time-limit 1 -o found.sched"),
        cmd(
            "ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions offload --cost offload=0.25,reload=0.25 "
            "--time-limit 1 -o found.sched"
        ),
    ),
    "E111": Explanation(
        "A cost file (`ppdsl calibrate`) gives times in seconds (or its `unit`), while an offload or reload nobody "
        "gave a cost takes the built-in 0.5, an abstract unit: half a second beside millisecond forwards, which would "
        "make offloading look useless. The copies' times must come from the same measurement or the command line.",
        cmd(
            "ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions offload --costs costs.json --time-limit 1 "
            "-o found.sched",
            files=(("costs.json", '{"unit": "s", "costs": {"forward": 0.001, "backward": 0.002}}\n'),),
        ),
        cmd(
            "ppdsl synth --pp 2 -m 4 --memory-limit 1.5 --memory-actions offload --costs costs.json "
            "--cost offload=0.0005,reload=0.0005 --time-limit 1 -o found.sched",
            files=(("costs.json", '{"unit": "s", "costs": {"forward": 0.001, "backward": 0.002}}\n'),),
        ),
    ),
    "S100": Explanation(
        "A `require` states the sizes a schedule is written for; it is false for the sizes given, so the schedule is "
        "not defined there. The message is the schedule's own.",
        sched(
            """
            require microbatches >= pp : "needs at least as many micro-batches as stages"

            order {
                let warmup = min(pp - rank - 1, microbatches)
                forward * warmup
                repeat microbatches - warmup { forward backward }
                backward * warmup
                optimizer
            }
            """,
            "--pp 4 -m 2",
        ),
        sched(
            """
            require microbatches >= pp : "needs at least as many micro-batches as stages"

            order {
                let warmup = min(pp - rank - 1, microbatches)
                forward * warmup
                repeat microbatches - warmup { forward backward }
                backward * warmup
                optimizer
            }
            """,
            "--pp 4 -m 4",
        ),
    ),
    "S101": Explanation(
        "Every rank runs, for each of its chunks and every micro-batch, a forward and a backward (whole, or "
        "`backward_b` + `backward_w`), and one of each auxiliary job type the schedule uses. Some are missing: "
        "usually a count that is too small for these sizes.",
        sched(
            """
            order {
                forward * microbatches
                backward * (microbatches - 1)
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S102": Explanation(
        "A job runs once per rank, chunk and micro-batch. Here one runs twice (an explicit `mb = K` does not move "
        "the job type's counter, so the next plain job takes the same micro-batch again), or a micro-batch has both "
        "a whole backward and a split one.",
        sched(
            """
            order {
                forward(mb = 0)
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward(mb = 0)
                for i in 1 .. microbatches { forward(mb = i) }
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S103": Explanation(
        "Within a rank, a backward needs its own forward's activations, a weight gradient (`backward_w`) comes after "
        "its input gradient (`backward_b`), and an auxiliary job keeps its declared `before` / `after` side of the "
        "job it serves. A rank that would wait for a job it runs later itself is reported here too.",
        sched(
            """
            order {
                backward(mb = 0)
                forward * microbatches
                backward * (microbatches - 1)
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S104": Explanation(
        "Each rank runs the optimizer once, as its last job: it applies the gradients every micro-batch accumulated.",
        sched(
            """
            order {
                forward * microbatches
                optimizer
                backward * microbatches
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S105": Explanation(
        "Run together, the ranks wait for each other in a cycle: each waits to receive an activation or gradient "
        "that the next one sends only later. The notes give the cycle and the rank x step grid with the job each "
        "rank is stuck at. With `--rendezvous` a send also waits for its receive.",
        sched(
            """
            order {
                if rank == 0 {
                    repeat microbatches { forward backward }
                } else {
                    forward * microbatches
                    backward * microbatches
                }
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                let warmup = min(pp - rank - 1, microbatches)
                forward * warmup
                repeat microbatches - warmup { forward backward }
                backward * warmup
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S106": Explanation(
        "A rank holds more in-flight activations than its `memory limit` (or `--memory-limit`): a forward allocates "
        "its activations and its backward frees them, so each forward run ahead of a backward adds to the peak.",
        sched(
            """
            memory limit = pp - rank
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            memory limit = pp - rank

            order {
                let warmup = min(pp - rank - 1, microbatches)
                forward * warmup
                repeat microbatches - warmup { forward backward }
                backward * warmup
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S107": Explanation(
        "Micro-batches are numbered 0 .. microbatches - 1. A job with another number (an explicit `mb = K`, or a "
        "counter run past the end) does not exist at these sizes.",
        sched(
            """
            order {
                forward * microbatches
                backward(mb = microbatches)
                backward * (microbatches - 1)
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward * microbatches
                backward(mb = microbatches - 1)
                backward * (microbatches - 1)
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S108": Explanation(
        "Each rank holds chunks 0 .. vpp - 1. A job on another chunk does not exist at these sizes: the chunk "
        "expression, or the `chunk` loop, goes past `vpp`.",
        sched(
            """
            order {
                for chunk in 0 .. 2 { forward * microbatches }
                for c in 0 .. 2 { backward(chunk = 1 - c) * microbatches }
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                for chunk in 0 .. vpp { forward * microbatches }
                for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches }
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S109": Explanation(
        "`placement stage = EXPR` must give every (rank, chunk) its own global stage, covering 0 .. pp * vpp - 1 "
        "exactly once.",
        sched(
            """
            placement stage = rank
            order {
                for chunk in 0 .. vpp { forward * microbatches }
                for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches }
                optimizer
            }
            """,
            "--pp 2 -m 4 --vpp 2",
        ),
        sched(
            """
            placement stage = rank * vpp + chunk
            order {
                for chunk in 0 .. vpp { forward * microbatches }
                for c in 0 .. vpp { backward(chunk = vpp - 1 - c) * microbatches }
                optimizer
            }
            """,
            "--pp 2 -m 4 --vpp 2",
        ),
    ),
    "S110": Explanation(
        "A `repeat` count, a `* N` count or a `for` range evaluates to a negative number, or to more iterations "
        "than any complete schedule needs at these sizes. A count that can go negative for some sizes needs "
        "`max(0, ...)` or a `require`.",
        sched(
            """
            order {
                forward * (pp - rank - 2)
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S111": Explanation(
        "Evaluating an expression at these sizes divides by zero, or makes a number too large to use.",
        sched(
            """
            order {
                let per_rank = microbatches // (rank - 1)
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                let per_rank = microbatches // max(1, rank - 1)
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S112": Explanation(
        "A schedule written as `table`s has rows for the sizes its tables are for: the first table whose `when` "
        "holds is used, and it needs a row for every rank. None fits the sizes given.",
        sched(
            """
            table {
                rank 0: F0 F1 B0 B1 optimizer
                rank 1: F0 B0 F1 B1 optimizer
            }
            """,
            "--pp 4 -m 2",
        ),
        sched(
            """
            table {
                rank 0: F0 F1 B0 B1 optimizer
                rank 1: F0 B0 F1 B1 optimizer
            }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "S113": Explanation(
        "A rank's order may take a number of evaluation steps (a statement, or a function call) proportional to "
        "the jobs the rank owns at these sizes: 16 per job plus 65,536. Far more than any schedule needs, it stops "
        "an order whose loops run away (loops inside loops multiply) in well under a second, at the loop that "
        "runs out.",
        sched(
            """
            order {
                for a in 0 .. 4000 {
                    for b in 0 .. 4000 {
                        if a == 0 and b == 0 { forward * microbatches backward * microbatches }
                    }
                }
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
        sched(
            """
            order {
                forward * microbatches
                backward * microbatches
                optimizer
            }
            """,
            "--pp 2 -m 4",
        ),
    ),
    "S114": Explanation(
        "`ppdsl synth` found no schedule within the memory limit, because there is none: a rank's first stage keeps "
        "a micro-batch's activation until its backward there, which comes after the micro-batch's forwards on all "
        "of the rank's later stages, so every schedule holds one micro-batch's forwards on all of a rank's stages "
        "at once (two chunk activations for a V). The message says how much that is.",
        cmd("ppdsl synth --pp 4 -m 8 --vpp 2 --placement vshape --memory-limit 1.5 --time-limit 1 -o found.sched"),
        cmd("ppdsl synth --pp 4 -m 8 --vpp 2 --placement vshape --memory-limit 2 --time-limit 1 -o found.sched"),
    ),
    "S115": Explanation(
        "A `recompute` re-runs a (chunk, micro-batch)'s forward ops from the stage input its forward kept, so that "
        "the backward finds the activations: it runs after that forward and before that backward (or backward_b) "
        "on the rank. It need not wait for the gradient: placed before the backward, it fills the wait for it.",
        sched(
            """
            order { forward * microbatches  backward * microbatches  recompute * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            order { forward * microbatches  recompute * microbatches  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "S116": Explanation(
        "An `offload` copies a (chunk, micro-batch)'s activations to host memory after its forward made them, on the "
        "rank's copy stream: before the forward there is nothing to copy, and after the backward nothing is left.",
        sched(
            """
            order { repeat microbatches { offload forward }  repeat microbatches { reload backward }  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "S117": Explanation(
        "A `reload` copies back what its (chunk, micro-batch)'s `offload` moved to the host, for the backward: it "
        "runs after that offload and before that backward (early enough, the copy hides behind compute).",
        sched(
            """
            order { forward * microbatches  repeat microbatches { reload backward }  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "S118": Explanation(
        "After an `offload`, a (chunk, micro-batch)'s activations are on the host: its backward cannot run until a "
        "`reload` has brought them back, so every offloaded micro-batch has a reload before its backward.",
        sched(
            """
            order { repeat microbatches { forward offload }  backward * microbatches  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
    "S119": Explanation(
        "Offloaded activations are held in host memory from the offload's copy until the reload's copy ends; "
        "`memory host limit` bounds what all ranks hold there together. The message names the offload whose copy "
        "takes the host over the limit, and when.",
        sched(
            """
            memory host limit = 2
            order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
            """,
            "--pp 2 -m 2",
        ),
        sched(
            """
            memory host limit = 4
            order { repeat microbatches { forward offload }  repeat microbatches { reload backward }  optimizer }
            """,
            "--pp 2 -m 2",
        ),
    ),
}
