"""The one way into the pipeline: a schedule at given sizes, with parameters, costs and communication semantics.

Every command that evaluates a schedule (`check`, `simulate`, `trace`, `plot`, `compare`, `sweep`, `compile`,
`run`, `synth`) builds a `Scenario` and asks it for what it needs:

    scenario = Scenario("1f1b", pp=4, microbatches=8, costs=CostSpec({"backward": 2.5}))
    scenario.expansion()   # every rank's job order, costs and memory applied
    check(scenario)        # the checker's verdict and measures (never raises; `ppdsl.analysis.check`)

A schedule is a library name (`1f1b`), a path, or an already resolved `ScheduleDef`.

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
    the schedule's own `memory limit` on every rank (in the units of `memory`, activations by default).
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
    dp: int = 1  # data-parallel replicas of each pipeline rank (`reduce_grads` reduces over them)
    _definition: ScheduleDef | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.schedule, ScheduleDef):
            self._definition = self.schedule
        if self.costs is not None and not isinstance(self.costs, CostSpec):
            self.costs = CostSpec(dict(self.costs))

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
        if memory is not None and not isinstance(memory, MemoryModel):
            # measured on the program as these orders cut it: their expansion in activations comes first
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
            dp=self.dp,
        )

    def with_(self, **changes) -> Scenario:
        """The same scenario with some fields changed (the loaded schedule is kept when it is the same)."""
        other = replace(self, **changes)
        if "schedule" not in changes:
            other._definition = self._definition
        return other

    @property
    def sizes(self) -> str:
        dp = f" dp={self.dp}" if self.dp != 1 else ""
        return f"pp={self.pp} vpp={self.vpp} microbatches={self.microbatches}{dp}"
