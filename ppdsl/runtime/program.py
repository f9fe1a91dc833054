"""The training program a schedule runs: forward (role 0), backward (role 1), optimizer (role 2), every op on a
stage (Paddle's chunk id), with gradient accumulation across micro-batches.

Paddle does not accumulate gradients for plain (non-auto-parallel) programs: without it the optimizer silently
sees micro-batch 0's gradient only. So every parameter gets a persistable `<name>@GRAD@MERGE` accumulator that
the backward adds into, the optimizer steps on `accumulator / microbatches`, and resets to zero, the way
Paddle's gradient-merge pass does for auto-parallel programs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.runtime.model import Model, ModelContext, build_loss

FORWARD_ROLE, BACKWARD_ROLE, OPTIMIZE_ROLE = 0, 1, 2
LOSS_NAME = "ppdsl.loss"
MERGE_SUFFIX = "@GRAD@MERGE"
UNSEEDED_STANDIN = 2**31 - 1  # the program seed used for seed 0


@dataclass
class TrainingProgram:
    main: object
    startup: object
    loss: object  # the loss Value of `main`
    inputs: dict[str, tuple[list[int], str]]  # name -> (micro-batch shape, dtype)
    param_stage: dict[str, int]  # parameter name -> stage
    num_stages: int
    micro_batch_size: int
    accumulates: bool
    initial: dict[str, np.ndarray] = field(default_factory=dict)  # values to set after the startup program
    # a parameter several stages use (a tied embedding and head): its name -> its copies' names, one per stage,
    # kept in step by the schedule's `sync_shared` (ppdsl/runtime/shared.py)
    shared: dict[str, list[str]] = field(default_factory=dict)
    # the stage of each layer (embedding, blocks, head) as `ctx.pipeline` placed them; None: placed by hand
    layer_stages: tuple[int, ...] | None = None

    def run_startup(self, paddle, scope, place=None) -> None:
        """Initialise `scope`: the startup program, then the values of eagerly built layers (`ModelContext.initial`)."""
        place = place or paddle.CPUPlace()
        with paddle.static.scope_guard(scope):
            paddle.static.Executor(place).run(self.startup)
        for name, value in self.initial.items():
            scope.find_var(name).get_tensor().set(value, place)


def make_optimizer(paddle, name: str, lr: float):
    if name == "sgd":
        return paddle.optimizer.SGD(lr)
    if name == "adam":
        return paddle.optimizer.Adam(lr)
    raise ValueError(f"unknown optimizer `{name}` (sgd or adam)")


def build_training_program(
    paddle,
    model: Model,
    *,
    micro_batch_size: int,
    num_stages: int,
    microbatches: int,
    lr: float,
    optimizer: str = "adam",
    seed: int = 0,
    accumulate: bool = True,
    train: bool = True,
    partition: tuple[int, ...] | None = None,
) -> TrainingProgram:
    """Build forward + backward + optimizer. `accumulate=False` gives the plain full-batch reference program,
    `train=False` the forward alone (to evaluate losses). `partition`: layers per stage, which `ctx.pipeline`
    places the model by (E104 for a model that places its ops by hand: nothing to move)."""
    from paddle.base.framework import pir_chunk_id_guard, pir_op_role_guard

    main, startup = paddle.static.Program(), paddle.static.Program()
    # Paddle's initializers read a program seed of 0 as "unseeded" (a different initialisation in every process);
    # `--seed 0` must be as reproducible as any other seed
    main.random_seed = startup.random_seed = seed if seed else UNSEEDED_STANDIN
    # a dropout that is not given a fixed seed (`fix_seed` false, no seed tensor: what a hand-built static program
    # gets) draws its mask from Paddle's global generator, which the program seed does not reach, and so do the
    # seed ops of a recompute (runtime/recompute.py); unseeded, two runs with one --seed trained differently
    paddle.seed(seed)
    ctx = ModelContext(paddle, micro_batch_size, num_stages, seed, partition=partition)
    with paddle.static.program_guard(main, startup):
        with pir_op_role_guard(FORWARD_ROLE):
            loss = build_loss(model, ctx)  # the contract checked: E046-E048 name the model function
            if partition is not None and not ctx.pipelined:
                raise _unpartitioned(model.name, partition)
            with pir_chunk_id_guard(loss.get_defining_op().chunk_id):
                # a name, so the loss can be found again in the job program that computes it
                paddle._C_ops.set_persistable_value(loss, LOSS_NAME)
        if not train:
            return TrainingProgram(
                main, startup, loss, dict(ctx.inputs), {}, num_stages, micro_batch_size, False, dict(ctx.initial)
            )
        opt = make_optimizer(paddle, optimizer, lr)
        with pir_op_role_guard(BACKWARD_ROLE):
            params_grads = opt.backward(loss)
        param_stage = {p.name: max(p.get_defining_op().chunk_id, 0) for p, _ in params_grads}
        accumulators = []
        if accumulate:
            accumulators = _accumulate_gradients(paddle, main, startup, params_grads, param_stage)
            params_grads = scale_accumulated(paddle, accumulators, microbatches, param_stage)
        with pir_op_role_guard(OPTIMIZE_ROLE):
            # one apply_gradients per stage, so that every optimizer op carries its parameter's stage
            for stage in range(num_stages):
                group = [(p, g) for p, g in params_grads if param_stage[p.name] == stage]
                if not group:
                    continue
                with pir_chunk_id_guard(stage):
                    opt.apply_gradients(group)
                    for p, acc in accumulators:
                        if param_stage[p.name] == stage:
                            paddle._C_ops.scale_(acc, 0.0, 0.0, False)  # reset for the next step
    shared = {name: copies for name, copies in ctx.shared.items() if all(c in param_stage for c in copies)}
    return TrainingProgram(
        main,
        startup,
        loss,
        dict(ctx.inputs),
        param_stage,
        num_stages,
        micro_batch_size,
        accumulate,
        dict(ctx.initial),
        shared,
        layer_stages=ctx.layer_stages,
    )


def _unpartitioned(model: str, partition: tuple[int, ...]) -> DiagnosticError:
    return DiagnosticError(
        [
            Diagnostic(
                "E104",
                f"the partition `{','.join(map(str, partition))[:60]}` cannot place the model `{model}`: it puts its "
                "ops on stages by hand (`ctx.stage`), not through `ctx.pipeline`",
                help="build the model as an `nn.Layer` stack placed by `ctx.pipeline(embedding, blocks, head, ...)` "
                "(the built-in GPT is one), or run without a partition",
            )
        ]
    )


def _accumulate_gradients(paddle, main, startup, params_grads, param_stage):
    """Accumulators in startup (zeros, persistable), `acc += grad` after each gradient (role 1, marked
    `grad_merge_add` as Paddle's backward splitter expects), the optimizer on `acc * 1/microbatches`."""
    from paddle.base import core
    from paddle.base.framework import pir_chunk_id_guard, pir_op_role_guard

    mblock, sblock = main.global_block(), startup.global_block()
    place = core.Place()
    place.set_place(paddle.CPUPlace())
    merged = []
    for p, g in params_grads:
        name = p.name + MERGE_SUFFIX
        paddle.pir.set_insertion_point_to_block_end(sblock)
        zeros = paddle.full(g.shape, 0.0, g.dtype)
        zeros.persistable = True
        paddle.pir.set_insertion_point_after(zeros.get_defining_op())
        paddle._C_ops.set_persistable_value(zeros, name)
        acc = mblock.add_kwarg(name, g.type())
        acc.persistable = True
        acc.place_attr = place
        paddle.pir.set_insertion_point_after(g.get_defining_op())
        with pir_op_role_guard(BACKWARD_ROLE), pir_chunk_id_guard(param_stage[p.name]):
            paddle._C_ops.add_(acc, g)
        add_op = [op for op in acc.all_used_ops() if op.name() == "pd_op.add_"][-1]
        add_op.set_bool_attr("grad_merge_add", True)
        merged.append((p, acc))
    paddle.pir.set_insertion_point_to_block_end(mblock)
    return merged


def scale_accumulated(paddle, params_grads, microbatches: int, param_stage):
    """(param, acc / microbatches) pairs, each scale op on its parameter's stage (optimizer role)."""
    from paddle.base.framework import pir_chunk_id_guard, pir_op_role_guard

    out = []
    with pir_op_role_guard(OPTIMIZE_ROLE):
        for p, acc in params_grads:
            with pir_chunk_id_guard(param_stage[p.name]):
                out.append((p, paddle.scale(acc, 1.0 / microbatches)))
    return out
