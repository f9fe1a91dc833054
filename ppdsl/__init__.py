"""ppdsl: pipeline-parallel training schedules as declarative `.sched` files.

The Python API, for notebooks and tools (the `ppdsl` command is built on it):

    import ppdsl

    result = ppdsl.check("1f1b", pp=4, microbatches=8)       # a library name, a path, or a loaded schedule
    result.valid, result.makespan, result.bubble_ratio          # True, 33.0, 0.2727...
    [r.peak_activations for r in result.ranks]                  # [4.0, 3.0, 2.0, 1.0]
    for d in result.diagnostics: print(d.code, d.message)

    exp = ppdsl.expand("zbv", pp=4, microbatches=8, vpp=2)      # every rank's job order
    exp.job_tuples(0)                                           # [("forward", 0, 0), ...]
    sim = ppdsl.simulate("zbh1", pp=4, microbatches=8, costs={"backward_b": 1.5, "latency": 0.1})
    text = ppdsl.compile("1f1b")                                # a plan module (Python source)
    found = ppdsl.synthesize(pp=4, microbatches=8, memory_limit=4)  # the fastest schedule within the limit
    found.text, found.result.makespan, found.result.optimal     # a .sched the checker proves, 27.0, True
    report = ppdsl.run("1f1b", pp=2, microbatches=4, steps=5, model="tiny_mlp")  # trains (paddle): a RunReport
    report.final_loss, report.step_seconds, report.to_json()    # the same figures as `ppdsl run --summary-json`

`costs` takes `--cost`-style pairs (job types, `latency`, `bandwidth`), a `CostSpec`, or the path of a cost
file from `ppdsl calibrate`. Errors in a schedule come back as diagnostics in `check`'s result; the other
functions raise `DiagnosticError` (its `.diagnostics` are the same objects). Nothing here imports paddle but
`run`, and `synthesize` with a `model` to measure, when called.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ppdsl.common.version import __version__

if TYPE_CHECKING:
    from ppdsl.analysis.check import CheckResult
    from ppdsl.analysis.costs import CostSpec
    from ppdsl.analysis.expansion import Expansion
    from ppdsl.analysis.scenario import Scenario
    from ppdsl.language.ir import ScheduleDef
    from ppdsl.reports.simulate import Simulation
    from ppdsl.runtime.request import RunRequest
    from ppdsl.runtime.run import RunObserver, RunReport
    from ppdsl.synth import SynthOutcome

F = TypeVar("F", bound=Callable[..., object])

__all__ = [
    "CheckResult",
    "CostSpec",
    "DiagnosticError",
    "RunReport",
    "RunRequest",
    "Scenario",
    "__version__",
    "check",
    "compile",
    "expand",
    "load",
    "run",
    "scenario",
    "simulate",
    "synthesize",
]


def _keywords_checked(function: F) -> F:
    """`function`, answering a keyword it does not take as `run` does (E007, `did you mean `microbatches`?`). A
    function that takes `**options` checks them itself, against the fields they fill (`synthesize`)."""
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return function
    known = [
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]

    @functools.wraps(function)
    def checked(*args, **kwargs):
        _refuse_unknown_options(f"ppdsl.{function.__name__}", kwargs, known)
        return function(*args, **kwargs)

    return typing.cast(F, checked)


def load(schedule: str | Path) -> ScheduleDef:
    """Read and resolve a schedule: a shipped name (`1f1b`) or a `.sched` path. Raises DiagnosticError."""
    from ppdsl.language.library import find_schedule
    from ppdsl.language.resolve import load as load_file

    return load_file(find_schedule(str(schedule)))


@_keywords_checked
def scenario(
    schedule: str | Path | ScheduleDef,
    *,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: Mapping[str, int | float | bool] | None = None,
    costs: Mapping[str, float] | CostSpec | str | Path | None = None,
    rendezvous: bool = False,
    memory_limit: float | None = None,
) -> Scenario:
    """The `Scenario` these arguments describe (what every function below evaluates)."""
    from ppdsl.analysis.costs import CostSpec
    from ppdsl.analysis.scenario import Scenario

    if isinstance(costs, (str, Path)):
        costs = CostSpec.read(None, costs)
    return Scenario(schedule, pp, microbatches, vpp, params, costs, rendezvous, memory_limit=memory_limit)


@_keywords_checked
def check(
    schedule: str | Path | ScheduleDef,
    *,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: Mapping[str, int | float | bool] | None = None,
    costs: Mapping[str, float] | CostSpec | str | Path | None = None,
    rendezvous: bool = False,
    memory_limit: float | None = None,
) -> CheckResult:
    """Prove a schedule complete, ordered and deadlock-free at these sizes, and measure it (never raises for a
    wrong schedule: see `.valid` and `.diagnostics`)."""
    from ppdsl.analysis.check import check as check_scenario

    return check_scenario(
        scenario(
            schedule,
            pp=pp,
            microbatches=microbatches,
            vpp=vpp,
            params=params,
            costs=costs,
            rendezvous=rendezvous,
            memory_limit=memory_limit,
        )
    )


@_keywords_checked
def expand(
    schedule: str | Path | ScheduleDef,
    *,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: Mapping[str, int | float | bool] | None = None,
    costs: Mapping[str, float] | CostSpec | str | Path | None = None,
) -> Expansion:
    """Every rank's job order at these sizes (not checked: see `check`). Raises DiagnosticError."""
    return scenario(schedule, pp=pp, microbatches=microbatches, vpp=vpp, params=params, costs=costs).expansion()


