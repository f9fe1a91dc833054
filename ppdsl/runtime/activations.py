"""Which values a stage keeps from its forward for its backward-side jobs, and their sizes, read off split job
programs: a value a backward-side job of stage s reads the data of from an earlier job (a block keyword argument of
its program, not persistable, that one of its ops takes as an input needing the buffer: the rule skip-GC keeps
values by, `skip_gc.data_reads`) is an activation stage s keeps from its forward until its last backward reader.

`memory.py` turns these into the memory model's bytes per (stage, job type); `memory_jobs.py` picks from them what
a recompute re-makes and an offload moves.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ppdsl.plan.jobs import ProgramKey, program_key_of, program_name
from ppdsl.plan.kinds import ALWAYS, Memory
from ppdsl.runtime.skip_gc import data_reads

# the kinds that free a stage's activations (and read them): a backward, whole or split
BACKWARD_SIDE = tuple(k.name for k in ALWAYS if k.memory is Memory.FREES)
# what computes a stage's activations: the kind that makes them, and Paddle's receive, a job of its own there
FORWARD_SIDE = (*(k.name for k in ALWAYS if k.memory is Memory.MAKES), "recv_forward")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4, "bool": 1}


def value_bytes(value) -> int:
    dtype = str(value.dtype).replace("paddle.", "")
    shape = [d for d in value.shape]
    if any(d < 0 for d in shape):
        raise ValueError(f"value `{value.name}` has a dynamic shape {shape}; use a static micro-batch dimension")
    return int(np.prod(shape, dtype=np.int64)) * DTYPE_BYTES.get(dtype, 4)


def publishers(programs: dict[str, object]) -> dict[str, set[str]]:
    """Published value name -> the job programs that compute it (a whole `backward` and its `backward_b` both
    compute what backward_b hands to backward_w)."""
    out: dict[str, set[str]] = defaultdict(set)
    for name, program in programs.items():
        for op in program.global_block().ops:
            if op.name() == "builtin.shadow_output":
                out[op.attrs()["output_name"]].add(name)
    return out


def reads_from_earlier_jobs(program) -> dict[str, int]:
    """Non-persistable values a program reads the data of from earlier jobs, with their sizes."""
    data = data_reads(program)
    return {
        name: value_bytes(value)
        for name, value in program.global_block().kwargs().items()
        if not value.persistable and name in data
    }


def stage_activations(by_stage: dict[int, dict[str, object]]) -> dict[int, dict[str, int]]:
    """Per stage, the values its backward-side jobs read from the forward (name -> bytes): what a forward keeps
    for its backward, and what a recompute re-makes or an offload moves. `by_stage`: stage -> job type ->
    program (any naming of the programs)."""
    made_by: dict[str, set[str]] = defaultdict(set)
    for stage, types in by_stage.items():
        for name, programs in publishers({program_name(ProgramKey(t, stage)): p for t, p in types.items()}).items():
            made_by[name] |= programs
    return {stage: split[0] for stage, split in classify(by_stage, made_by).items()}


def classify(
    by_stage: dict[int, dict[str, object]], producers: dict[str, set[str]]
) -> dict[int, tuple[dict[str, int], dict[str, int], set[str]]]:
    """Per stage: (values kept from the forward, values backward_b hands to backward_w, values backward_w reads),
    sizes in bytes. `producers` names programs as `ppdsl.plan.jobs.program_name` does."""
    result = {}
    for stage, types in by_stage.items():
        reads = {t: reads_from_earlier_jobs(types[t]) for t in BACKWARD_SIDE if t in types}
        from_forward: dict[str, int] = {}
        b_to_w: dict[str, int] = {}
        for t, values in reads.items():
            for name, size in values.items():
                made_by = {program_key_of(p) for p in producers.get(name, ())}
                if not made_by or any(k is not None and k.type in FORWARD_SIDE for k in made_by):
                    from_forward[name] = size
                elif ProgramKey("backward_b", stage) in made_by and t == "backward_w":
                    b_to_w[name] = size
        result[stage] = (from_forward, b_to_w, set(reads.get("backward_w", {})))
    return result
