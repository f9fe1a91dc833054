"""Schedule + training program -> `core.Plan`: prepare, split, apply rules, order jobs, skip-GC, Plan.

`build_plan` takes the schedule as a `PlanSpec` (ppdsl.plan.spec), its one way in: the check's (`ppdsl run`, every
rank, Paddle's pass) or a generated plan module's (`ppdsl compile`, `plan_module_spec`). With `rank=None` every
rank's jobs run in this one process (the single-machine emulation): each (job type, stage) is its own job
program, named `<type>@<stage>` (the optimizer `optimizer@r<rank>`, `ppdsl.plan.jobs.program_name`), and the
ranks' orders run merged into one order that respects every cross-stage dependency: the one the checker's
execution recorded in the spec (by simulated start time), or for a plan module's orders, which no check merged,
one by the values each job reads. Values that would cross ranks pass through the micro-batch scope by name. With
`rank=r` only that rank's jobs are built, in its order, named as Paddle's passes name them (`forward`, or
`forward1` for chunk 1 when vpp > 1). `job_programs` is the first half alone: the job programs, for a measurement.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.text import numbered
from ppdsl.plan.jobs import ProgramKey, paddle_job_name, program_key, program_name
from ppdsl.plan.kinds import Memory, memory_of
from ppdsl.plan.spec import PlanSpec
from ppdsl.runtime.env import import_paddle
from ppdsl.runtime.memory_jobs import (
    MemoryJob,
    add_memory_programs,
    check_memory_orders,
    memory_actions,
    recomputed_stages,
)
from ppdsl.runtime.offload import CPU, GPU
from ppdsl.runtime.own_program import prepare_own_program
from ppdsl.runtime.p2p import insert_p2p
from ppdsl.runtime.program import LOSS_NAME
from ppdsl.runtime.recompute import seed_random_ops
from ppdsl.runtime.skip_gc import set_skip_gc_vars
from ppdsl.runtime.split import (
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
    memory_jobs: dict[str, MemoryJob] = field(default_factory=dict)  # the recompute / offload / reload types used


@dataclass
class JobPrograms:
    """The job programs of a plan, before its jobs are ordered: what `job_programs` makes for `build_plan`, and all a
    measurement of the programs needs (`ppdsl.runtime.memory.measure_stages`)."""

    programs: dict[ProgramKey, object]  # in the plan's program order
    flow: ValueFlow  # what every rank's job programs hand each other (all ranks)
    memory_jobs: dict[str, MemoryJob]  # the recompute / offload / reload types used
    split_matmuls: int
    seconds: dict[str, float]  # "prepare" and "split"


def build_plan(
    main_program,
    startup_program,
    spec: PlanSpec,
    *,
    rank: int | None = None,
    p2p: dict | None = None,
    whole_model: bool = True,
) -> BuiltPlan:
    """The plan of `main_program` (a PIR training program with op roles and stage chunk ids) for the schedule `spec`
    (`ppdsl.plan.spec.PlanSpec`: built once from the check, or by a generated plan module from its own data,
    `ppdsl.plan.spec.plan_module_spec`). The job programs are `job_programs`'s; every rank's jobs run in the spec's
    merged order (`rank=None`; a spec no check merged, a plan module's, in one by the values each job reads), or
    rank `rank`'s in its order."""
    import_paddle()
    from paddle.base import core

    t0 = time.perf_counter()
    made = job_programs(main_program, startup_program, spec, rank=rank, p2p=p2p, whole_model=whole_model)
    t2 = time.perf_counter()
    orders = [spec.job_tuples(r) for r in range(spec.pp)]

    def key(r: int, t: str, c: int) -> ProgramKey:
        return program_key(t, r, c, spec.stage_of)

    def name(k: ProgramKey) -> str:
        if rank is None:
            return program_name(k)
        chunk = 0 if k.per_rank else list(spec.stage_of[rank]).index(k.stage)
        return paddle_job_name(k.type, chunk, len(spec.stage_of[rank]))

    named = {name(k): program for k, program in made.programs.items()}
    if rank is not None:
        sequence = [(rank, job) for job in orders[rank]]
    else:  # every rank on this process: the checker's merged order, or (a plan module's) one by the values read
        merged = spec.merged if spec.merged is not None else merge_by_values(orders, made.flow, key)
        sequence = [(r, orders[r][step]) for r, step in merged]
    jobs, job_names = [], []
    for r, (t, c, mb) in sequence:
        n = name(key(r, t, c))
        job = core.Job(n)
        job.set_micro_batch_id(mb)
        jobs.append(job)
        job_names.append(f"{n}#{mb}")
    type_to_program = set_skip_gc_vars(spec.microbatches, list(named), list(named.values()), jobs)
    plan = core.Plan(jobs, type_to_program)
    t3 = time.perf_counter()
    loss_program, loss_value = _find_loss(type_to_program)
    return BuiltPlan(
        plan,
        job_names,
        dict(type_to_program),
        loss_program,
        loss_value,
        made.split_matmuls,
        {**made.seconds, "plan": t3 - t2, "total": t3 - t0},
        {name(k): k for k in made.programs},
        made.flow,
        made.memory_jobs,
    )


def job_programs(
    main_program,
    startup_program,
    spec: PlanSpec,
    *,
    rank: int | None = None,
    p2p: dict | None = None,
    whole_model: bool = True,
) -> JobPrograms:
    """Prepare `main_program` for the schedule `spec` and split it into the job programs of every rank's jobs
    (`rank=None`, the single-machine emulation: each job type on each stage its own program) or rank `rank`'s.

    `p2p` (directed rank pair -> `ppdsl.runtime.p2p.Link`) puts send_v2 / recv_v2 between ranks into the programs
    (the GPU path); without it, values cross ranks by name (emulation) or through the CPU transport. `whole_model`:
    the program holds every stage's ops (ppdsl's runs; E064 when one is empty), not one rank's alone (Paddle's
    pipeline pass). The spec's memory actions (`JobTypeSpec.memory` and `fraction`: recompute, offload, reload) get
    programs of their own, made from their stage's forward and backward programs (ppdsl/runtime/memory_jobs.py);
    their copies go to pinned host memory on the GPU path and to the emulated host store otherwise.
    """
    import_paddle()
    t0 = time.perf_counter()
    pp, stage_of, microbatches = spec.pp, spec.stage_of, spec.microbatches
    orders = [spec.job_tuples(r) for r in range(pp)]
    ranks = list(range(pp)) if rank is None else [rank]
    rank_of_stage = {s: r for r, row in enumerate(stage_of) for s in row}
    # decided over every rank, so that every process prepares the same program: the names of values that cross
    # processes come from op positions, which the matmul split shifts
    used = {t for r in range(pp) for t, _, _ in orders[r]}
    split_backward = bool(used & {"backward_b", "backward_w"})
    actions = memory_actions(spec, used)
    if actions:
        check_memory_orders(orders, stage_of, actions)

    work = main_program.clone()
    prepare_own_program(work, startup_program, microbatches)  # roles checked, loss named, gradients accumulated
    complete_roles(work)
    placed = op_stages(work)
    if whole_model:  # Paddle's pipeline pass hands one rank's program, which holds only that rank's stages
        check_every_stage_has_ops(work, placed, spec.nstages, spec.partition)
    stamp_stages(work, placed)
    if p2p is not None:  # the GPU path: ranks exchange values through send_v2 / recv_v2 in the programs
        insert_p2p(work, op_stages(work), rank_of_stage, p2p)
    if actions:  # a recomputed dropout reads the forward's seed (before the split: it shifts op positions)
        seed_random_ops(work, recomputed_stages(orders, stage_of, actions))
    block = work.global_block()
    split = split_matmul_grads(block) if split_backward else 0
    ops = block.ops
    stages = op_stages(work)
    kinds = classify_kinds(ops, split_backward)
    if split_backward:
        check_backward_splits(ops, kinds)
    types = assign_job_types(ops, kinds, spec.job_types, used)

    keys = {program_key(t, r, c, stage_of) for r in ranks for t, c, _ in orders[r]}
    every_key = {program_key(t, r, c, stage_of) for r in range(pp) for t, c, _ in orders[r]}
    flow = value_flow(ops, op_homes(types, stages, every_key, rank_of_stage))
    check_value_order(flow, orders, stage_of, ranks)
    program_order = {jt.name: jt.program_order for jt in spec.job_types}
    order = sorted(keys, key=lambda k: (k.per_rank, k.stage, program_order[k.type], k.type))
    homes = op_homes(types, stages, keys, rank_of_stage)
    if rank is None:
        homeless = [ops[i].name() for i, h in enumerate(homes) if not h]
        if homeless:
            raise DiagnosticError([Diagnostic("E035", f"{len(homeless)} ops belong to no job, first `{homeless[0]}`")])
    t1 = time.perf_counter()
    # values this process computes for another process's programs
    remote = {n for k, names in flow.needs.items() if k not in keys for n in names} - flow.data
    # a memory action owns no op of the program: its program is made from its stage's split programs
    split_keys = [k for k in order if k.type not in actions]
    programs = split_program(work, homes, split_keys, frozenset(remote))
    backward_made = frozenset(
        n for n, made_by in flow.producers.items() if any(memory_of(k.type) is Memory.FREES for k in made_by)
    )
    memory_keys = [k for k in order if k.type in actions]
    add_memory_programs(programs, memory_keys, actions, GPU if p2p is not None else CPU, backward_made)
    apply_rules(((k.type, programs[k]) for k in order), spec.rule_dicts())
    t2 = time.perf_counter()
    return JobPrograms({k: programs[k] for k in order}, flow, actions, split, {"prepare": t1 - t0, "split": t2 - t1})


def check_backward_splits(ops, kinds: list[str]) -> None:
    """E034 unless some weight gradient moved to backward_w: gradient-accumulation adds are always classed
    backward_w, so they alone do not make the backward split."""
    if not any(kind == "backward_w" and not op.has_attr("grad_merge_add") for op, kind in zip(ops, kinds, strict=True)):
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


def check_every_stage_has_ops(main, stages: list[int], nstages: int, partition: tuple[int, ...] | None = None) -> None:
    """E064 unless every pipeline stage holds forward ops: a model placed by hand (`ctx.stage`, or a program of
    one's own with chunk ids) that leaves a stage empty would train with ranks that only pass values on, without a
    word (`ctx.pipeline` refuses such a split, E039). With a `partition` (layers per stage) that gives a stage no
    layer, the partition is what to change: the checker accepts it (`allow empty`), the runtime cannot yet run a
    stage that only passes values on."""
    held = {s for op, s in zip(main.global_block().ops, stages, strict=True) if op.op_role == 0 and s >= 0}
    empty = [s for s in range(nstages) if s not in held]
    if held and empty:
        if partition is not None and any(partition[s] == 0 for s in empty if s < len(partition)):
            layout = ",".join(map(str, partition))
            fix = (
                f"the partition {layout} gives {numbered('stage', empty)} no layer: the checker accepts it "
                "(`allow empty`), but the runtime cannot yet run a stage that only passes values on; give every "
                "stage a layer (`--partition`, the file's `partition`), or run with fewer stages (--pp, --vpp)"
            )
        else:
            fix = (
                "place ops on every stage (`with ctx.stage(s):` for s in 0 .. ctx.num_stages - 1, e.g. layer i on "
                "`ctx.layer_stage(i, layers)`), or run with fewer stages (--pp, --vpp)"
            )
        raise DiagnosticError(
            [
                Diagnostic(
                    "E064",
                    f"{numbered('stage', empty)} of {nstages} {'holds' if len(empty) == 1 else 'hold'} no op of "
                    f"the model: every op it builds is on "
                    f"{numbered('stage', sorted(held))}",
                    help=fix,
                )
            ]
        )


def merge_by_values(orders: Sequence[Sequence[tuple[str, int, int]]], flow: ValueFlow, key) -> list[tuple[int, int]]:
    """(rank, step) of every job, all ranks in one order in which each job runs after the jobs of its micro-batch
    that compute a value it reads (`flow`, of the real program), every rank's own order kept. For orders no check
    merged (a plan module's); raises S105 when the orders leave no such order (they deadlock)."""
    needs: dict[ProgramKey, set[ProgramKey]] = {}
    for consumer, names in flow.needs.items():
        for value in names - flow.data:
            needs.setdefault(consumer, set()).update(p for p in flow.producers.get(value, ()) if p != consumer)
    keyed = [[(key(r, t, c), mb) for t, c, mb in order] for r, order in enumerate(orders)]
    scheduled = {job for row in keyed for job in row}
    done: set[tuple[ProgramKey, int]] = set()
    cursor = [0] * len(orders)
    merged: list[tuple[int, int]] = []
    moved = True
    while moved:
        moved = False
        for r, row in enumerate(keyed):
            while cursor[r] < len(row):
                k, mb = row[cursor[r]]
                if any((p, mb) in scheduled and (p, mb) not in done for p in needs.get(k, ())):
                    break
                done.add((k, mb))
                merged.append((r, cursor[r]))
                cursor[r] += 1
                moved = True
    if len(merged) < sum(map(len, keyed)):
        stuck = "; ".join(f"rank {r} at step {cursor[r]}" for r, row in enumerate(keyed) if cursor[r] < len(row))
        raise DiagnosticError([Diagnostic("S105", f"the job lists deadlock: {stuck}", help="run `ppdsl check`")])
    return merged


def _find_loss(type_to_program) -> tuple[str | None, object | None]:
    for job_type, program in type_to_program.items():
        for op in program.global_block().ops:
            if op.name() == "builtin.shadow_output" and op.attrs()["output_name"] == LOSS_NAME:
                return job_type, op.operand_source(0)
    return None, None
