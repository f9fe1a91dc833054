"""Which variables each job must keep alive for later jobs of its micro-batch (`Job.set_skip_gc_vars`).

After a job, the executor frees every non-persistable variable the job used, except its skip-GC variables. A job
must keep exactly the variables whose *data* a later job of the same micro-batch reads: a later reader that
needs only the shape (an op input Paddle marks no-need-buffer, e.g. `add_grad`'s `x`) still finds the variable,
with its shape, after the data is freed.

Paddle's `pass_utils.set_skip_gc_vars` (PIR branch) decides this with `core.get_no_need_buffer_values`, which
looks at every use of a block argument across all programs but keeps the verdict of whichever use it visits last.
With a split backward, `backward_b` reads an activation for its shape only and `backward_w` multiplies with it;
when the `backward_b` use is visited last, the activation is freed after its forward and `backward_w` fails
(`PreconditionNotMetError: Tensor holds no memory`). Paddle's own schedules never run `backward_b` and `backward_w`
of a stage as separate jobs without a whole-backward program, so they do not meet it; ZB-V, ZBVPP and split VPP do.

So here the question is asked per op input with `Operation.is_no_need_buffer`: a later job reads a variable's data
if one of its ops takes the variable as an input that needs the buffer. This is exact for every schedule, and where
Paddle's verdict is right it keeps the same variables or fewer (bench_run compares both).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def touched_values(program) -> set[str]:
    """Non-persistable named variables the program uses or defines: what the executor may free after it."""
    block = program.global_block()
    names: set[str] = set(block.kwargs())
    persistable: set[str] = set()
    for op in block.ops:
        for value in (*op.operands_source(), *op.results()):
            if value.has_name:
                names.add(value.name)
                if value.persistable:
                    persistable.add(value.name)
    for name, value in block.kwargs().items():
        if value.persistable:
            persistable.add(name)
    return names - persistable


def data_reads(program) -> set[str]:
    """Named variables whose data the program reads: some op takes them as an input that needs the buffer."""
    names: set[str] = set()
    for op in program.global_block().ops:
        for k in range(op.num_operands()):
            value = op.operand_source(k)
            if value.has_name and not op.is_no_need_buffer(value):
                names.add(value.name)
    return names


def defined_values(program) -> set[str]:
    """Names the program writes: those it publishes (`builtin.shadow_output`) and those it writes again into the
    variable an earlier job published (`write_again`), so a job after it reads its value."""
    names = set()
    for op in program.global_block().ops:
        if op.name() == "builtin.shadow_output":
            names.add(op.attrs()["output_name"])
        elif op.name() == "pd_op.share_var" and op.operand_source(0).has_name:
            names.add(op.operand_source(0).name)
        elif op.name() == "pd_op.assign_out_" and op.operand_source(1).has_name:
            names.add(op.operand_source(1).name)
    return names


def write_again(program, name: str, value) -> None:
    """Make `value` of `program` the variable `name` an earlier job of the micro-batch published (a recompute or a
    reload writing an activation back for the backward).

    Not `builtin.shadow_output`: when its name is already in the scope, the executor's scope builder erases that
    variable (`pir_adaptor_util.cc`, HandleForSpecialOp: `scope->EraseVars({var_name})`) while the programs built
    before still point at it (measured: `Variable Id ... is not registered`, or a segmentation fault). A
    `pd_op.share_var` of the variable (read by name) and the value maps the value onto that variable instead, so the
    op computing it writes there, no copy. A value that is an element of a vector (`builtin.split` of `pd_op.split`'s
    results) lives in the vector's own variables, which its kernel writes: that one is copied (`assign_out_`)."""
    import paddle
    from paddle.base import core

    block = program.global_block()
    target = block.kwargs().get(name)
    if target is None:
        target = block.add_kwarg(name, value.type())
        place = core.Place()
        place.set_place(paddle.CPUPlace())
        target.place_attr = place
    paddle.pir.set_insertion_point_to_block_end(block)
    producer = value.get_defining_op()
    if producer is not None and producer.name().startswith("builtin."):
        paddle._C_ops.assign_out_(value, target)
    else:
        paddle._C_ops.share_var([target, value])


def skip_gc_sets(
    touched: dict[str, set[str]],
    reads: dict[str, set[str]],
    jobs: Iterable[tuple[str, int]],
    num_micro_batches: int,
    defines: dict[str, set[str]] | None = None,
) -> list[set[str]]:
    """Per job (type, micro-batch) in execution order: the variables it touches that a later job of its micro-batch
    reads the data of, before any job writes them again (`defines`: what each job type publishes). A value a
    recompute or a reload writes again is thus not kept across it: the forward before a recompute keeps only what
    the recompute reads, and an offload frees what it copied."""
    jobs = list(jobs)
    read_later: list[set[str]] = [set() for _ in range(num_micro_batches)]
    out: list[set[str]] = [set() for _ in jobs]
    for i in range(len(jobs) - 1, -1, -1):
        job_type, mb = jobs[i]
        out[i] = touched[job_type] & read_later[mb]
        written = defines.get(job_type, set()) if defines else set()
        # what a job reads of its own writing is its own value, not one an earlier job must keep
        read_later[mb] = (read_later[mb] - written) | (reads[job_type] - written)
    return out


def set_skip_gc_vars(num_micro_batches: int, job_types: Sequence[str], programs: Sequence, jobs: Sequence) -> dict:
    """Set each job's skip-GC variables; returns {job type: program} as Paddle's function does."""
    type_to_program = dict(zip(job_types, programs, strict=True))
    sets = job_skip_sets(type_to_program, [(j.type(), j.micro_batch_id()) for j in jobs], num_micro_batches)
    for job, names in zip(jobs, sets, strict=True):
        job.set_skip_gc_vars(names)
    return type_to_program


def job_skip_sets(
    type_to_program: dict[str, object], jobs: Sequence[tuple[str, int]], num_micro_batches: int
) -> list[set[str]]:
    """The skip-GC set of each job (type, micro-batch) of a plan, in order: what `set_skip_gc_vars` gives the jobs,
    and what `held.held_bytes` accounts the executor's frees by."""
    touched = {t: touched_values(p) for t, p in type_to_program.items()}
    reads = {t: data_reads(p) for t, p in type_to_program.items()}
    defines = {t: defined_values(p) for t, p in type_to_program.items()}
    return skip_gc_sets(touched, reads, jobs, num_micro_batches, defines)
