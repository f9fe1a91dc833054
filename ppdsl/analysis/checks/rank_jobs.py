"""One rank's order indexed by job (`RankJobs`), built once per rank in one pass over its jobs, so that a check is a
walk over the rank's (chunk, micro-batch) pairs and never searches the order."""

from __future__ import annotations

from dataclasses import dataclass

from ppdsl.analysis.expansion import Expansion
from ppdsl.plan.kinds import BACKWARD, BACKWARD_B, BACKWARD_W


@dataclass
class RankJobs:
    """One rank's order indexed by job: `pos[code]` is the step of job `code` (-1: never runs), for codes of
    micro-batches 0 .. microbatches - 1; `outside` lists the steps of jobs of other micro-batches, `repeats`
    (step, first step) of jobs that run again."""

    exp: Expansion
    rank: int
    aux: list[int]  # the auxiliary job types the schedule uses
    pos: list[int]
    outside: list[int]
    repeats: list[tuple[int, int]]
    # code -> (step, site) of each `reduce_grads` dp 1 leaves out (`Expansion.lone_reductions`), step the job it
    # stood before
    lone: dict[int, tuple[int, int]]

    def site(self, step: int) -> int:
        """The statement (site id) that emitted the job at `step`."""
        return self.exp.sites[self.rank][step]

    @property
    def end_site(self) -> int:
        """Where the order ends: the statement of the rank's last job (the order itself if it has none)."""
        sites = self.exp.sites[self.rank]
        return sites[-1] if sites else 0

    def placed(self, code: int) -> tuple[float, int] | None:
        """(position, site) of job `code` in the order the file wrote: its step, or for a reduction dp 1 leaves
        out, half a step before the job it stood before; None when the order has no such job."""
        step = self.pos[code] if code < len(self.pos) else -1
        if step >= 0:
            return float(step), self.site(step)
        if code in self.lone:
            before, site = self.lone[code]
            return before - 0.5, site
        return None

    def steps(self, t: int) -> list[int]:
        """The step of job type `t` of every (chunk, micro-batch), in code order (-1: never runs): a slice of `pos`,
        so that a check can first ask, at C speed, whether anything is wrong at all."""
        return self.pos[self.exp.codec.type_slice(t)]

    def gradient_steps(self) -> list[int]:
        """Per (chunk, micro-batch), the step of the job that computes its input gradient: the whole backward, or
        the split one's backward_b (the later of the two where a micro-batch has both, which S102 reports)."""
        whole, split = self.steps(BACKWARD), self.steps(BACKWARD_B)
        if min(whole, default=0) >= 0 or max(split, default=-1) < 0:
            return whole
        if max(whole, default=-1) < 0:
            return split
        return list(map(max, whole, split))

    def backward_split(self, base: int) -> tuple[int, int, int] | None:
        """Steps of (backward, backward_b, backward_w) of the micro-batch whose codes start at `base`, or None when it
        has both a whole and a split backward (S102 reports it; the other checks skip it)."""
        pos = self.pos
        b, bb, bw = pos[base + BACKWARD], pos[base + BACKWARD_B], pos[base + BACKWARD_W]
        if b >= 0 and (bb >= 0 or bw >= 0):
            return None
        return b, bb, bw

    def bases(self):
        """The first code of every (chunk, micro-batch) the rank owns, with that chunk and micro-batch."""
        exp = self.exp
        base = exp.codec.base
        for c in range(exp.vpp):
            for mb in range(exp.microbatches):
                yield base(c, mb), c, mb


def index_rank(exp: Expansion, rank: int, aux: list[int]) -> RankJobs:
    size = exp.codec.size(exp.microbatches)
    pos = [-1] * size
    outside: list[int] = []
    repeats: list[tuple[int, int]] = []
    for i, code in enumerate(exp.jobs[rank]):
        if code >= size:
            outside.append(i)
        elif pos[code] >= 0:
            repeats.append((i, pos[code]))
        else:
            pos[code] = i
    lone: dict[int, tuple[int, int]] = {}
    for code, before, site in exp.lone_reductions[rank] if exp.lone_reductions else ():
        lone.setdefault(code, (before, site))  # (a second one of the same code: E093 reads the first)
    return RankJobs(exp, rank, aux, pos, outside, repeats, lone)


def used_types(exp: Expansion) -> set[int]:
    """Job types that occur anywhere in the expansion."""
    codec = exp.codec
    seen: set[int] = set()
    for jobs in exp.jobs:
        seen.update(codec.types_in(jobs))
        if len(seen) == codec.ntypes:
            break
    return seen
