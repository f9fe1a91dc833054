"""The offload and reload jobs' programs: copies of a stage's activations to a host store and back.

An offload job reads each activation by name, copies it with `pd_op.memcpy_d2h` and publishes the copy as
`<name>@HOST<stage>`; skip-GC keeps the copy (a later reload reads it) and frees the original at the job's end (no later
job reads it before the reload writes it again). The reload copies `<name>@HOST<stage>` back with `pd_op.memcpy_h2d`
under the original name, and the store is freed at its end. Both are plain job programs of the plan: PIR has no
`py_func` (its `TypeError: ... received pir.Value`), so no Python callback could hold a tensor between jobs.

Targets (`CopyTarget`):
- `cpu`: Paddle's CPU build has one memory. `dst_place_type` 0 (CPU) on both copies: each makes a new buffer in
  the same allocator, so the device / host split is an emulation, counted apart by who allocated a buffer
  (`profile.held_memory`'s `host_jobs`: what an offload job allocates and a later job frees is the host store).
- `gpu`: `memcpy_d2h` with `dst_place_type` 1 (CUDA pinned host memory) and `memcpy_h2d` with `dst_place_type` 1
  (to the GPU), each on the execution stream `copy_stream`, so the copies may overlap compute of the same job
  (the standalone executor runs jobs one after another: a copy overlaps a compute job's ops only when both are in
  one job). Built and shown (`describe`), not run: this machine has no GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ppdsl.runtime.skip_gc import write_again

HOST_SUFFIX = "@HOST"  # a host-store variable is its activation's name with this suffix


@dataclass(frozen=True)
class CopyTarget:
    name: str
    d2h_place_type: int  # memcpy_d2h's dst_place_type: 0 CPU, 1 CUDA pinned
    h2d_place_type: int  # memcpy_h2d's dst_place_type: 0 CPU, 1 the GPU
    stream: str | None  # execution stream of the copies (None: the job's default stream)


CPU = CopyTarget("cpu", 0, 0, None)
GPU = CopyTarget("gpu", 1, 1, "copy_stream")


def host_name(name: str, stage: int) -> str:
    """The host-store variable of an activation of `stage`: per stage, because in the one-process emulation a stage's
    input is also an activation of the stage before it, and two offloads publishing one name would erase each other's
    variable (see `skip_gc.write_again`)."""
    return f"{name}{HOST_SUFFIX}{stage}"


def _copy_program(values: Mapping[str, object], stage: int, *, to_host: bool, target: CopyTarget):
    """A program reading each value (name -> its PIR type) by name and publishing a copy under the other name."""
    import paddle
    from paddle.base import core
    from paddle.base.framework import pir_op_role_guard

    program = paddle.static.Program()
    place = core.Place()
    place.set_place(paddle.CPUPlace())
    block = program.global_block()
    with paddle.static.program_guard(program), pir_op_role_guard(0 if to_host else 1):
        for name in sorted(values):
            source, dest = (name, host_name(name, stage)) if to_host else (host_name(name, stage), name)
            kwarg = block.add_kwarg(source, values[name])
            kwarg.place_attr = place
            if to_host:
                copy = paddle._C_ops.memcpy_d2h(kwarg, target.d2h_place_type)
            else:
                copy = paddle._C_ops.memcpy_h2d(kwarg, target.h2d_place_type)
            if target.stream is not None:
                copy.get_defining_op().set_execution_stream(target.stream)
            if to_host:
                paddle._C_ops.set_persistable_value(copy, dest)
            else:  # the backward reads the variable the forward published: write into it (see write_again)
                write_again(program, dest, copy)
    return program


def offload_program(values: Mapping[str, object], stage: int, target: CopyTarget = CPU):
    """Copy each activation of `stage` (name -> PIR type) to the host store `<name>@HOST<stage>`."""
    return _copy_program(values, stage, to_host=True, target=target)


def reload_program(values: Mapping[str, object], stage: int, target: CopyTarget = CPU):
    """Copy each `<name>@HOST<stage>` back to `<name>`, where the backward reads it."""
    return _copy_program(values, stage, to_host=False, target=target)


def describe(programs: Mapping[str, object], names: Iterable[str] | None = None) -> list[str]:
    """One line per copy op of the given job programs (all that copy, by default): what `--dry-run` shows of a plan's
    offload and reload jobs, e.g. `offload@1: pd_op.memcpy_d2h x -> x@HOST0 dst_place_type=1 (CUDA pinned) stream
    copy_stream`."""
    places = {"pd_op.memcpy_d2h": {0: "CPU", 1: "CUDA pinned"}, "pd_op.memcpy_h2d": {0: "CPU", 1: "GPU"}}
    lines = []
    for job in sorted(programs) if names is None else names:
        for op in programs[job].global_block().ops:
            if op.name() not in places:
                continue
            source = op.operand_source(0)
            attrs = op.attrs()
            kind = attrs["dst_place_type"]
            lines.append(
                f"{job}: {op.name()} {source.name if source.has_name else '?'} -> "
                f"{', '.join(_destinations(op.result(0))) or '?'} dst_place_type={kind} "
                f"({places[op.name()].get(kind, '?')}) stream {attrs.get('execution_stream') or 'default'}"
            )
    return lines


def _destinations(value) -> list[str]:
    """The variable names a copy lands in: published (`shadow_output`) or written again (`write_again`)."""
    out = []
    for user in value.all_used_ops():
        if user.name() == "builtin.shadow_output":
            out.append(user.attrs()["output_name"])
        elif user.name() == "pd_op.share_var":
            out.append(user.operand_source(0).name)
        elif user.name() == "pd_op.assign_out_":
            out.append(user.operand_source(1).name)
    return out
