"""A job's identity: one value type, one packed-int encoding, one text form.

A job is a job type, a place and a micro-batch. The place is spelled two ways, by who looks:

* inside a rank's order, the rank's *chunk* (a rank holds `vpp` chunks): `JobCodec` packs (type, chunk,
  micro-batch) into one int, the form every `Expansion` keeps its orders in (262,144 jobs cost one Python int
  each), the order compiler emits and the checks index tables by:

      code = (microbatch * vpp + chunk) * ntypes + type

* across the pipeline, the global *stage*: `Job(type, stage, mb)`, the form the synthesizer's orders, PyTorch's
  action tokens (`1F0`: stage 1, forward, micro-batch 0) and the reports use. `Job` is a NamedTuple, so a
  plain `(type, stage, mb)` tuple compares and hashes equal to it: hot loops may build plain tuples.

A job has three names besides, each derived here once: its *program key* (`program_key`: the job program it
runs, a type on a stage, the optimizer on a rank) and that program's name in a one-process plan (`program_name`,
`forward@2`, `optimizer@r1`); its *Paddle job name* (`paddle_job_name`: `forward`, or `forward1` for chunk 1, as
Paddle's pipeline passes name a rank's jobs); and its *label* (`job_label`: `F3`, `B0.c1`), what messages, traces
and pictures show.

This module is the only place that packs or unpacks a code, or writes or parses a token; everything else calls
it. The hottest loops (the executor, the synthesizer's evaluator) split a code by `JobCodec.stride` into its
micro-batch and its slot and read per-slot tables that `JobCodec.slots` lays out; other loops use the bulk
helpers (`types_of`, `chunks_of`, `types_in`) rather than repeat the arithmetic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ppdsl.common.text import number_text
from ppdsl.plan.kinds import ALWAYS, per_step

# PyTorch's computation letters for the built-in compute types, by type index (F, B, I, W: their rows' `torch`)
LETTER_OF: dict[int, str] = {t: k.torch for t, k in enumerate(ALWAYS) if k.torch}
TYPE_OF_LETTER: dict[str, int] = {letter: t for t, letter in LETTER_OF.items()}
# `1F0`; a type without a letter (the optimizer, a schedule's own job types) by its index in brackets: `0[4]0`
_TOKEN = re.compile(r"([0-9]+)(?:([A-Z])|\[([0-9]+)\])([0-9]+)")


class Job(NamedTuple):
    """A job across the pipeline: type index (`ppdsl.plan.kinds`), global stage, micro-batch."""

    type: int
    stage: int
    mb: int

    def __str__(self) -> str:
        """PyTorch's action token: `<stage><F|B|I|W><micro-batch>` (`1F0`, `0W3`)."""
        letter = LETTER_OF.get(self.type)
        kind = letter if letter is not None else f"[{self.type}]"
        return f"{self.stage}{kind}{self.mb}"

    @classmethod
    def parse(cls, token: str) -> Job:
        """The job a token names (the inverse of `str`); raises ValueError for anything else."""
        m = _TOKEN.fullmatch(token)
        if m is None:
            raise ValueError(f"`{token}` is not a job token (`<stage><F|B|I|W><micro-batch>`, e.g. `1F0`)")
        stage, letter, index, mb = m.groups()
        if letter is not None:
            if letter not in TYPE_OF_LETTER:
                raise ValueError(f"`{token}`: unknown job letter `{letter}` (F, B, I or W)")
            t = TYPE_OF_LETTER[letter]
        else:
            t = int(index)
        return cls(t, int(stage), int(mb))

    @property
    def letter(self) -> str | None:
        return LETTER_OF.get(self.type)


def pack_code(t: int, chunk: int, mb: int, ntypes: int, vpp: int) -> int:
    """The code of (type, chunk, micro-batch) among `ntypes` job types and `vpp` chunks a rank: the formula."""
    return (mb * vpp + chunk) * ntypes + t


def unpack_code(code: int, ntypes: int, vpp: int) -> tuple[int, int, int]:
    """(type, chunk, micro-batch) of a code: the inverse of `pack_code`."""
    rest, t = divmod(code, ntypes)
    mb, chunk = divmod(rest, vpp)
    return t, chunk, mb


