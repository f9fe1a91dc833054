"""The built-in job types: the one table every layer reads (names, letters, regions, default costs, colours).

Every schedule's job-type list starts with these five, in this order, so their indices are the same in every
`ScheduleDef` and `Expansion`; a schedule's own job types (`job recv_forward : ...`) follow them.

The memory actions (`MEMORY_TYPES`: recompute, offload, reload) are built-in too, but a schedule's list holds them
only when the schedule names one of them (then all three, right after the five): every other schedule keeps the
job types, indices and job codes it always had. Their indices therefore differ by schedule: code asks a schedule
(`ScheduleDef.type_index("recompute")`, `ppdsl.analysis.memory.MemoryActions`), never a constant.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinJobType:
    name: str
    region: str  # the part of the training program its ops come from
    letter: str | None  # alias in schedules, prefix of job labels (`F3`) and PyTorch's action letter (`0F3`)
    default_cost: float  # time of one job when neither the schedule nor the command line says
    program_order: int  # where its job program goes in a plan (Paddle's order: forward, backward..., optimizer)
    style: str  # `ppdsl show`'s terminal colours (rich)
    colour: str  # timeline pictures (matplotlib)


BUILTIN_TYPES: tuple[BuiltinJobType, ...] = (
    BuiltinJobType("forward", "forward", "F", 1.0, 0, "bold white on blue", "#3b6fb6"),
    BuiltinJobType("backward", "backward", "B", 2.0, 4, "bold white on green", "#3f9b4f"),
    BuiltinJobType("backward_b", "backward_b", "I", 1.0, 5, "bold white on dark_green", "#20877a"),
    BuiltinJobType("backward_w", "backward_w", "W", 1.0, 6, "bold black on yellow", "#e3b23c"),
    BuiltinJobType("optimizer", "optimize", None, 0.0, 8, "bold white on magenta", "#b5489a"),
)
FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W, OPTIMIZER = range(len(BUILTIN_TYPES))
# The memory actions, per (chunk, micro-batch) like a forward. `recompute` re-runs the forward's ops before the
# backward (a compute job); `offload` / `reload` copy the activations to host memory and back on the rank's copy
# stream, beside its compute (their regions name what the runtime builds for them, not a part of the program).
# Their programs go between a stage's forward and its backward in a plan, in the order they run (offload, recompute,
# reload); the runtime makes them from the stage's forward and backward programs (`ppdsl.runtime.memory_jobs`).
RECOMPUTE_NAME, OFFLOAD_NAME, RELOAD_NAME = "recompute", "offload", "reload"
MEMORY_TYPES: tuple[BuiltinJobType, ...] = (
    BuiltinJobType(RECOMPUTE_NAME, "forward", "R", 1.0, 2, "bold white on dark_blue", "#7b9fd6"),
    BuiltinJobType(OFFLOAD_NAME, "offload", "O", 0.5, 1, "bold black on orange1", "#f08a3c"),
    BuiltinJobType(RELOAD_NAME, "reload", "L", 0.5, 3, "bold black on light_salmon1", "#c8642a"),
)
MEMORY_NAMES = tuple(jt.name for jt in MEMORY_TYPES)
# What a recompute's forward keeps for it, in activation units of a whole stage, when no `memory recompute keeps`
# says: its stage input. A recompute re-runs the forward from the values it reads, so the forward before it keeps
# at least its input, as the field's full recompute does (Megatron's `--recompute-granularity full` checkpoints each
# layer's input, Paddle's recompute keeps its segment's inputs) and as the library's 1f1b_recompute declares
# (`stage_input = 0.1`). `check` and `synth` both read it (one default: synth's `--recompute-fraction 0.9` and the
# checker's "keeps nothing" used to disagree); on a model (`--model`) the bytes the forward keeps are measured.
RECOMPUTE_STAGE_INPUT = 0.1
# A recompute's fraction when nothing declares one (a schedule's `memory recompute fraction`, synth's
# `--recompute-fraction`): a full recompute, which rebuilds all but the stage input.
DEFAULT_RECOMPUTE_FRACTION = 1.0


def recompute_share(fraction: float | None) -> float:
    """The share of a forward's activations a recompute of this `fraction` rebuilds (activation units): the
    fraction of what its forward does not keep as the stage input (`fraction` None, or 1: all of that, a full
    recompute). The runtime means the same: a fraction picks among the values the recompute writes again, which the
    stage input is not (`ppdsl.runtime.memory_jobs.select`). The recompute's default cost is this fraction of the
    forward's (`ppdsl.analysis.expand`)."""
    return (DEFAULT_RECOMPUTE_FRACTION if fraction is None else fraction) * (1.0 - RECOMPUTE_STAGE_INPUT)


COPY_NAMES = (OFFLOAD_NAME, RELOAD_NAME)  # the jobs that run on the copy stream, not on the rank's compute
BUILTIN = {jt.name: jt for jt in (*BUILTIN_TYPES, *MEMORY_TYPES)}
BUILTIN_NAMES = tuple(BUILTIN)
LETTERS = {jt.letter: jt.name for jt in BUILTIN.values() if jt.letter}  # F -> forward, R -> recompute
COMPUTE_TYPES = BUILTIN_NAMES[:4]  # the types a micro-batch's compute consists of (PyTorch's F, B, I, W)
REGIONS = tuple(jt.region for jt in BUILTIN_TYPES)  # the regions a schedule's own job types may take ops from

# A schedule's own job type: no cost unless declared, programs after the built-in compute, shown in greys.
USER_PROGRAM_ORDER = 7
USER_STYLE = "bold black on cyan"
USER_COLOURS = ("#8a8a8a", "#a9a9a9", "#6f6f6f", "#c4c4c4")

# The backward of a micro-batch is whole or split, so `backward` and `backward_b` take micro-batches from one
# counter: `backward_b backward` runs micro-batches k and k + 1 (Paddle's ZBH1 and DualPipeV rely on this).
SHARED_COUNTER = {"backward_b": "backward"}


def letter_of(name: str) -> str | None:
    jt = BUILTIN.get(name)
    return jt.letter if jt else None


def default_cost(name: str) -> float:
    jt = BUILTIN.get(name)
    return jt.default_cost if jt else 0.0


def program_order(name: str) -> int:
    jt = BUILTIN.get(name)
    return jt.program_order if jt else USER_PROGRAM_ORDER


def style_of(name: str) -> str:
    jt = BUILTIN.get(name)
    return jt.style if jt else USER_STYLE
