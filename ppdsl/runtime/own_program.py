"""Your own Paddle static program under a ppdsl plan: op roles, the loss, gradients accumulated over micro-batches.

A plan runs a program's forward and backward once per micro-batch and its optimizer once per step, so it needs
each op's role (`op_role`: 0 forward, 1 backward, 2 optimizer). Ops built outside Paddle's `pir_op_role_guard`
carry none (-1), and Paddle's passes then stop with a bare `AssertionError: first_left_op_role can't be -1`.
`set_op_roles(main, loss)` gives a program built the usual way (`optimizer.minimize(loss)`) its roles in one call;
`build_plan` (the pass and every plan module) checks them first (E044).

Paddle does not accumulate gradients across micro-batches in a plain program: the optimizer silently steps on
micro-batch 0's gradient alone. So where a program has no accumulation (no `grad_merge_add` op, which Paddle's
gradient-merge pass and `ppdsl.runtime.program` write), `prepare_own_program` adds it: every gradient the
optimizer reads is added into a persistable `<param>@GRAD@MERGE` (zeros from the startup program, which must run
after the plan is built), the optimizer reads `accumulator / microbatches` (the mean: the full batch's gradient
for a mean loss) and the accumulator is reset after it. The loss, found as the value the backward seeds, is
named `ppdsl.loss` so the plan's `loss_value` can be fetched.
"""

from __future__ import annotations

import itertools

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, SourceCache, render_all
from ppdsl.runtime.env import import_paddle
from ppdsl.runtime.program import BACKWARD_ROLE, FORWARD_ROLE, LOSS_NAME, MERGE_SUFFIX, OPTIMIZE_ROLE

NO_ROLE = -1
ROLES_HELP = (
    "after `optimizer.minimize(loss)`, call `ppdsl.runtime.own_program.set_op_roles(main_program, loss)`; or build "
    "the forward, `optimizer.backward(loss)` and `optimizer.apply_gradients(...)` under "
    "`paddle.base.framework.pir_op_role_guard(0)`, `(1)` and `(2)`"
)
_SOURCE_OPS = ("pd_op.data", "builtin.parameter")


class ProgramError(DiagnosticError):
    """A program a plan cannot use; `str()` is the rendered diagnostic (`error[E044]: ...` and its help), which
    a Python traceback shows."""

    def __str__(self) -> str:
        return render_all(self.diagnostics, SourceCache())


def _is_gradient_op(op) -> bool:
    return op.name().endswith(("_grad", "_grad_"))


def _backward_start(ops, loss) -> int:
    """Index of the first backward op: the op seeding the loss's gradient (`full_like(loss, 1)`) and the
    constants it reads."""
    loss_op = loss.get_defining_op()
    index = {op: i for i, op in enumerate(ops)}
    if loss_op not in index:
        raise ProgramError(
            [Diagnostic("E044", "the loss given to `set_op_roles` is not a value of this program", help=ROLES_HELP)]
        )
    after = index[loss_op] + 1
    for i in range(after, len(ops)):
        op = ops[i]
        if op.name() == "pd_op.full_like" and op.operand_source(0).is_same(loss):
            feeding = [index.get(op.operand_source(k).get_defining_op()) for k in range(1, op.num_operands())]
            return min([i, *[j for j in feeding if j is not None and j >= after]])
    return after


def set_op_roles(main, loss) -> None:
    """Give every op of `main` (a PIR program built with `optimizer.minimize(loss)`) its role, in place: the ops
    up to the backward's seed are forward, those up to the last gradient op backward, the rest optimizer.

    An op after the last gradient op that combines gradients (an `add_n` of a shared weight's parts, a clip) is
    then an optimizer op: it runs once on the accumulated gradients, which is what the full batch computes.

    `ppdsl.runtime.paddle_pass` exports it too: imported from there, Paddle's `apply_pass` takes ppdsl's modes."""
    ops = list(main.global_block().ops)
    start = _backward_start(ops, loss)
    gradient = [i for i, op in enumerate(ops) if i >= start and _is_gradient_op(op)]
    if not gradient:
        raise ProgramError(
            [
                Diagnostic(
                    "E044",
                    "the program has no backward: no gradient op follows the loss",
                    help="call `set_op_roles` after `optimizer.minimize(loss)` (or `optimizer.backward(loss)`)",
                )
            ]
        )
    last = gradient[-1]
    for i, op in enumerate(ops):
        if op.name() in _SOURCE_OPS or i < start:
            op.op_role = FORWARD_ROLE
        elif i <= last:
            op.op_role = BACKWARD_ROLE
        else:
            op.op_role = OPTIMIZE_ROLE


