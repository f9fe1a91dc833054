"""The one way into the pipeline: a schedule at given sizes, with parameters, costs and communication semantics.

Every command that evaluates a schedule (`check`, `simulate`, `trace`, `plot`, `compare`, `sweep`, `compile`,
`run`, `synth`) builds a `Scenario` and asks it for what it needs:

    scenario = Scenario("1f1b", pp=4, microbatches=8, costs=CostSpec({"backward": 2.5}))
    scenario.expansion()   # every rank's job order, costs and memory applied
    check(scenario)        # the checker's verdict and measures (never raises; `ppdsl.analysis.check`)

A schedule is a library name (`1f1b`), a path, or an already resolved `ScheduleDef`.

A model's layers (`layers`, a `LayerProfile` from `--layers FILE`) and how they are split into stages
(`partition`: `--partition`, else the file's `partition` statement, else an even split when a profile is given)
give each stage's costs and activations (`ppdsl.analysis.layers.stage_work`), applied while the expansion is
built, under the costs from outside.

Memory measured on a real program (`--model`) needs the runtime, which this layer must not import: the caller
passes `memory`, a `MemoryModel` (the activation table in bytes), or how to measure one on the program as this
scenario's orders cut it (`ppdsl.runtime.memory.model_memory`). Either way the expansion is built with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS, expand
from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.layers import (
    LayerProfile,
    Partition,
    StageWork,
    even_partition,
    parse_partition,
    read_profile,
    stage_work,
)
from ppdsl.analysis.memory import MeasureMemory, MemoryModel
from ppdsl.language.ir import ScheduleDef
from ppdsl.language.library import find_schedule
from ppdsl.language.resolve import load

ParamValue = int | float | bool | str  # text as written on the command line, read against the parameter's type


@dataclass
class Scenario:
    """A schedule at sizes pp / microbatches / vpp, with its parameters, costs and communication semantics.

    `costs`: a `CostSpec`, or `--cost`-style pairs (`{"forward": 1, "latency": 0.1}`). `rendezvous`: a send
    waits for its receive (a blocking transport) instead of leaving on a send stream. `memory_limit` replaces
    the schedule's own `memory limit` on every rank (in the units of `memory`, activations by default; with a
    partition, a layer's activation). `layers` / `partition`: the model's layer profile and its split into virtual
    stages (a `Partition`, or its text: `9,10,9,6` or a Megatron layout); see the module.
    `max_jobs`: sizes whose expansion needs more jobs are refused before anything runs (every command that
    evaluates a schedule comes through here, so each is bounded the same way).
    """

    schedule: str | Path | ScheduleDef
    pp: int
    microbatches: int
    vpp: int = 1
    params: Mapping[str, ParamValue] | None = None
    costs: CostSpec | Mapping[str, float] | None = None
    rendezvous: bool = False
    memory: MemoryModel | MeasureMemory | None = None
    memory_limit: float | None = None
    max_jobs: int = DEFAULT_MAX_JOBS
    layers: LayerProfile | str | Path | None = None
    partition: Partition | str | None = None
    dp: int = 1  # data-parallel replicas of each pipeline rank (`reduce_grads` reduces over them)
    _definition: ScheduleDef | None = field(default=None, init=False, repr=False, compare=False)
    _profile: LayerProfile | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.schedule, ScheduleDef):
            self._definition = self.schedule
        if self.costs is not None and not isinstance(self.costs, CostSpec):
            self.costs = CostSpec(dict(self.costs))
        if isinstance(self.layers, LayerProfile):
            self._profile = self.layers

    @property
    def path(self) -> str:
        """Where the schedule comes from, as diagnostics name it."""
        if isinstance(self.schedule, ScheduleDef):
            return self.schedule.path
        return str(find_schedule(str(self.schedule)))

    def definition(self) -> ScheduleDef:
        """The resolved schedule (loaded once); raises DiagnosticError when the file does not load."""
        if self._definition is None:
            self._definition = load(self.path)
        return self._definition

    def expansion(self) -> Expansion:
        """A fresh expansion at these sizes: the orders run, with the costs, the memory model and the limit.
        Raises DiagnosticError (the file, the sizes, the parameters or the costs are wrong)."""
        costs = self.costs if isinstance(self.costs, CostSpec) else None
        memory = self.memory
        work = self.stage_work()
        if memory is not None and not isinstance(memory, MemoryModel):
            # measured on the program as these orders cut it (and the partition splits it: the runtime places the
            # model's layers by it, ppdsl/runtime/memory.py): their expansion in activations comes first
            memory = memory(self.with_(memory=None, memory_limit=None).expansion())
        return expand(
            self.definition(),
            self.pp,
            self.microbatches,
            self.vpp,
            dict(self.params or {}),
            self.max_jobs,
            costs=costs,
            memory=memory,
            memory_limit=self.memory_limit,
            stages=work,
            dp=self.dp,
        )

    def chosen_partition(self) -> Partition | None:
        """The partition in force: the one given, else the file's, else an even split of the profile's layers;
        None without any (the schedule's own costs, one activation a job)."""
        if isinstance(self.partition, str):
            return parse_partition(self.partition)
        if self.partition is not None:
            return self.partition
        declared = self.definition().partition
        if declared is not None:
            if declared.counts is not None:
                return Partition(declared.counts, declared.allow_empty, span=declared.span)
            found = parse_partition(declared.layout or "", declared.span)
            return replace(found, allow_empty=declared.allow_empty)
        profile = self.profile()
        if profile is not None:
            return even_partition(len(profile.layers), self.pp * self.vpp)
        return None

    def profile(self) -> LayerProfile | None:
        """The layer profile (a path is read once, under the file reader's rules; E100-E102 for a bad one)."""
        if self._profile is None and self.layers is not None:
            self._profile = self.layers if isinstance(self.layers, LayerProfile) else read_profile(self.layers)
        return self._profile

    def stage_work(self) -> StageWork | None:
        """Each virtual stage's costs and activation under the partition in force (checked against the sizes and
        the profile: E104, E105); None without a partition."""
        partition = self.chosen_partition()
        if partition is None:
            return None
        return stage_work(partition, self.pp * self.vpp, self.profile(), f"pp={self.pp} x vpp={self.vpp}")

    def with_(self, **changes) -> Scenario:
        """The same scenario with some fields changed (the loaded schedule is kept when it is the same)."""
        other = replace(self, **changes)
        if "schedule" not in changes:
            other._definition = self._definition
        if "layers" not in changes:
            other._profile = self._profile
        return other

    @property
    def sizes(self) -> str:
        dp = f" dp={self.dp}" if self.dp != 1 else ""
        return f"pp={self.pp} vpp={self.vpp} microbatches={self.microbatches}{dp}"
