"""The job kinds: the one table every layer reads. A kind is one row (`Kind`) carrying everything callers used to
branch on its name for: its label letter, its region, default cost and program order, what it does to activation
memory, which stream it runs on, its PyTorch letter, what it waits for and what waits for it, whether it runs once
a step, and its colours. Code asks the row (`kind(name).memory`, `.stream`, `.per_step`), never compares names.

Every schedule's job-type list starts with the five `ALWAYS` kinds, in this order, so their indices are the same in
every `ScheduleDef` and `Expansion` (`FORWARD` .. `OPTIMIZER`); a schedule's own job types (`job recv_forward :
...`) follow them.

The `optional` rows are built-in too, but a schedule's list holds them only when the schedule names one of them:
the memory actions (recompute, offload, reload: then all of them, in table order, right after the five) and the
collectives (reduce_grads, sync_shared: then both, after the memory actions if any). Every other schedule keeps the
job types, indices and job codes it always had. Their indices therefore differ by schedule: code asks a schedule
(`ScheduleDef.type_index("recompute")`, `ppdsl.analysis.memory.MemoryActions`), never a constant.

Adding a kind is adding its row here (`docs/architecture.md`, "a new job kind", says what else is truly new);
`register` adds one for the time of a `with` block, so a test can show that nothing else needs writing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum


class Memory(str, Enum):
    """What a kind does to its (chunk, micro-batch)'s activations on the device."""

    NONE = "none"
    MAKES = "makes"  # a forward: allocates them
    FREES = "frees"  # a backward (or a part of a split one): frees what its forward allocated
    REBUILDS = "rebuilds"  # a recompute: re-runs the forward's ops, so the forward before it keeps less
    MOVES_OUT = "moves out"  # an offload: copies them to host memory and frees them when the copy ends
    RESTORES = "restores"  # a reload: copies back what a `MOVES_OUT` kind moved, held from the copy's start


# The roles of the memory actions: the kinds a schedule takes only when it names one (`Kind.optional`)
ACTION_ROLES = frozenset({Memory.REBUILDS, Memory.MOVES_OUT, Memory.RESTORES})


class JobStream(str, Enum):
    """Where a kind's job runs on its rank: the rank's compute, a communication stream, or its copy stream."""

    COMPUTE = "compute"
    SEND = "send"
    RECV = "recv"
    COPY = "copy"  # device <-> host copies, beside the compute (`analysis.timing` rule 6)
    COLLECTIVE = "collective"  # a collective across ranks (gradient reductions), beside the compute


class Members(str, Enum):
    """Who joins a collective kind's job: the rendezvous the checker proves every member reaches."""

    REPLICAS = "replicas"  # the rank's data-parallel group: its D replicas, running the same order
    HOLDERS = "holders"  # every pipeline rank whose order has the kind (the stages holding a shared parameter)


@dataclass(frozen=True)
class Kind:
    """One job kind and everything the layers read off it.

    Paddle's names for its jobs follow from `name` and `per_step`: a job program is `<name>@<stage>`, or
    `<name>@r<rank>` for a kind that runs once a step (its program belongs to the rank, not a stage), and Paddle's
    job name is the name, with the chunk's index appended when a rank holds several chunks (`forward1`), except for
    a once-a-step kind. Its ops come from `region` of the training program (a memory action's region names what the
    runtime builds for it, `program`)."""

    name: str
    region: str  # the part of the training program its ops come from (Paddle's program region)
    letter: str | None  # alias in schedules and prefix of job labels (`F3`)
    default_cost: float  # time of one job when neither the schedule nor the command line says
    program_order: int  # where its job program goes in a plan (Paddle's order: forward, backward..., optimizer)
    style: str  # `ppdsl show`'s terminal colours (rich)
    colour: str  # timeline pictures (matplotlib)
    memory: Memory = Memory.NONE
    stream: JobStream = JobStream.COMPUTE
    torch: str | None = None  # its action letter in a PyTorch CSV (`0F3`); None: not a compute action there
    # the kind of the same (chunk, micro-batch) whose end it reads (`backward_w` reads `backward_b`'s, `reload` the
    # offload's), and the kinds of the same (chunk, micro-batch) that read its end (a reload's backward; of a
    # collective, the rank's jobs that wait for its end: the optimizer)
    after: str | None = None
    before: tuple[str, ...] = ()
    per_step: bool = False  # once a step on each rank (the optimizer), not once per (chunk, micro-batch)
    counter: str | None = None  # the kind whose micro-batch counter it shares (`backward_b` counts `backward`'s)
    # the memory program the runtime builds for a memory action (`ppdsl.runtime.memory_jobs`): its own name for
    # the built-in three; a new action that moves data as one of them does names that one
    program: str | None = None
    # a collective (stream COLLECTIVE): who joins it, and the kinds whose gradients it reduces: it follows the
    # last of their jobs of its chunk (of the rank, once a step) and runs once a step per chunk (per rank)
    members: Members | None = None
    reduces: tuple[str, ...] = ()

    @property
    def optional(self) -> bool:
        """In a schedule's job types only when the schedule names one: a memory action or a collective."""
        return self.acts_on_memory or self.collective

    @property
    def acts_on_memory(self) -> bool:
        """A memory action (recompute, offload, reload): what it does to activations is its role."""
        return self.memory in ACTION_ROLES

    @property
    def collective(self) -> bool:
        """A collective across ranks: it runs on the collective stream, once a step, joined by its `members`."""
        return self.stream is JobStream.COLLECTIVE

    @property
    def copies(self) -> bool:
        return self.stream is JobStream.COPY