@dataclass(frozen=True, slots=True)
class JobCodec:
    """The packing of (type, chunk, micro-batch) into one int, for `ntypes` job types and `vpp` chunks a rank."""

    ntypes: int
    vpp: int

    def pack(self, t: int, chunk: int, mb: int) -> int:
        return pack_code(t, chunk, mb, self.ntypes, self.vpp)

    def unpack(self, code: int) -> tuple[int, int, int]:
        """(type, chunk, micro-batch) of a code."""
        return unpack_code(code, self.ntypes, self.vpp)

    @property
    def stride(self) -> int:
        """Codes per micro-batch: a code is `mb * stride + slot(t, chunk)`. The hottest loops split a code with
        `//` and `%` by `stride` and read per-rank tables indexed by slot (built with `slots`), which is faster
        than unpacking three numbers and indexing three deep."""
        return self.ntypes * self.vpp

    def slot(self, t: int, chunk: int) -> int:
        return chunk * self.ntypes + t

    def slots(self) -> list[tuple[int, int, int]]:
        """(slot, type, chunk) of every slot, in slot order."""
        return [(self.slot(t, c), t, c) for c in range(self.vpp) for t in range(self.ntypes)]

    def type_of(self, code: int) -> int:
        return code % self.ntypes

    def chunk_of(self, code: int) -> int:
        return (code // self.ntypes) % self.vpp

    def microbatch_of(self, code: int) -> int:
        return code // (self.ntypes * self.vpp)

    def base(self, chunk: int, mb: int) -> int:
        """The code of type 0 of (chunk, micro-batch): type t's code is `base + t`."""
        return (mb * self.vpp + chunk) * self.ntypes

    def size(self, microbatches: int) -> int:
        """How many codes micro-batches 0 .. microbatches - 1 have (a code at or above it is out of range)."""
        return microbatches * self.vpp * self.ntypes

    def type_slice(self, t: int) -> slice:
        """Where type t's codes are in a table indexed by code (a table of `size` entries)."""
        return slice(t, None, self.ntypes)

    def types_in(self, codes: Iterable[int]) -> set[int]:
        """The job types among `codes`."""
        n = self.ntypes
        return {code % n for code in codes}

    def types_of(self, codes: list[int]) -> list[int]:
        """The type of every code of a list, for loops that need nothing else."""
        n = self.ntypes
        return [code % n for code in codes]

    def chunks_of(self, codes: list[int]) -> list[int]:
        n, v = self.ntypes, self.vpp
        return [(code // n) % v for code in codes]

    @staticmethod
    def pack_source(t: int, chunk: str, mb: str, vpp: str, ntypes: str) -> str:
        """`pack` as Python source over variables (the order compiler's generated code); chunk "0" folds."""
        if chunk == "0":
            return f"{mb} * {vpp} * {ntypes} + {t}"
        return f"({mb} * {vpp} + {chunk}) * {ntypes} + {t}"


# ---------------------------------------------------------------------- a job's program, Paddle name and label


@dataclass(frozen=True)
class ProgramKey:
    """One job program: a job type on a stage, or a kind that runs once a step (the optimizer) on a rank: one
    program for all the rank's stages."""

    type: str
    stage: int  # the rank, for a kind that runs once a step

    @property
    def per_rank(self) -> bool:
        return per_step(self.type)


def program_key(type_name: str, rank: int, chunk: int, stage_of: Sequence[Sequence[int]]) -> ProgramKey:
    """The program a job of `type_name` on (`rank`, `chunk`) runs, with stages placed by `stage_of` ([rank][chunk])."""
    if per_step(type_name):
        return ProgramKey(type_name, rank)
    return ProgramKey(type_name, stage_of[rank][chunk])


def program_name(key: ProgramKey) -> str:
    """A program's name when every rank's programs are in one plan: `<type>@<stage>`, the optimizer's
    `optimizer@r<rank>`. Paddle's profiler names a job's events after it (`forward@2-5`); `program_key_of` reads
    it back."""
    return f"{key.type}@r{key.stage}" if key.per_rank else f"{key.type}@{key.stage}"


_PROGRAM_NAME = re.compile(r"(?P<type>[A-Za-z_][A-Za-z0-9_]*)@(?P<rank>r)?(?P<where>[0-9]+)")


def program_key_of(name: str) -> ProgramKey | None:
    """The key `program_name` wrote `name` from; None for a name it cannot have written."""
    m = _PROGRAM_NAME.fullmatch(name)
    if m is None or (m.group("rank") is not None) != per_step(m.group("type")):
        return None
    return ProgramKey(m.group("type"), int(m.group("where")))


def paddle_job_name(type_name: str, chunk: int, vpp: int) -> str:
    """Paddle's name for a job of one rank's plan, as its pipeline passes name them: `forward`, or `forward1` for
    chunk 1 when vpp > 1; a kind that runs once a step (the optimizer) is its type."""
    return type_name if per_step(type_name) or vpp == 1 else f"{type_name}{chunk}"


def job_label(name: str, short: str, chunk: int, mb: int, vpp: int, once_a_step: bool = False) -> str:
    """A job's compact name: `F3`, `B0.c1` (chunk 1, with vpp > 1), `recv_forward2`, `optimizer` (a kind that runs
    once a step, `once_a_step`: its name). `short` is its type's label prefix (PyTorch's letter, else its alias, else
    its name). The one spelling of a label: the language's job types and the plan specification both call it."""
    if once_a_step:
        return name
    return f"{short}{number_text(mb)}" + (f".c{chunk}" if vpp > 1 else "")
