"""Classify every op into a job type and stage, and split the program into one program per job.

Generic over the schedule's declared job types: an op belongs to a user type (Paddle's `recv_forward`,
`send_backward`, ...) when its region matches and its name matches one of the type's patterns, else to the
built-in type of its region. Values produced in one job program and used in another become persistable
variables by name (`builtin.shadow_output` in the producer, a block keyword argument in the consumer), as
Paddle's `_split_program_into_forward_backward_optimize` and VPP's `_split_program_for_vpp` do; those two
are fixed to their own job types, so this is the same mechanism for any set of types.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.plan.jobs import ProgramKey, program_key
from ppdsl.plan.kinds import per_step
from ppdsl.plan.spec import JobTypeSpec
from ppdsl.runtime.stages import UNKNOWN


def split_matmul_grads(block) -> int:
    """Split every splittable `matmul_grad` into input-gradient and weight-gradient matmuls.

    Paddle's `_pir_split_matmul_grad_to_matmul` asserts `not has_attr("trans_x")`, but PIR names the
    attributes `transpose_x` / `transpose_y`, so its guard never fires: filter on them here. It also folds the
    first two dimensions of the input and the output gradient and reshapes their product to the weight's shape,
    which is right for a 3-D input times a 2-D weight (`nn.Linear` on [micro-batch, sequence, hidden]) with static
    dimensions, and wrong for e.g. two 3-D activations; those keep their `matmul_grad` (in backward_b).
    """
    from paddle.distributed.passes.pass_utils import _pir_split_matmul_grad_to_matmul

    def splittable(op) -> bool:
        if op.name() != "pd_op.matmul_grad" or op.attrs()["transpose_x"] or op.attrs()["transpose_y"]:
            return False
        x, y = list(op.operand_source(0).shape), list(op.operand_source(1).shape)
        return len(x) == 3 and len(y) == 2 and all(d >= 0 for d in x + y)

    ops = block.ops
    found = [i for i, op in enumerate(ops) if splittable(op)]
    for i in reversed(found):
        _pir_split_matmul_grad_to_matmul(block, i)
    return len(found)


def classify_kinds(ops, split_backward: bool) -> list[str]:
    """forward | backward | backward_b | backward_w | optimizer, per op."""
    from paddle.distributed.passes.pass_utils import _pir_get_backward_op_type

    kinds: list[str] = [""] * len(ops)
    pending: list[str] = []
    for i in range(len(ops) - 1, -1, -1):
        role = ops[i].op_role
        if role == 2:
            kinds[i] = "optimizer"
        elif role == 1:
            if not split_backward:
                kinds[i] = "backward"
                continue
            if not pending:
                pending = _pir_get_backward_op_type(ops, i)
            kinds[i] = pending.pop()
        else:
            kinds[i] = "forward"
    return kinds


def assign_job_types(ops, kinds: list[str], job_types: Sequence[JobTypeSpec], used: set[str]) -> list[str]:
    """The job type of every op: a used user type whose region and patterns match, else its built-in kind.

    Every op must belong to exactly one type; an op two user types claim is an error.
    """
    region_of = {jt.name: jt.region for jt in job_types if jt.builtin}
    user = [jt for jt in job_types if jt.name in used and not jt.builtin]
    out = []
    clashes = []
    for op, kind in zip(ops, kinds, strict=True):
        region = region_of[kind]
        matches = [
            jt.name
            for jt in user
            if (jt.region == region or (jt.region == "backward" and region.startswith("backward")))
            and any(fnmatch.fnmatchcase(op.name(), pat) for pat in jt.ops)
        ]
        if len(matches) > 1:
            clashes.append(f"`{op.name()}` matches job types {', '.join(f'`{m}`' for m in matches)}")
        out.append(matches[0] if matches else kind)
    _outputs_follow_their_values(ops, out)
    if clashes:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E032",
                    "the declared job types do not cover every op exactly once",
                    label=clashes[0] + (f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""),
                    help="make the `ops` patterns of job types in one region disjoint",
                )
            ]
        )
    return out


def _outputs_follow_their_values(ops, types: list[str]) -> None:
    """A `builtin.shadow_output` only names a value (the loss, a value the model publishes): it runs in the job
    that computes the value. Left to its region's built-in type, it would make that job read the value of a job
    of the user's that runs after it (`job loss : forward ops "pd_op.mean" after forward`)."""
    index = {op: i for i, op in enumerate(ops)}
    for i, op in enumerate(ops):
        if op.name() == "builtin.shadow_output":
            producer = op.operand_source(0).get_defining_op()
            j = index.get(producer) if producer is not None else None
            if j is not None:
                types[i] = types[j]


def op_homes(
    types: list[str], stages: list[int], programs: set[ProgramKey], rank_of_stage: dict[int, int]
) -> list[list[ProgramKey]]:
    """The job programs that run each op. A whole `backward` job runs both halves of a split backward; a
    stage-less optimizer op (a learning-rate constant, say) runs in every optimizer program."""
    optimizers = sorted((k for k in programs if k.per_rank), key=lambda k: k.stage)
    homes = []
    for t, s in zip(types, stages, strict=True):
        if per_step(t):
            if s == UNKNOWN:
                homes.append(optimizers)
            else:
                key = ProgramKey(t, rank_of_stage.get(s, -1))
                homes.append([key] if key in programs else [])
            continue
        keys = [ProgramKey(t, s)]
        if t in ("backward_b", "backward_w"):
            keys.append(ProgramKey("backward", s))
        homes.append([k for k in keys if k in programs])
    return homes