@_keywords_checked
def simulate(
    schedule: str | Path | ScheduleDef,
    *,
    pp: int,
    microbatches: int,
    vpp: int = 1,
    params: Mapping[str, int | float | bool] | None = None,
    costs: Mapping[str, float] | CostSpec | str | Path | None = None,
    rendezvous: bool = False,
) -> Simulation:
    """The schedule run under its costs: job records, transfers, memory over time. Raises DiagnosticError when
    the schedule is not valid at these sizes."""
    from ppdsl.reports.simulate import simulate as run

    return run(
        scenario(schedule, pp=pp, microbatches=microbatches, vpp=vpp, params=params, costs=costs, rendezvous=rendezvous)
    )


@_keywords_checked
def compile(
    schedule: str | Path | ScheduleDef,
    *,
    pp: int | None = None,
    microbatches: int | None = None,
    vpp: int = 1,
    params: Mapping[str, int | float | bool] | None = None,
    literal: bool = False,
) -> str:
    """The schedule's plan module (Python source, what `ppdsl compile` writes). With sizes, the schedule is
    checked at them first; `literal` makes `job_list` the expanded order of those sizes. Raises DiagnosticError."""
    from ppdsl.analysis.check import check as check_scenario
    from ppdsl.codegen.generate import generate_plan_module
    from ppdsl.common.diagnostics import Diagnostic, DiagnosticError

    if (pp is None) != (microbatches is None) or (literal and pp is None):
        raise DiagnosticError([Diagnostic("E007", "give both `pp` and `microbatches` (required with `literal`)")])
    spec = scenario(schedule, pp=pp or 1, microbatches=microbatches or 1, vpp=vpp, params=params)
    defn = spec.definition()
    if pp is not None:
        result = check_scenario(spec)
        if not result.valid:
            raise DiagnosticError(result.diagnostics)
    return generate_plan_module(defn, spec.path, literal=spec if literal else None)