def check_roles(main) -> None:
    """E044 unless every region a plan needs is there: forward, backward and optimizer ops, each op with a role or
    between two ops of one role (what Paddle's `forward_complete_op_role` fills in)."""
    ops = list(main.global_block().ops)
    roles = [op.op_role for op in ops]
    if all(role == NO_ROLE for role in roles):
        raise ProgramError(
            [
                Diagnostic(
                    "E044",
                    f"no op of the program has an op role (all {len(ops)} are -1): a plan cannot tell its forward, "
                    "backward and optimizer apart",
                    help=ROLES_HELP,
                )
            ]
        )
    missing = [name for role, name in ((0, "forward"), (1, "backward"), (2, "optimizer")) if role not in roles]
    if missing:
        raise ProgramError(
            [
                Diagnostic(
                    "E044",
                    f"the program has no {' and no '.join(missing)} ops (op_role "
                    f"{', '.join(str(r) for r in sorted(set(roles)))} only)",
                    help=ROLES_HELP,
                )
            ]
        )
    known = [(i, role) for i, role in enumerate(roles) if role != NO_ROLE]
    if known[-1][0] < len(ops) - 1:
        last = known[-1][0] + 1
        raise ProgramError(
            [
                Diagnostic(
                    "E044",
                    f"the last {len(ops) - last} ops (first `{ops[last].name()}`) have no op role: nothing after "
                    "them says which region they belong to",
                    help=ROLES_HELP,
                )
            ]
        )
    for (i, left), (j, right) in itertools.pairwise(known):
        if j > i + 1 and left != right:
            raise ProgramError(
                [
                    Diagnostic(
                        "E044",
                        f"ops {i + 1} .. {j - 1} (first `{ops[i + 1].name()}`) have no op role and lie between a "
                        f"role-{left} op and a role-{right} op: their role is ambiguous",
                        help=ROLES_HELP,
                    )
                ]
            )


def accumulates(main) -> bool:
    """Whether the program already adds each micro-batch's gradients into accumulators."""
    return any(op.has_attr("grad_merge_add") for op in main.global_block().ops)


def find_loss(main):
    """The value the backward seeds (`full_like(loss, 1)`, the first such backward op), or None."""
    for op in main.global_block().ops:
        if op.op_role == BACKWARD_ROLE and op.name() == "pd_op.full_like":
            source = op.operand_source(0)
            producer = source.get_defining_op()
            if producer is not None and producer.op_role == FORWARD_ROLE:
                return source
    return None


def name_loss(main) -> bool:
    """Name the loss `ppdsl.loss` (unless some value is named so), so a plan's `loss_value` can fetch it."""
    paddle = import_paddle()
    block = main.global_block()
    for op in block.ops:
        if op.name() == "builtin.shadow_output" and op.attrs()["output_name"] == LOSS_NAME:
            return True
    loss = find_loss(main)
    if loss is None:
        return False
    from paddle.base.framework import pir_chunk_id_guard, pir_op_role_guard

    producer = loss.get_defining_op()
    paddle.pir.set_insertion_point_after(producer)
    chunk = producer.chunk_id if producer.has_attr("chunk_id") else -1
    with pir_op_role_guard(FORWARD_ROLE), pir_chunk_id_guard(chunk):
        paddle._C_ops.set_persistable_value(loss, LOSS_NAME)
    paddle.pir.set_insertion_point_to_block_end(block)
    return True


def _gradients(ops) -> list[tuple[object, list]]:
    """(gradient value, the optimizer ops' operands reading it): the values backward ops compute and optimizer ops
    read, in program order."""
    out: dict[int, tuple[object, list]] = {}
    order = []
    for op in ops:
        if op.op_role != OPTIMIZE_ROLE:
            continue
        for k in range(op.num_operands()):
            value = op.operand_source(k)
            producer = value.get_defining_op()
            if producer is None or producer.op_role != BACKWARD_ROLE:
                continue
            key = value.id
            if key not in out:
                out[key] = (value, [])
                order.append(key)
            out[key][1].append(op.operand(k))
    return [out[k] for k in order]


def _parameter_of(value, optimizer_ops) -> str:
    """The name an accumulator of `value` takes: the parameter an optimizer op updates with it, else the value's
    position (a gradient that reaches the optimizer through a clip or a sum)."""
    for op in value.all_used_ops():
        if op in optimizer_ops and op.num_operands():
            producer = op.operand_source(0).get_defining_op()
            if producer is not None and producer.name() == "builtin.parameter":
                return producer.attrs()["parameter_name"]
    return f"ppdsl.grad{value.id}"


