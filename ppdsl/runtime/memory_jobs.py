"""Memory-action jobs (issue 17): recompute, offload and reload, as the runtime builds and runs them.

A memory job is (type, chunk, micro-batch) like a forward. Its program is made from the stage's split job
programs after `split.split_program`, so nothing else in the plan changes:

    recompute@s  the stage's forward ops again (`recompute.recompute_program`), publishing the activations the
                 backward reads under their own names; the forward before it then keeps only what the recompute
                 reads (its stage input, fed inputs, and the seeds of its random ops), by skip-GC liveness
    offload@s    copies the activations into host-store variables `<name>@HOST<stage>` (`offload.offload_program`); the
                 originals are freed at its end
    reload@s     copies them back under their own names before the backward (`offload.reload_program`)

The lean forward needs no program of its own: skip-GC sets are per job (`core.Job.set_skip_gc_vars`; measured:
a forward of micro-batch 1 with an empty set fails its backward while micro-batch 0's is kept), and liveness with
redefinition (`skip_gc.skip_gc_sets` with `defines`) keeps, after a forward, only what a later job of its
micro-batch reads before a recompute or reload writes it again. So selective recompute (some micro-batches of a
stage recompute, others keep) is just which (chunk, micro-batch) have a recompute in the order.

A partial job (`fraction` < 1) recomputes or moves the largest activations first until that share of the stage's
activation bytes is covered (`select`); an offload and its reload of one fraction move the same values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.plan.kinds import KINDS as KIND_TABLE
from ppdsl.plan.kinds import Memory, memory_of, source_of
from ppdsl.plan.spec import PlanSpec
from ppdsl.runtime.offload import CPU, GPU, CopyTarget, offload_program, reload_program
from ppdsl.runtime.recompute import publish_seeds, recompute_program
from ppdsl.runtime.skip_gc import defined_values

# the programs the runtime builds for memory actions, one for each built-in action (`Kind.program`): a new action
# that moves data as one of them does names that one
KINDS = tuple(dict.fromkeys(k.program for k in KIND_TABLE.values() if k.program))
RECOMPUTE, OFFLOAD, RELOAD = KINDS


@dataclass(frozen=True)
class MemoryJob:
    """What a memory job type does: its kind, and the share of the stage's activation bytes it acts on."""

    kind: str  # recompute | offload | reload
    fraction: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"memory job kind `{self.kind}` is not one of {', '.join(KINDS)}")
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"a memory job's fraction is in (0, 1], not {self.fraction}")


def memory_actions(spec: PlanSpec, used: Iterable[str] | None = None) -> dict[str, MemoryJob]:
    """What each memory-action job type of `spec` does (type name -> `MemoryJob`), as the spec says (its
    `JobTypeSpec.memory` and `fraction`, from the checked schedule), only those an order uses unless `used` is None."""
    wanted = None if used is None else set(used)
    return {
        jt.name: MemoryJob(jt.memory, 1.0 if jt.fraction is None else jt.fraction)
        for jt in spec.job_types
        if jt.memory is not None and (wanted is None or jt.name in wanted)
    }


def host_job_types(actions: Mapping[str, MemoryJob]) -> frozenset[str]:
    """The job types whose copies make the host store (what the measurement counts apart)."""
    return frozenset(name for name, job in actions.items() if job.kind == OFFLOAD)


def select(activations: Mapping[str, int], fraction: float) -> list[str]:
    """The values a job of this fraction acts on: all for 1, else the largest first (then by name, so every
    process and the offload and its reload agree) until `fraction` of the bytes is covered."""
    names = sorted(activations, key=lambda n: (-activations[n], n))
    if fraction >= 1.0:
        return sorted(names)
    target = fraction * sum(activations.values())
    chosen, covered = [], 0
    for name in names:
        if covered >= target:
            break
        chosen.append(name)
        covered += activations[name]
    return sorted(chosen)


def recomputed_stages(orders, stage_of, actions: Mapping[str, MemoryJob]) -> set[int]:
    """The stages some order recomputes (every process decides this over all ranks alike)."""
    kinds = {name for name, job in actions.items() if job.kind == RECOMPUTE}
    return {stage_of[r][c] for r, order in enumerate(orders) for t, c, _ in order if t in kinds}


def add_memory_programs(
    programs: dict,
    keys: Sequence,
    actions: Mapping[str, MemoryJob],
    target: CopyTarget = CPU,
    not_activations: frozenset[str] = frozenset(),
) -> list:
    """Add to `programs` ({ProgramKey: program} from `split.split_program`, which gives memory actions none) the
    programs of the memory-action `keys`, made from their stage's forward and backward-side programs. Returns the
    keys added. `not_activations`: values a backward-side job reads that no forward made (a gradient another rank's
    backward sends: a plan of one rank does not hold the program that computes it, so only the whole program's
    value flow tells)."""
    from ppdsl.runtime.activations import stage_activations

    if not actions:  # (measuring activations needs static shapes, which a plan without memory jobs does not)
        return []
    by_stage: dict[int, dict[str, object]] = {}
    for key, program in programs.items():
        if key.type not in actions and not key.per_rank:
            by_stage.setdefault(key.stage, {})[key.type] = program
    activations = {
        stage: {n: b for n, b in values.items() if n not in not_activations}
        for stage, values in stage_activations(by_stage).items()
    }
    seeds_published: set[int] = set()
    replaced = []
    for key in sorted(keys, key=lambda k: (k.stage, k.type)):
        job, stage = actions[key.type], key.stage
        programs_of_stage = by_stage.get(stage, {})
        if job.kind == RECOMPUTE:
            forward = programs_of_stage.get(source_of(key.type))  # the kind whose ops it runs again
            if forward is None:
                raise ValueError(f"`{key.type}` of stage {stage} runs where its forward does not")
            if stage not in seeds_published:
                publish_seeds(forward, stage)
                seeds_published.add(stage)
            published = defined_values(forward)
            remade = {n: b for n, b in activations.get(stage, {}).items() if n in published}
            programs[key] = recompute_program(forward, select(remade, job.fraction))
        else:
            types = _value_types(programs_of_stage)
            # an empty tensor (a `full_int_array` of no axes) has no buffer to move, and a copy of it has none to
            # answer `place()` with (`Tensor not initialized yet when DenseTensor::place() is called` in mean_grad)
            moved = {n: b for n, b in activations.get(stage, {}).items() if n in types and b > 0}
            chosen = {n: types[n] for n in select(moved, job.fraction)}
            build = offload_program if job.kind == OFFLOAD else reload_program
            programs[key] = build(chosen, stage, target)
        replaced.append(key)
    return replaced


