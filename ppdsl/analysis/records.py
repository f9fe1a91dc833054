"""Records several layers share: a job with its times, and an activation or gradient on its way between ranks.

The simulator writes both (`ppdsl.reports.simulate`), a measured profile is read back as job records
(`ppdsl.reports.trace`, `ppdsl.runtime.profile`), and pictures and traces draw either source the same way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobRecord:
    rank: int
    step: int
    type: str
    chunk: int
    microbatch: int
    stage: int
    label: str
    start: float
    end: float


@dataclass(slots=True)  # a large simulation logs 10^5 of these
class Transfer:
    """One activation (stage -> stage + 1) or gradient (stage -> stage - 1) of a micro-batch: sent by job `step`
    of `src_rank` when its send stream is free (`start`), arriving at `dst_rank` at `end`."""

    src_rank: int
    step: int
    stage: int  # the sending stage
    microbatch: int
    gradient: bool
    start: float
    end: float
    dst_rank: int

    @property
    def to_stage(self) -> int:
        return self.stage - 1 if self.gradient else self.stage + 1