_GRADIENT = ("backward", "backward_b")  # the kinds that read a (chunk, micro-batch)'s activations
ALWAYS: tuple[Kind, ...] = (
    Kind("forward", "forward", "F", 1.0, 0, "bold white on blue", "#3b6fb6", Memory.MAKES, torch="F"),
    Kind(
        "backward", "backward", "B", 2.0, 4, "bold white on green", "#3f9b4f", Memory.FREES, torch="B", after="forward"
    ),
    Kind(
        "backward_b",
        "backward_b",
        "I",
        1.0,
        5,
        "bold white on dark_green",
        "#20877a",
        Memory.FREES,
        torch="I",
        after="forward",
        counter="backward",
    ),
    Kind(
        "backward_w",
        "backward_w",
        "W",
        1.0,
        6,
        "bold black on yellow",
        "#e3b23c",
        Memory.FREES,
        torch="W",
        after="backward_b",
    ),
    Kind("optimizer", "optimize", None, 0.0, 8, "bold white on magenta", "#b5489a", per_step=True),
)
FORWARD, BACKWARD, BACKWARD_B, BACKWARD_W, OPTIMIZER = range(len(ALWAYS))
# The memory actions, per (chunk, micro-batch) like a forward. `recompute` re-runs the forward's ops before the
# backward (a compute job); `offload` / `reload` copy the activations to host memory and back on the rank's copy
# stream, beside its compute (their regions name what the runtime builds for them, not a part of the program).
# Their programs go between a stage's forward and its backward in a plan, in the order they run (offload, recompute,
# reload); the runtime makes them from the stage's forward and backward programs (`ppdsl.runtime.memory_jobs`).
RECOMPUTE_NAME, OFFLOAD_NAME, RELOAD_NAME = "recompute", "offload", "reload"
ACTIONS: tuple[Kind, ...] = (
    Kind(
        RECOMPUTE_NAME,
        "forward",
        "R",
        1.0,
        2,
        "bold white on dark_blue",
        "#7b9fd6",
        Memory.REBUILDS,
        after="forward",
        before=_GRADIENT,
        program=RECOMPUTE_NAME,
    ),
    Kind(
        OFFLOAD_NAME,
        "offload",
        "O",
        0.5,
        1,
        "bold black on orange1",
        "#f08a3c",
        Memory.MOVES_OUT,
        JobStream.COPY,
        after="forward",
        program=OFFLOAD_NAME,
    ),
    Kind(
        RELOAD_NAME,
        "reload",
        "L",
        0.5,
        3,
        "bold black on light_salmon1",
        "#c8642a",
        Memory.RESTORES,
        JobStream.COPY,
        after=OFFLOAD_NAME,
        before=_GRADIENT,
        program=RELOAD_NAME,
    ),
)

# The collectives: the gradient reductions a data-parallel or tied-parameter job adds to the pipeline, on the rank's
# collective stream (Paddle's sharding stream, where its VPP pass puts its `_reduce` jobs; PyTorch's REDUCE_GRAD).
# `reduce_grads` reduces one chunk's gradients over the rank's data-parallel replicas once a step (`chunk =` as a
# forward's; its micro-batch is always 0), after that chunk's last backward / backward_w, so it can overlap the
# other chunks' backwards. `sync_shared` all-reduces the gradients of parameters several stages hold (a tied
# embedding and head) among the ranks whose orders have it, once a step, after the rank's backwards and before its
# optimizer. Neither has a letter: a letter would take an alias some schedule's own job type may use.
REDUCE_GRADS_NAME, SYNC_SHARED_NAME = "reduce_grads", "sync_shared"
_GRADIENTS = ("backward", "backward_w")  # the kinds whose last job of a chunk completes its weight gradients
_APPLIES = ("optimizer",)  # what applies the reduced gradients: it waits for the rank's collectives to end
COLLECTIVES: tuple[Kind, ...] = (
    Kind(
        REDUCE_GRADS_NAME,
        REDUCE_GRADS_NAME,
        None,
        1.0,
        7,
        "bold white on dark_red",
        "#a23b3b",
        stream=JobStream.COLLECTIVE,
        before=_APPLIES,
        members=Members.REPLICAS,
        reduces=_GRADIENTS,
    ),
    Kind(
        SYNC_SHARED_NAME,
        SYNC_SHARED_NAME,
        None,
        0.5,
        7,
        "bold white on purple4",
        "#6a3d9a",
        stream=JobStream.COLLECTIVE,
        per_step=True,
        before=_APPLIES,
        members=Members.HOLDERS,
        reduces=_GRADIENTS,
    ),
)