@dataclass(frozen=True)
class ProgramIO:
    """What a job program reads by name from earlier jobs (its non-persistable keyword arguments) and publishes."""

    reads: frozenset[str]
    publishes: frozenset[str]


def program_io(program) -> ProgramIO:
    """A memory program's reads and publications (a recompute and a reload read the variables they write again)."""
    block = program.global_block()
    reads = frozenset(name for name, value in block.kwargs().items() if not value.persistable)
    published = frozenset(op.attrs()["output_name"] for op in block.ops if op.name() == "builtin.shadow_output")
    return ProgramIO(reads, published)


def written_or_copied(program, job: MemoryJob) -> set[str]:
    """The activations a memory job's program acts on: those a recompute or a reload writes again, those an offload
    copies (its keyword arguments)."""
    if job.kind == OFFLOAD:
        return set(program.global_block().kwargs())
    return defined_values(program)


def _value_types(programs_of_stage: Mapping[str, object]) -> dict[str, object]:
    """PIR types of the values the stage's backward-side programs read by name (their keyword arguments)."""
    out = {}
    for job_type, program in programs_of_stage.items():
        if memory_of(job_type) is Memory.FREES:
            for name, value in program.global_block().kwargs().items():
                out.setdefault(name, value.type())
    return out


def dry_run_lines(spec: PlanSpec) -> list[str]:
    """What a dry run shows of each rank's copy jobs on the GPU path (no Paddle needed): the copy op, where it lands
    and its stream, per offload / reload type the rank's order uses. The values each copies are the stage's
    activations, named once the plan is built (`offload.describe` lists them op by op)."""
    actions = memory_actions(spec)
    copies = {
        OFFLOAD: f"pd_op.memcpy_d2h to CUDA pinned host memory (dst_place_type={GPU.d2h_place_type})",
        RELOAD: f"pd_op.memcpy_h2d back to the GPU (dst_place_type={GPU.h2d_place_type})",
    }
    lines = []
    for r, order in enumerate(spec.job_tuples(rank) for rank in range(spec.pp)):
        counts: dict[str, int] = {}
        for t, _, _ in order:
            if t in actions and actions[t].kind in copies:
                counts[t] = counts.get(t, 0) + 1
        for t, n in sorted(counts.items()):
            job = actions[t]
            part = "" if job.fraction >= 1 else f", the largest {job.fraction:.0%} of the bytes"
            lines.append(
                f"rank {r} {t} ({n} jobs): {copies[job.kind]} on stream {GPU.stream}, each activation of its "
                f"(chunk, micro-batch){part}"
            )
    return lines


def check_memory_orders(
    orders: Sequence[Sequence[tuple[str, int, int]]],
    stage_of: Sequence[Sequence[int]],
    actions: Mapping[str, MemoryJob],
) -> None:
    """What a plan with memory jobs needs of its orders, or E086 naming the first job that breaks it: a recompute or an
    offload after the forward of its (chunk, micro-batch), a reload after an offload of it of the same fraction, and
    no backward of an offloaded (chunk, micro-batch) before its reload (it would read freed activations)."""
    # the kinds that read a (chunk, micro-batch)'s activations, so wait for the reload of an offloaded one
    restored_for = {name for k in KIND_TABLE.values() if k.memory is Memory.RESTORES for name in k.before}
    for r, order in enumerate(orders):
        forwarded: set[tuple[int, int]] = set()
        offloaded: dict[tuple[int, int], tuple[str, float]] = {}  # (chunk, mb) -> (offload type, fraction) not reloaded
        for t, c, mb in order:
            job, where = actions.get(t), (c, mb)
            problem = None
            if memory_of(t) is Memory.MAKES:
                forwarded.add(where)
            elif t in restored_for and where in offloaded:
                problem = (f"`{t}` of micro-batch {mb}", f"its activations were offloaded by `{offloaded[where][0]}`")
            elif job is not None and job.kind in (RECOMPUTE, OFFLOAD) and where not in forwarded:
                problem = (f"`{t}` of micro-batch {mb}", "its forward has not run")
            elif job is not None and job.kind == OFFLOAD:
                offloaded[where] = (t, job.fraction)
            elif job is not None and job.kind == RELOAD:
                before = offloaded.pop(where, None)
                if before is None or before[1] != job.fraction:
                    why = "no offload of it runs before" if before is None else f"`{before[0]}` moved another fraction"
                    problem = (f"`{t}` of micro-batch {mb}", why)
            if problem is not None:
                chunk = f", chunk {c}" if len(stage_of[r]) > 1 else ""
                raise DiagnosticError(
                    [
                        Diagnostic(
                            "E086",
                            f"{problem[0]} on rank {r}{chunk} cannot run: {problem[1]}",
                            help="run a recompute or an offload after the forward of its micro-batch, and a reload "
                            "(of the offload's fraction) after its offload and before the backward",
                        )
                    ]
                )