def accumulate_gradients(main, startup, microbatches: int) -> int:
    """Accumulate every gradient the optimizer reads over the micro-batches, in place (see the module text); the
    number of accumulators. Nothing to do for one micro-batch or a program that accumulates already."""
    if microbatches <= 1 or accumulates(main):
        return 0
    paddle = import_paddle()
    from paddle.base import core
    from paddle.base.framework import pir_chunk_id_guard, pir_op_role_guard

    block = main.global_block()
    ops = list(block.ops)
    optimizer_ops = [op for op in ops if op.op_role == OPTIMIZE_ROLE]
    gradients = _gradients(ops)
    if not gradients:
        return 0
    if startup is None:
        raise ProgramError(
            [
                Diagnostic(
                    "E044",
                    f"the program does not accumulate gradients over its {microbatches} micro-batches, and no startup "
                    "program was given to create the accumulators",
                    help="pass the startup program (`apply_pass(main, startup, ...)`, `prepare(main, startup, ...)`) "
                    "and run it after the plan is built",
                )
            ]
        )
    place = core.Place()
    place.set_place(paddle.CPUPlace())
    sblock = startup.global_block()
    have = {op.attrs()["output_name"] for op in sblock.ops if op.name() == "builtin.shadow_output"}
    first_optimizer = optimizer_ops[0]
    accumulators = []
    for value, operands in gradients:
        name = _parameter_of(value, optimizer_ops) + MERGE_SUFFIX
        if name not in have:  # a startup shared by several builds (one per rank) gets each accumulator once
            paddle.pir.set_insertion_point_to_block_end(sblock)
            zeros = paddle.full(value.shape, 0.0, value.dtype)
            zeros.persistable = True
            paddle.pir.set_insertion_point_after(zeros.get_defining_op())
            paddle._C_ops.set_persistable_value(zeros, name)
            have.add(name)
        acc = block.add_kwarg(name, value.type())
        acc.persistable = True
        acc.place_attr = place
        producer = value.get_defining_op()
        chunk = producer.chunk_id if producer.has_attr("chunk_id") else -1
        paddle.pir.set_insertion_point_after(producer)
        with pir_op_role_guard(BACKWARD_ROLE), pir_chunk_id_guard(chunk):
            paddle._C_ops.add_(acc, value)
        add_op = [op for op in acc.all_used_ops() if op.name() == "pd_op.add_"][-1]
        add_op.set_bool_attr("grad_merge_add", True)  # Paddle's backward splitter and `accumulates` look for it
        paddle.pir.set_insertion_point(first_optimizer)
        reader_chunk = operands[0].owner().chunk_id if operands[0].owner().has_attr("chunk_id") else chunk
        with pir_op_role_guard(OPTIMIZE_ROLE), pir_chunk_id_guard(reader_chunk):
            mean = paddle.scale(acc, 1.0 / microbatches)
        for operand in operands:
            operand.set_source(mean)
        accumulators.append((acc, reader_chunk))
    paddle.pir.set_insertion_point_to_block_end(block)
    for acc, chunk in accumulators:  # reset for the next step, after every optimizer op has read the mean
        with pir_op_role_guard(OPTIMIZE_ROLE), pir_chunk_id_guard(chunk):
            paddle._C_ops.scale_(acc, 0.0, 0.0, False)
    return len(accumulators)


def loss_value(plan):
    """The loss Value to fetch from a `core.Plan` (as `exe.run(main, feed=..., fetch_list=[loss_value(plan)])`):
    the one that the job program computing it names `ppdsl.loss`; the run returns one loss per micro-batch."""
    for job_type in plan.job_types():
        for op in plan.ir_program(job_type).global_block().ops:
            if op.name() == "builtin.shadow_output" and op.attrs()["output_name"] == LOSS_NAME:
                return op.operand_source(0)
    raise ProgramError(
        [
            Diagnostic(
                "E044",
                "no job program of the plan computes a loss named `ppdsl.loss`: ppdsl's pass names it (modes "
                "`ppdsl:<schedule>`), Paddle's own passes (`1F1B`, `FThenB`, `VPP`) do not, and their plan of a "
                "program of your own steps its optimizer on micro-batch 0's gradient alone",
                help='plan with `apply_pass(main, startup, "ppdsl:1f1b", attrs)` (Paddle\'s 1F1B order, gradients '
                "accumulated; `ppdsl:fthenb` and `ppdsl:vpp` for the others), after `set_op_roles(main, loss)`",
            )
        ]
    )


def prepare_own_program(main, startup, microbatches: int) -> None:
    """What `build_plan` does to any program before planning it: roles checked (E044); where the program does not
    accumulate gradients already, the loss named and gradients accumulated over the micro-batches."""
    check_roles(main)
    if accumulates(main):
        # built by ppdsl (whose loss is named) or by Paddle's engine (which fetches its loss itself, and whose
        # scope has no variable for a name added here)
        return
    name_loss(main)
    accumulate_gradients(main, startup, microbatches)


__all__ = [
    "ProgramError",
    "accumulate_gradients",
    "accumulates",
    "check_roles",
    "find_loss",
    "loss_value",
    "name_loss",
    "prepare_own_program",
    "set_op_roles",
]
