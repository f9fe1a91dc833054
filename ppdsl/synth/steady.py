"""The steady state of a found schedule: warm-up, a block repeated once per micro-batch (or per few), cool-down.

A search finds orders for one micro-batch count m. Most of them settle, after a warm-up, into a block that each
rank repeats while micro-batches stream through (1F1B's `backward_b backward_w forward`, ZB-V's rounds), and end
with a cool-down. Written with the language's micro-batch counters (each job statement takes the next
micro-batch of its type and stage), such an order holds at m + k * stride as well: the warm-up and the cool-down
stay as they are and the block repeats k more times. So `ppdsl synth` writes the block as
`repeat microbatches - c { ... }` and the file keeps working when a user changes the micro-batch count; the
checker proves it at each count the file's `require` admits (`ppdsl.synth` checks them before writing).

A block qualifies on a rank when it holds every (type, stage) the rank runs exactly `stride` times (so k more
repetitions run k * stride more micro-batches of each) and repeats at least twice. The stride is the same on every
rank, the smallest that gives every rank a block: 1 for one-chunk schedules, often pp for interleaved ones whose
rounds go pp micro-batches at a time. A rank whose backwards are whole for some micro-batches and split for others
has no such block (its counts differ by type), nor does an order the search left without a repeating middle; the
schedule is then written for its one size.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ppdsl.synth.problem import Problem
from ppdsl.synth.schedule import Order

Token = tuple[int, int]  # (type, stage): a job statement of the language, its micro-batch left to the counter
MIN_REPEATS = 2  # a block seen once is no steady state


@dataclass(frozen=True)
class RankSteady:
    """One rank's order as warm-up, `repeats` times the block (at the searched count), cool-down."""

    warmup: tuple[Token, ...]
    block: tuple[Token, ...]
    repeats: int
    cooldown: tuple[Token, ...]


@dataclass(frozen=True)
class SteadyForm:
    """Every rank's steady state; `stride` micro-batches go through each rank per repetition of its block."""

    microbatches: int  # the count the orders were found for
    stride: int
    ranks: tuple[RankSteady, ...]

    def repeats_offset(self, rank: int) -> int:
        """c in `repeats = (microbatches - c) // stride`: the micro-batches the warm-up and cool-down run."""
        return self.microbatches - self.ranks[rank].repeats * self.stride

    def admits(self, microbatches: int) -> bool:
        """Does the form run `microbatches` (the searched count, or more by whole strides)?"""
        extra = microbatches - self.microbatches
        return extra >= 0 and extra % self.stride == 0

    def orders(self, microbatches: int) -> list[list[Token]]:
        """Every rank's job statements at another count (`admits` it): the block repeated as often as it needs."""
        assert self.admits(microbatches)
        more = (microbatches - self.microbatches) // self.stride
        return [[*r.warmup, *r.block * (r.repeats + more), *r.cooldown] for r in self.ranks]


def tokens_of(orders: list[Order]) -> list[list[Token]]:
    return [[(t, s) for t, s, _ in order] for order in orders]


def rank_steady(tokens: list[Token], stride: int) -> RankSteady | None:
    """The longest-repeated block of `tokens` that holds each of its (type, stage) `stride` times, or None."""
    counts = Counter(tokens)
    size = stride * len(counts)
    n = len(tokens)
    if size == 0 or n < MIN_REPEATS * size:
        return None
    # run[j]: how many positions from j on equal the position one block later
    run = [0] * (n + 1)
    for j in range(n - size - 1, -1, -1):
        run[j] = run[j + 1] + 1 if tokens[j] == tokens[j + size] else 0
    best: tuple[int, int] | None = None  # (repeats, start)
    for start in range(n - size + 1):
        repeats = 1 + run[start] // size
        if repeats < MIN_REPEATS or (best is not None and repeats <= best[0]):
            continue
        block = Counter(tokens[start : start + size])
        if len(block) == len(counts) and all(c == stride for c in block.values()):
            best = (repeats, start)
    if best is None:
        return None
    repeats, start = best
    end = start + repeats * size
    return RankSteady(tuple(tokens[:start]), tuple(tokens[start : start + size]), repeats, tuple(tokens[end:]))


def steady_form(problem: Problem, orders: list[Order]) -> SteadyForm | None:
    """The orders' steady state, with the smallest stride (up to pp) at which every rank has one; None if none."""
    tokens = tokens_of(orders)
    m = problem.microbatches
    if any(c != m for rank_tokens in tokens for c in Counter(rank_tokens).values()):
        return None  # (whole and split backwards mixed on a stage: no block runs each type equally often)
    for stride in range(1, problem.pp + 1):
        if m < MIN_REPEATS * stride:
            break
        ranks = [rank_steady(rank_tokens, stride) for rank_tokens in tokens]
        if all(r is not None for r in ranks):
            return SteadyForm(m, stride, tuple(r for r in ranks if r is not None))
    return None
