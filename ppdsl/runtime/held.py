"""The bytes each rank holds at every job boundary of a step, accounted from the plan the executor runs.

What `ppdsl run` reports as `peak_bytes` / `host_peak_bytes`. A step of the standalone executor runs the plan's jobs
one after another, each in its micro-batch's scope, and between two jobs the only thing that frees a variable is the
executor's garbage collector: at a job's end it frees every non-persistable variable the job touched except the job's
skip-GC set (`core.Job.set_skip_gc_vars`, which `skip_gc.set_skip_gc_vars` gave it). So the named variables alive
after job k of a micro-batch are exactly those some job up to k wrote (or the executor fed) and no job up to k has
touched without keeping. Each counts at its tensor's bytes (numel x itemsize of its static type, the shape the
program was built at) for the rank whose job frees it (its last reader): where a run with one process per rank holds
it (an activation until its backward, a stage's output on the next stage's rank until that forward reads it, a
gradient on its way back). The offloads' copies (`offload.host_name`) are the host store, counted apart.

Why an account and not the allocator: on CPU the executor's collector frees on its own thread, a little after the job
that let go of a buffer, maybe during the next job, so the allocator's figures at a boundary depend on thread timing
(identical runs of interleaved 1F1B with offload differed by 1.47x, one with the 2-core machine loaded measured 2-6x).
This figure is the same for the same plan, every run; `profile.held_memory` reads the allocator's figures from the
profiler, and a test holds the two within 10% (the least of a few steps of the latter).

Not in it: what lives inside a job only (unnamed temporaries, freed by the job's own collector after their last op:
no Python callback runs inside a plan, so the runtime cannot see them), and parameters, gradient accumulators and
optimizer state (alive from the startup program on, the same for every schedule). So it is the activation memory the
schedule decides, the figure `ppdsl check --model` predicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ppdsl.runtime.activations import value_bytes
from ppdsl.runtime.offload import HOST_SUFFIX
from ppdsl.runtime.skip_gc import defined_values, job_skip_sets, touched_values


@dataclass(frozen=True)
class HeldMemory:
    """Bytes each rank holds at every job boundary of a step (see the module docstring)."""

    samples: list[list[int]]  # device bytes per rank at the end of each job of the step, in the plan's order
    peak: list[int]  # per rank, the largest over the samples
    host_peak: list[int]  # per rank, the largest host store (the offloads' copies); zeros without offloads
    host_samples: list[list[int]]  # the host store per rank at the end of each job

    @property
    def host_total_peak(self) -> int:
        """The largest host store of all ranks together at one boundary (the checker's `host_peak`: one host)."""
        return max((sum(s) for s in self.host_samples), default=0)


def variable_bytes(programs: Iterable[object]) -> dict[str, int | None]:
    """Name -> bytes of every named non-persistable variable of the job programs, from its static type (None: its
    shape is dynamic)."""
    sizes: dict[str, int | None] = {}
    for program in programs:
        block = program.global_block()
        values = list(block.kwargs().items())
        for op in block.ops:
            if op.name() == "builtin.shadow_output":
                values.append((op.attrs()["output_name"], op.operand_source(0)))
            for value in (*op.operands_source(), *op.results()):
                if value.has_name:
                    values.append((value.name, value))
        for name, value in values:
            if name not in sizes and not value.persistable:
                try:
                    sizes[name] = value_bytes(value)
                except ValueError:  # a dynamic shape: no size until it runs (`held_bytes` refuses to guess)
                    sizes[name] = None
    return sizes


def written_values(program) -> set[str]:
    """Named variables the program gives data: what it publishes or writes again, and the named results of its ops."""
    names = defined_values(program)
    for op in program.global_block().ops:
        names.update(value.name for value in op.results() if value.has_name)
    return names


def plan_held_bytes(built, stage_of: Sequence[Sequence[int]], fed: Iterable[str], microbatches: int) -> HeldMemory:
    """`held_bytes` of a `plan.BuiltPlan` built for every rank in one process (`build_plan(..., rank=None)`), whose
    stages `stage_of` places: its jobs, the skip-GC sets they were given, each program's rank."""
    rank_of_stage = {s: r for r, row in enumerate(stage_of) for s in row}
    rank_of_program = {
        name: key.stage if key.per_rank else rank_of_stage[key.stage] for name, key in built.keys.items()
    }
    return held_bytes(built.programs, built.job_names, rank_of_program, fed, len(stage_of), microbatches)


def held_bytes(
    programs: Mapping[str, object],
    job_names: Sequence[str],
    rank_of_program: Mapping[str, int],
    fed: Iterable[str],
    pp: int,
    microbatches: int,
) -> HeldMemory:
    """The account over one step. `programs`: job type -> program (`BuiltPlan.programs`); `job_names`: the plan's
    jobs in order, `<type>#<micro-batch>`; `rank_of_program`: job type -> the rank it runs on; `fed`: the names the
    executor feeds into every micro-batch's scope. Each job's skip-GC set is the one the plan gave it
    (`skip_gc.job_skip_sets`, what `skip_gc.set_skip_gc_vars` sets)."""
    touched = {t: touched_values(p) for t, p in programs.items()}
    written = {t: written_values(p) for t, p in programs.items()}
    size = variable_bytes(programs.values())
    sequence = [(name, int(mb)) for name, _, mb in (j.rpartition("#") for j in job_names)]
    skip_gc = job_skip_sets(dict(programs), sequence, microbatches)
    fed = set(fed)
    # who frees each (variable, micro-batch): its last toucher that does not keep it
    freed_by: dict[tuple[str, int], str] = {}
    for (job_type, mb), keep in zip(sequence, skip_gc, strict=True):
        for name in touched[job_type] - set(keep):
            freed_by.setdefault((name, mb), job_type)
    # (variable, micro-batch) -> the job that wrote it; a fed input from its first reader on (the executor splits the
    # whole batch before the step, where a pipeline's loader hands a micro-batch to its first job)
    alive: dict[tuple[str, int], str] = {}
    samples, host_samples = [], []
    for (job_type, mb), keep in zip(sequence, skip_gc, strict=True):
        keep = set(keep)
        for name in touched[job_type]:
            key = (name, mb)
            if name in keep and (key in alive or name in written[job_type] or name in fed):
                alive[key] = job_type
            else:
                alive.pop(key, None)
        device, host = [0] * pp, [0] * pp
        for key, writer in alive.items():
            # the rank that frees it holds it; one nobody frees in the step, the rank of its writer
            holder = freed_by.get(key) or writer
            if holder not in rank_of_program:
                continue  # fed and never read: not this schedule's memory
            column = host if HOST_SUFFIX in key[0] else device
            bytes_ = size.get(key[0], 0)
            if bytes_ is None:
                raise ValueError(f"`{key[0]}` is held between jobs and has a dynamic shape: its bytes are not known")
            column[rank_of_program[holder]] += bytes_
        samples.append(device)
        host_samples.append(host)
    peak = [max((s[r] for s in samples), default=0) for r in range(pp)]
    host_peak = [max((s[r] for s in host_samples), default=0) for r in range(pp)]
    return HeldMemory(samples, peak, host_peak, host_samples)


def scope_bytes(scopes: Iterable) -> int:
    """Bytes of the initialized dense tensors in `scopes` (numel x itemsize): what a rank process's micro-batch
    scopes hold between two jobs, measured (`worker.py`'s `held_peak_bytes`; parameters live in the root scope, not
    here). The executor's collector frees on its own thread, so a figure can include a buffer a moment from free."""
    import numpy as np

    total = 0
    for scope in scopes:
        for name in scope.local_var_names():
            try:
                tensor = scope.find_var(name).get_tensor()
            except (RuntimeError, ValueError):  # not a dense tensor (a reader, a list of tensors)
                continue
            if tensor._is_initialized():
                dtype = str(tensor._dtype()).replace("paddle.", "").lower()
                total += tensor._numel() * _ITEMSIZE.get(dtype, np.dtype("float32").itemsize)
    return total


_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "bool": 1, "uint8": 1}