def existing_name(ops, i: int, r: int) -> str | None:
    """The name result `r` of op `i` already has: an input's, a parameter's, or one the model published."""
    op = ops[i]
    if op.name() in ("pd_op.data", "builtin.parameter"):
        return op.result(r).name
    for user in op.result(r).all_used_ops():
        if user.name() == "builtin.shadow_output":
            return user.attrs()["output_name"]
    return None


def value_name(ops, i: int, r: int) -> str:
    """The name result `r` of op `i` goes by when it crosses job programs (the same in every process)."""
    return existing_name(ops, i, r) or f"ppdsl.{i}.{ops[i].name()}.{r}"


@dataclass
class ValueFlow:
    """Which named values each job program reads from another, which programs compute them, their types.

    Computed on the whole program for every rank's programs at once, so each process knows what every other
    process will send it, in which order and of which shape, without building their programs.
    """

    needs: dict[ProgramKey, set[str]]
    producers: dict[str, list[ProgramKey]]
    shapes: dict[str, tuple[list[int], str]]
    data: set[str]  # inputs fed from the batch (every process has the batch)
    computed_by: dict[str, str] = field(default_factory=dict)  # value name -> the op that computes it


def value_flow(ops, homes: list[list[ProgramKey]]) -> ValueFlow:
    index = {op: i for i, op in enumerate(ops)}
    flow = ValueFlow({}, {}, {}, set())
    for i, op in enumerate(ops):
        for k in range(op.num_operands()):
            value = op.operand_source(k)
            producer = value.get_defining_op()
            j = index.get(producer) if producer is not None else None
            if j is None or value.persistable:  # block arguments and parameters live in every process's scope
                continue
            missing = [h for h in homes[i] if h not in homes[j]]
            if not missing:
                continue
            r = next(r for r in range(producer.num_results()) if producer.result(r).is_same(value))
            name = value_name(ops, j, r)
            flow.producers[name] = homes[j]
            flow.shapes[name] = (list(value.shape), str(value.dtype).replace("paddle.", ""))
            flow.computed_by[name] = producer.name()
            if producer.name() == "pd_op.data":
                flow.data.add(name)
            for h in missing:
                flow.needs.setdefault(h, set()).add(name)
    return flow


def check_value_order(flow: ValueFlow, orders, stage_of, ranks) -> None:
    """Each job reads only values that jobs of its micro-batch computed before it on its rank (E043).

    The checker proves the order against the dependencies it knows (a stage's forward after the stage before
    it, a backward after its forward, `before` / `after` of the user's job types); which job computes which
    value depends on how the job types' `ops` patterns split the real program, so it is checked here."""
    pairs: dict[tuple[ProgramKey, ProgramKey], str] = {}
    for consumer, names in flow.needs.items():
        for name in sorted(names - flow.data):
            for producer in flow.producers[name]:
                if not consumer.per_rank and not producer.per_rank:
                    pairs.setdefault((consumer, producer), name)
    for r in ranks:
        position: dict[tuple[ProgramKey, int], int] = {}
        for i, (t, c, mb) in enumerate(orders[r]):
            if not per_step(t):
                position.setdefault((program_key(t, r, c, stage_of), mb), i)
        microbatches = sorted({mb for _, mb in position})
        for (consumer, producer), name in pairs.items():
            for mb in microbatches:
                reads, computes = position.get((consumer, mb)), position.get((producer, mb))
                if reads is None or computes is None or reads > computes:
                    continue
                op = flow.computed_by[name]
                raise DiagnosticError(
                    [
                        Diagnostic(
                            "E043",
                            f"job `{consumer.type}` of stage {consumer.stage} reads the result of `{op}`, which job "
                            f"`{producer.type}` computes after it (rank {r}, micro-batch {mb})",
                            help=f"a job reads only what jobs before it computed: give that op to an earlier job "
                            f"type (the `ops` patterns of the `job` declarations), or run `{producer.type}` before "
                            f"`{consumer.type}`",
                        )
                    ]
                )


def split_program(
    main, homes: list[list[ProgramKey]], order: list[ProgramKey], publish: frozenset[str] = frozenset()
) -> dict[ProgramKey, object]:
    """One clone of `main` per job program, each keeping only its own ops; values that cross programs are
    published by name in every program that computes them and read by name where they are used. `publish`
    names values to publish although no program here reads them (another process's programs do)."""
    import paddle
    from paddle.base import core

    src = main.global_block().ops
    progs = {key: main.clone() for key in order}
    pops = {key: progs[key].global_block().ops for key in order}
    place = core.Place()
    place.set_place(paddle.CPUPlace())

    for i in range(len(src) - 1, -1, -1):
        home = homes[i]
        for r in range(src[i].num_results()):
            users = [k for k in order if k not in home and not pops[k][i].result(r).use_empty()]
            if not users and value_name(src, i, r) not in publish:
                continue
            name = existing_name(src, i, r)
            if name is None:
                name = value_name(src, i, r)
                for h in home:
                    paddle.pir.set_insertion_point_after(pops[h][i])
                    paddle._C_ops.set_persistable_value(pops[h][i].result(r), name)
            for k in users:
                value = pops[k][i].result(r)
                kwarg = progs[k].global_block().add_kwarg(name, value.type())
                kwarg.place_attr = place
                kwarg.persistable = value.persistable
                value.replace_all_uses_with(kwarg)
        for k in order:
            if k not in home:
                pops[k][i].erase()
    paddle.pir.set_insertion_point_to_block_end(main.global_block())
    return progs
