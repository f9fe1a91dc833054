"""A schedule bound to sizes: every rank's job order, and the cost and memory tables the checks need.

`Expansion` binds pp / vpp / microbatches / params to a `ScheduleDef` and holds every rank's job order as
packed integers (`ppdsl.plan.jobs.JobCodec`, the one encoding), so that 262,144 jobs cost one Python int
each. Every later stage (checks, execution, reports, codegen, the
runtime) reads an `Expansion`.

An `Expansion` is a value: `ppdsl.analysis.expand.expand` builds it with every input applied (the orders, the
costs from outside, the memory model, the limit), and nothing writes into it afterwards. A changed one is a new
one (`ppdsl.analysis.expand.scale_costs`, or `dataclasses.replace` for other job orders over the same tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ppdsl.analysis.layers import StageWork
from ppdsl.language.ir import ScheduleDef, StreamRule
from ppdsl.plan.jobs import Job, JobCodec, pack_code, unpack_code


@dataclass(frozen=True)
class Expansion:
    """A schedule bound to sizes: per-rank job orders plus the cost and memory tables the checks need."""

    defn: ScheduleDef
    pp: int
    vpp: int
    microbatches: int
    params: dict[str, int | float | bool]
    stage_of: list[list[int]]  # [rank][chunk] -> global stage
    jobs: list[list[int]]  # [rank] -> packed job codes, in execution order
    sites: list[list[int]]  # [rank] -> site id of each job
    cost: list[list[list[float]]]  # [type][rank][chunk]
    latency: float
    bandwidth: float | None
    mem_delta: list[list[list[float]]]  # [type][rank][chunk]: activation units a job adds (negative: frees)
    memory_limit: list[float | None]  # [rank]
    rules: list[StreamRule]  # with priorities evaluated for these sizes
    memory_unit: str = "activations"  # or "bytes", with a memory model measured on a real program
    memory_limit_given: bool = False  # the limit came from outside the schedule (`--memory-limit`)
    host_limit: float | None = None  # `memory host limit`: all ranks' offloaded memory together
    copy_duplex: bool = False  # `comm offload duplex`: a copy stream per direction, else one copy at a time
    # [type][rank][chunk]: what a job receives from another job (a stage's input, a gradient), held on its rank from
    # its sender's start to its own end (`analysis.memory`); None: nothing counted (a declared memory model)
    mem_received: list[list[list[float]]] | None = None
    # a partition of the model's layers (`--partition`, `--layers`, a file's `partition`): each stage's work, which
    # the cost and memory tables already hold; None: the schedule's own costs and one activation a job
    stage_work: StageWork | None = None
    dp: int = 1  # data-parallel replicas of each rank: they run its order and join its `reduce_grads`
    # [rank] -> (code, step, site) of each `reduce_grads` the order places that dp 1 leaves out (a reduction over
    # one replica is no work), `step` the job it stood before: where the file puts them is still checked (E093,
    # E094), so a misplaced one is found at dp 1, not first on a cluster at dp 2
    lone_reductions: list[list[tuple[int, int, int]]] = field(default_factory=list)

    @property
    def ntypes(self) -> int:
        return len(self.defn.job_types)

    @property
    def nstages(self) -> int:
        return self.pp * self.vpp

    @property
    def type_names(self) -> list[str]:
        return [jt.name for jt in self.defn.job_types]

    @property
    def codec(self) -> JobCodec:
        """How this expansion's job codes pack (type, chunk, micro-batch)."""
        return JobCodec(len(self.defn.job_types), self.vpp)

    def with_orders(self, jobs: list[list[int]], sites: list[list[int]]) -> Expansion:
        """A copy with other orders (the original left alone): the tables are the same, and the reductions dp 1 left
        out of the file's order are no longer where these orders put anything (`lone_reductions`: none)."""
        return replace(self, jobs=jobs, sites=sites, lone_reductions=[])

    def decode(self, code: int) -> tuple[int, int, int]:
        """(type index, chunk, micro-batch) of a packed job code."""
        return unpack_code(code, len(self.defn.job_types), self.vpp)

    def encode(self, t: int, chunk: int, mb: int) -> int:
        return pack_code(t, chunk, mb, len(self.defn.job_types), self.vpp)

    def job(self, rank: int, code: int) -> Job:
        """The job a code of `rank`'s order names, with its global stage."""
        t, chunk, mb = self.decode(code)
        return Job(t, self.stage_of[rank][chunk], mb)

    def rank_of_stage(self) -> list[tuple[int, int]]:
        """[stage] -> (rank, chunk)."""
        out = [(0, 0)] * self.nstages
        for r, row in enumerate(self.stage_of):
            for c, s in enumerate(row):
                out[s] = (r, c)
        return out

    def label(self, code: int) -> str:
        """Compact job name: `F3`, `B0.c1`, `backward_w2`, `optimizer`."""
        t, chunk, mb = self.decode(code)
        return self.defn.job_types[t].label(chunk, mb, self.vpp)

    def job_tuples(self, rank: int) -> list[tuple[str, int, int]]:
        """(type name, chunk, micro-batch) in order: the form Paddle's job lists and generated plans use."""
        names = self.type_names
        return [(names[t], c, mb) for t, c, mb in map(self.decode, self.jobs[rank])]
