"""A job's identity: one value type, one packed-int encoding, one text form.

A job is a job type, a place and a micro-batch. The place is spelled two ways, by who looks:

* inside a rank's order, the rank's *chunk* (a rank holds `vpp` chunks): `JobCodec` packs (type, chunk,
  micro-batch) into one int, the form every `Expansion` keeps its orders in (262,144 jobs cost one Python int
  each), the order compiler emits and the checks index tables by:

      code = (microbatch * vpp + chunk) * ntypes + type

* across the pipeline, the global *stage*: `Job(type, stage, mb)`, the form the synthesizer's orders, PyTorch's
  action tokens (`1F0`: stage 1, forward, micro-batch 0) and the reports use. `Job` is a NamedTuple, so a
  plain `(type, stage, mb)` tuple compares and hashes equal to it: hot loops may build plain tuples.

This module is the only place that packs or unpacks a code, or writes or parses a token; everything else calls
it. The hottest loops (the executor, the synthesizer's evaluator) split a code by `JobCodec.stride` into its
micro-batch and its slot and read per-slot tables that `JobCodec.slots` lays out; other loops use the bulk
helpers (`types_of`, `chunks_of`, `types_in`) rather than repeat the arithmetic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from ppdsl.plan.kinds import ALWAYS

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
