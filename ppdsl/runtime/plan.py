"""Schedule + training program -> `core.Plan`: prepare, split, apply rules, order jobs, skip-GC, Plan.

`build_plan` is what a generated plan module (`ppdsl compile`) calls. With `rank=None` every rank's jobs run
in this one process (the single-machine emulation): each (job type, stage) is its own job program, named
`<type>@<stage>` (the optimizer `optimizer@r<rank>`), and the ranks' orders are merged into one order that
respects every cross-stage dependency (by simulated start time). Values that would cross ranks pass through
the micro-batch scope by name. With `rank=r` only that rank's jobs are built, named as Paddle's passes name
them (`forward`, or `forward1` for chunk 1 when vpp > 1).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.language.jobtypes import program_order
from ppdsl.runtime.env import import_paddle
from ppdsl.runtime.own_program import prepare_own_program
from ppdsl.runtime.p2p import insert_p2p
from ppdsl.runtime.program import LOSS_NAME
from ppdsl.runtime.skip_gc import set_skip_gc_vars
from ppdsl.runtime.split import (
    ProgramKey,
    ValueFlow,
    assign_job_types,
    check_value_order,
    classify_kinds,
    op_homes,
    split_matmul_grads,
    split_program,
    value_flow,
)
from ppdsl.runtime.stages import complete_roles, op_stages, stamp_stages
from ppdsl.runtime.streams import apply_rules


@dataclass
class BuiltPlan:
    plan: object  # paddle.base.core.Plan
    job_names: list[str]  # the plan's jobs, in order, as `<name>#<micro-batch>`
    programs: dict[str, object]  # job type name -> program
    loss_program: str | None  # job type whose program computes the loss
    loss_value: object | None  # that program's loss Value, to fetch
    split_matmuls: int
    seconds: dict[str, float] = field(default_factory=dict)
    keys: dict[str, ProgramKey] = field(default_factory=dict)  # job type name -> (type, stage)
    flow: ValueFlow | None = None  # what every rank's job programs hand each other (all ranks)


def build_plan(
    main_program,
    startup_program,
    *,
    job_types: Sequence[dict],
    stage_of: Sequence[Sequence[int]],
    orders: Sequence[Sequence[tuple[str, int, int]]],
    rules: Sequence[dict],
    microbatches: int,
    rank: int | None = None,
    p2p: dict | None = None,
) -> BuiltPlan:
    """Prepare `main_program` (a PIR training program with op roles and stage chunk ids) for the schedule.

    `p2p` (directed rank pair -> `ppdsl.runtime.p2p.Link`) puts send_v2 / recv_v2 between ranks into the
    programs (the GPU path); without it, values cross ranks by name (emulation) or through the CPU transport.
    """
    import_paddle()
    from paddle.base import core

    t0 = time.perf_counter()
    pp = len(stage_of)
    ranks = list(range(pp)) if rank is None else [rank]
    rank_of_stage = {s: r for r, row in enumerate(stage_of) for s in row}
    # decided over every rank, so that every process prepares the same program: the names of values that cross
    # processes come from op positions, which the matmul split shifts
    used = {t for r in range(pp) for t, _, _ in orders[r]}
    split_backward = bool(used & {"backward_b", "backward_w"})

    work = main_program.clone()
    prepare_own_program(work, startup_program, microbatches)  # roles checked, loss named, gradients accumulated
    complete_roles(work)
    stamp_stages(work, op_stages(work))
    if p2p is not None:  # the GPU path: ranks exchange values through send_v2 / recv_v2 in the programs
        insert_p2p(work, op_stages(work), rank_of_stage, p2p)
    block = work.global_block()
    split = split_matmul_grads(block) if split_backward else 0
    ops = block.ops
    stages = op_stages(work)
    kinds = classify_kinds(ops, split_backward)
    # gradient-accumulation adds are always classed backward_w; the backward is split only if some weight
    # gradient itself moved there
    if split_backward and not any(
        kind == "backward_w" and not op.has_attr("grad_merge_add") for op, kind in zip(ops, kinds, strict=True)
    ):
        raise DiagnosticError(
            [
                Diagnostic(
                    "E034",
                    "the schedule splits backwards into backward_b and backward_w, but the model's backward "
                    "cannot be split",
                    help="backward_w needs non-transposed matmul weight gradients on a 3-D [micro-batch, "
                    "sequence, hidden] input with a static micro-batch dimension; or use a schedule without "
                    "backward_w",
                )
            ]
        )
    types = assign_job_types(ops, kinds, job_types, used)

    def key(r: int, t: str, c: int) -> ProgramKey:
        return ProgramKey("optimizer", r) if t == "optimizer" else ProgramKey(t, stage_of[r][c])

    keys = {key(r, t, c) for r in ranks for t, c, _ in orders[r]}
    every_key = {key(r, t, c) for r in range(pp) for t, c, _ in orders[r]}
    flow = value_flow(ops, op_homes(types, stages, every_key, rank_of_stage))
    check_value_order(flow, orders, stage_of, ranks)
    order = sorted(keys, key=lambda k: (k.type == "optimizer", k.stage, program_order(k.type), k.type))
    homes = op_homes(types, stages, keys, rank_of_stage)
    if rank is None:
        homeless = [ops[i].name() for i, h in enumerate(homes) if not h]
        if homeless:
            raise DiagnosticError([Diagnostic("E035", f"{len(homeless)} ops belong to no job, first `{homeless[0]}`")])
    t1 = time.perf_counter()
    # values this process computes for another process's programs
    remote = {n for k, names in flow.needs.items() if k not in keys for n in names} - flow.data
    programs = split_program(work, homes, order, frozenset(remote))
    t2 = time.perf_counter()

    def name(k: ProgramKey) -> str:
        if rank is None:
            return f"optimizer@r{k.stage}" if k.type == "optimizer" else f"{k.type}@{k.stage}"
        if k.type == "optimizer" or len(stage_of[rank]) == 1:
            return k.type
        return f"{k.type}{list(stage_of[rank]).index(k.stage)}"

    named = {name(k): programs[k] for k in order}
    apply_rules(((k.type, programs[k]) for k in order), rules)

    sequence = _job_sequence(job_types, stage_of, orders, microbatches, rank)
    jobs, job_names = [], []
    for r, (t, c, mb) in sequence:
        n = name(key(r, t, c))
        job = core.Job(n)
        job.set_micro_batch_id(mb)
        jobs.append(job)
        job_names.append(f"{n}#{mb}")
    type_to_program = set_skip_gc_vars(microbatches, list(named), list(named.values()), jobs)
    plan = core.Plan(jobs, type_to_program)
    t3 = time.perf_counter()
    loss_program, loss_value = _find_loss(type_to_program)
    return BuiltPlan(
        plan,
        job_names,
        dict(type_to_program),
        loss_program,
        loss_value,
        split,
        {"prepare": t1 - t0, "split": t2 - t1, "plan": t3 - t2, "total": t3 - t0},
        {name(k): k for k in order},
        flow,
    )


def _job_sequence(job_types, stage_of, orders, microbatches: int, rank: int | None):
    """(rank, job) in execution order: the rank's own order, or all ranks merged by simulated start time."""
    if rank is not None:
        return [(rank, job) for job in orders[rank]]
    from ppdsl.analysis.execution import execute
    from ppdsl.analysis.expand import expansion_from_orders

    exp = expansion_from_orders(list(job_types), [list(r) for r in stage_of], [list(o) for o in orders], microbatches)
    result = execute(exp, record_visits=True)
    if not result.completed:
        stuck = "; ".join(f"rank {w.rank} at `{w.job}`" for w in result.blocked)
        raise DiagnosticError([Diagnostic("S105", f"the job lists deadlock: {stuck}", help="run `ppdsl check`")])
    return [(r, orders[r][step]) for r, step in result.merged_order()]


def _find_loss(type_to_program) -> tuple[str | None, object | None]:
    for job_type, program in type_to_program.items():
        for op in program.global_block().ops:
            if op.name() == "builtin.shadow_output" and op.attrs()["output_name"] == LOSS_NAME:
                return job_type, op.operand_source(0)
    return None, None