@_keywords_checked
def synthesize(
    *,
    pp: int,
    microbatches: int,
    costs: Mapping[str, float] | CostSpec | str | Path | None = None,
    memory_limit: float | str | None = None,
    model: str | None = None,
    batch_size: int = 32,
    **options: object,
) -> SynthOutcome:
    """The fastest schedule the search finds within `memory_limit` (activations per rank, as `check` counts
    them; with `model`, bytes measured on it: `"2GiB"`), as `ppdsl synth` finds it: `options` are `SynthRequest`'s
    fields, the command's flags by their Python names (`vpp`, `placement`, `split`, `exact`, `periodic`,
    `time_limit`, `seed`, `workers`, `library`, `memory_actions` (`("recompute", "offload")` or
    `"recompute,offload"`), `recompute_fraction`, `host_limit`, `backward_b_frees`, `name`, `max_jobs`, ...), with
    the same defaults and checks. `.text` is the `.sched` file, already checked (`.check`); `.result` has the
    makespan, the lower bound, whether it is proven optimal, and how it was found. `periodic=True` writes a block
    repeated every period, a file that holds for any number of micro-batches. `layers` (a layer profile's path, or
    a `LayerProfile`) makes a model of uneven layers: the partition into stages is chosen with the order (`partition`,
    `"9,10,9,6"` or a `Partition`, fixes it), the file carries it (`.partition`, `.partitions_tried`), and the limit
    counts layer activations, or bytes (`"3GiB"`) when the profile gives `activation_bytes`. Raises DiagnosticError
    (S114: nothing fits the limit)."""
    from ppdsl.analysis.costs import CostSpec
    from ppdsl.synth import synthesize_file  # (the package `ppdsl.synth`; this is `synthesize`)
    from ppdsl.synth.request import SynthRequest, api_keywords

    known = [name for name in api_keywords() if name != "memory"]  # (`model` and `batch_size` measure it)
    _refuse_unknown_options("ppdsl.synthesize", options, [*known, "model", "batch_size"])
    if costs is not None and not isinstance(costs, CostSpec):
        costs = CostSpec.read(None, costs) if isinstance(costs, (str, Path)) else CostSpec(dict(costs))
    memory = None
    if model is not None:  # bytes measured on the model, as `--model` measures them (the runtime, so paddle)
        from ppdsl.common.sizes import check_batch_size
        from ppdsl.runtime.memory import model_memory

        check_batch_size(batch_size, microbatches)
        memory = model_memory(None if model == "builtin" else model, batch_size)

    profile = options.get("layers")
    if isinstance(profile, (str, Path)) and memory is None:  # (read first: its `activation_bytes` count bytes)
        from ppdsl.analysis.layers import read_profile

        profile = options["layers"] = read_profile(profile)

    def size(value: object, option: str) -> object:
        """A size with its unit (`"2GiB"`) read as the flag reads it: bytes with a model or a profile of
        `activation_bytes`, else refused (E088)."""
        from ppdsl.common.units import parse_memory_limit

        if not isinstance(value, str):
            return value
        if profile is not None and memory is None:
            return parse_memory_limit(value, profile.memory_unit == "bytes", option, profile.path)
        return parse_memory_limit(value, memory is not None, option)

    if "host_limit" in options:
        options["host_limit"] = size(options["host_limit"], "--host-limit")
    limit = size(memory_limit, "--memory-limit")
    request = SynthRequest(pp=pp, microbatches=microbatches, costs=costs, memory_limit=limit, memory=memory, **options)
    return synthesize_file(request)


def run(
    schedule: str | Path | RunRequest = "1f1b", *, observer: RunObserver | None = None, **options: object
) -> RunReport:
    """Check the schedule, then train with its plan, as `ppdsl run` does: `options` are `RunRequest`'s fields,
    the command's flags by their Python names (`pp`, `microbatches`, `steps`, `model`, `batch_size`, `lr`,
    `optimizer`, `seed`, `params`, `save_dir`, `resume`, `summary_json`, `nproc_per_node`, ...), with the same
    defaults and the same checks. Returns the `RunReport` (`.losses`, `.final_loss`, `.step_seconds`,
    `.to_json()`: the `--summary-json` file); `observer` is told each step (a `RunObserver`; none: silent).
    Raises DiagnosticError for bad input, before any training, and for a failed run."""
    import dataclasses

    from ppdsl.runtime.request import RunRequest
    from ppdsl.runtime.run import run as run_request

    _refuse_unknown_options("ppdsl.run", options, [f.name for f in dataclasses.fields(RunRequest) if f.init])
    if isinstance(schedule, RunRequest):
        request = dataclasses.replace(schedule, **options)
    else:
        request = RunRequest(schedule=schedule, **options)
    return run_request(request, observer)


def _refuse_unknown_options(where: str, options: Mapping[str, object], known: list[str]) -> None:
    """E007 for a keyword the function does not take, with the close one (`stepz` -> `steps`), as the command
    line answers a mistyped flag: not Python's `__init__() got an unexpected keyword argument`."""
    from ppdsl.analysis.costs import did_you_mean
    from ppdsl.common.diagnostics import CallerError, Diagnostic

    unknown = [name for name in options if name not in known]
    if unknown:
        raise CallerError(
            [
                Diagnostic(
                    "E007",
                    f"`{where}` takes no option `{name}`",
                    help=f"{did_you_mean(name, known)}its options: {', '.join(known)}",
                )
                for name in unknown
            ]
        )


def __getattr__(name: str):
    """The API's types, imported when first named (`ppdsl.Scenario`, `ppdsl.CheckResult`, ...)."""
    homes = {
        "CheckResult": "ppdsl.analysis.check",
        "CostSpec": "ppdsl.analysis.costs",
        "DiagnosticError": "ppdsl.common.diagnostics",
        "RunReport": "ppdsl.runtime.run",
        "RunRequest": "ppdsl.runtime.request",
        "Scenario": "ppdsl.analysis.scenario",
    }
    if name in homes:
        import importlib

        return getattr(importlib.import_module(homes[name]), name)
    raise AttributeError(f"module 'ppdsl' has no attribute {name!r}")