# Every built-in kind by name, in table order: the five, the memory actions, the collectives. `register` adds to it
# in place, so readers that hold it see a registered row.
KINDS: dict[str, Kind] = {k.name: k for k in (*ALWAYS, *ACTIONS, *COLLECTIVES)}
_revision = [0]  # how many times `register` changed the table: readers that cache what they read off it key on it


def kind(name: str) -> Kind | None:
    """The built-in kind of this name (None: a schedule's own job type)."""
    return KINDS.get(name)


def memory_of(name: str) -> Memory:
    k = KINDS.get(name)
    return k.memory if k is not None else Memory.NONE


def stream_of(name: str) -> JobStream:
    k = KINDS.get(name)
    return k.stream if k is not None else JobStream.COMPUTE


def copies(name: str) -> bool:
    """Does a job of this kind run on the copy stream, beside the rank's compute?"""
    k = KINDS.get(name)
    return k is not None and k.stream is JobStream.COPY


def per_step(name: str) -> bool:
    """Does a job of this kind run once a step on each rank (the optimizer), not per micro-batch?"""
    k = KINDS.get(name)
    return k is not None and k.per_step


def is_action(name: str) -> bool:
    """Is this a memory action (a kind a schedule has only when it names one, acting on activations)?"""
    k = KINDS.get(name)
    return k is not None and k.acts_on_memory


def memory_actions() -> tuple[Kind, ...]:
    """The memory actions, in the order a schedule's job types list them."""
    return tuple(k for k in KINDS.values() if k.acts_on_memory)


def action_names() -> tuple[str, ...]:
    return tuple(k.name for k in KINDS.values() if k.acts_on_memory)


def is_collective(name: str) -> bool:
    """Does a job of this kind run on the collective stream, a rendezvous of its members?"""
    k = KINDS.get(name)
    return k is not None and k.collective


def collectives() -> tuple[Kind, ...]:
    """The collective kinds, in the order a schedule's job types list them (after the memory actions)."""
    return tuple(k for k in KINDS.values() if k.collective)


def by_letter(letter: str) -> Kind | None:
    """The built-in kind a schedule's alias names (`F` -> forward, `R` -> recompute)."""
    return next((k for k in KINDS.values() if k.letter == letter), None)


def letters() -> dict[str, str]:
    """letter -> name of every built-in kind that has one."""
    return {k.letter: k.name for k in KINDS.values() if k.letter}


def source_of(name: str) -> str:
    """The compute kind whose activations a memory action acts on: its `after`, through actions (a reload's
    offload's forward); a kind that is no action is its own."""
    k = KINDS.get(name)
    while k is not None and k.acts_on_memory and k.after:
        name, k = k.after, KINDS.get(k.after)
    return name


def counter_of(name: str) -> str:
    """The kind whose micro-batch counter a kind takes its micro-batches from (its own, unless it shares one)."""
    k = KINDS.get(name)
    return k.counter if k is not None and k.counter else name


@contextmanager
def register(new: Kind) -> Iterator[Kind]:
    """Add a row for the time of a `with` block (tests: a made-up kind that no caller knows by name). Only optional
    kinds (a memory action, a collective) may be added: the five every schedule has are the first indices of every
    schedule's job types."""
    if new.name in KINDS:
        raise ValueError(f"job kind `{new.name}` exists")
    if not new.optional:
        raise ValueError(f"job kind `{new.name}`: only an optional kind can be added (its indices move per schedule)")
    KINDS[new.name] = new
    _revision[0] += 1
    try:
        yield new
    finally:
        del KINDS[new.name]
        _revision[0] += 1


def revision() -> int:
    """Changes whenever the table does (`register`): a key for what a reader caches of it."""
    return _revision[0]


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


COMPUTE_TYPES = tuple(k.name for k in ALWAYS if k.torch)  # the types a micro-batch's compute consists of
REGIONS = tuple(k.region for k in ALWAYS)  # the regions a schedule's own job types may take ops from
# Names the runtime read before kinds were rows, kept until it asks the rows (`action_names()`, `KINDS`): views of
# the table at import time, so a `register`ed kind is not in them.
MEMORY_NAMES = tuple(k.name for k in ACTIONS)
BUILTIN = KINDS
BUILTIN_NAMES = tuple(KINDS)

# A schedule's own job type: no cost unless declared, programs after the built-in compute, shown in greys.
USER_PROGRAM_ORDER = 7
USER_STYLE = "bold black on cyan"
USER_COLOURS = ("#8a8a8a", "#a9a9a9", "#6f6f6f", "#c4c4c4")


def letter_of(name: str) -> str | None:
    k = KINDS.get(name)
    return k.letter if k else None


def default_cost(name: str) -> float:
    k = KINDS.get(name)
    return k.default_cost if k else 0.0


def program_order(name: str) -> int:
    k = KINDS.get(name)
    return k.program_order if k else USER_PROGRAM_ORDER


def style_of(name: str) -> str:
    k = KINDS.get(name)
    return k.style if k else USER_STYLE
