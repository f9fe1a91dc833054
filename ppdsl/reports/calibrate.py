"""`ppdsl calibrate`: a measured profile -> per-job costs the simulator accepts (`--costs FILE`), and how well a
simulation with those costs reproduces the measurement.

On one machine every stage runs in one process, one job at a time, so the measured step is the serial sum of
the jobs plus the executor's gaps between them; the comparable simulated figure is the sum of all ranks' busy
time. The simulated makespan with the same costs is then the prediction for pp real devices.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass

from ppdsl.analysis.costs import MAX_COST, CostSpec, cost_file_problems
from ppdsl.analysis.expand import MAX_SIZE
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.reports.simulate import simulate
from ppdsl.reports.trace import Profile

MAX_SHOWN = 20  # diagnostics shown of a cost file that would be refused


def calibrate(profile: Profile) -> dict:
    """Mean duration per job type, and per (stage, job type), in seconds. Means, not medians: a step is a sum of
    jobs, and only the mean keeps that sum."""
    by_type: dict[str, list[float]] = defaultdict(list)
    by_stage: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    scale = profile.us_per_unit / 1e6  # trace units -> seconds
    for job in profile.jobs:
        seconds = (job.end - job.start) * scale
        by_type[job.type].append(seconds)
        if job.stage >= 0:  # -1: the profile did not record the job's stage
            by_stage[job.stage][job.type].append(seconds)
    costs = {
        "unit": "s",
        "costs": {t: statistics.fmean(v) for t, v in sorted(by_type.items())},
        "stages": {
            str(s): {t: statistics.fmean(v) for t, v in sorted(types.items())} for s, types in sorted(by_stage.items())
        },
        "latency": 0.0,
        "samples": sum(len(v) for v in by_type.values()),
    }
    # what is written is read back by `--costs`: checked by that reader here, so calibrate never writes a file that
    # ppdsl then refuses (read_trace bounds every figure, so this is a last guard, not the check)
    problems = cost_file_problems(costs)
    if problems:
        raise DiagnosticError(
            [
                Diagnostic("E009", f"the profile's timings do not make a cost file: {message}", help=help_text)
                for message, help_text in problems[:MAX_SHOWN]
            ]
        )
    return costs


@dataclass
class Comparison:
    measured_step_seconds: float  # wall time of a profiled step
    measured_jobs_seconds: float  # the jobs alone, per step
    simulated_serial_seconds: float  # all ranks' busy time under the calibrated costs, per step
    simulated_makespan_seconds: float  # the same schedule on pp devices
    steps: int

    @property
    def gap_seconds(self) -> float:
        """The executor's time between jobs, per step: what per-job costs do not hold."""
        return self.measured_step_seconds - self.measured_jobs_seconds

    @property
    def error(self) -> float:
        """Relative error of the simulated serial time against the measured step."""
        return (self.simulated_serial_seconds - self.measured_step_seconds) / self.measured_step_seconds


def _meta_problems(meta: dict) -> list[tuple[str, str, str]]:
    """(key, value as JSON, what it should be) of each run figure in a profile's `otherData` that is not one."""
    problems = []

    def shown(value: object) -> str:
        text = json.dumps(value)
        return text if len(text) <= 40 else text[:37] + "..."

    if not isinstance(meta["schedule_file"], str) or not meta["schedule_file"]:
        problems.append(("schedule_file", shown(meta["schedule_file"]), "not the path of a schedule"))
    for key in ("pp", "vpp", "microbatches", "steps"):
        value = meta[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIZE:
            problems.append((key, shown(value), f"not an integer from 1 to {MAX_SIZE}"))
    wall = meta["wall_seconds"]
    if isinstance(wall, bool) or not isinstance(wall, int | float) or not 0 < wall <= MAX_COST:
        problems.append(("wall_seconds", shown(wall), f"not a time in seconds above 0 and at most {MAX_COST:g}"))
    return problems


def against_simulation(profile: Profile, costs: dict) -> Comparison | None:
    """Simulate the profiled schedule with `costs`; None when the profile does not say which schedule ran."""
    meta = profile.meta
    needed = ("schedule_file", "pp", "vpp", "microbatches", "steps", "wall_seconds")
    if not all(k in meta for k in needed):
        return None
    problems = _meta_problems(meta)
    if problems:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E009",
                    f"the profile's `otherData.{key}` is {shown}: {what}",
                    help="give a profile written by `ppdsl run --profile`, or drop `otherData` to calibrate without "
                    "the comparison",
                )
                for key, shown, what in problems
            ]
        )
    params = meta.get("params") if isinstance(meta.get("params"), dict) else None
    scenario = Scenario(meta["schedule_file"], meta["pp"], meta["microbatches"], meta["vpp"], params)
    sim = simulate(scenario.with_(costs=CostSpec(file=costs)))
    steps = meta["steps"]
    scale = profile.us_per_unit / 1e6
    jobs = sum(j.end - j.start for j in profile.jobs) * scale / steps
    return Comparison(
        measured_step_seconds=meta["wall_seconds"] / steps,
        measured_jobs_seconds=jobs,
        simulated_serial_seconds=sum(r.busy for r in sim.execution.ranks),
        simulated_makespan_seconds=sim.makespan,
        steps=steps,
    )


# The job types whose times make a layer's three costs: a whole `backward` counts as its input gradient (a schedule
# that splits the backward, a zero-bubble one, measures `backward_w` apart).
LAYER_TIMES = {"forward": ("forward",), "backward_b": ("backward_b", "backward"), "backward_w": ("backward_w",)}


def layer_profile(profile: Profile, costs: dict) -> dict:
    """A layer profile in ppdsl's own form (what `--layers FILE` reads, `ppdsl.analysis.layers`), in milliseconds,
    from a profile `ppdsl run --profile` wrote of an `nn.Layer` model: each stage's mean job times (`costs`, of
    `calibrate`) and its activation bytes per micro-batch, divided evenly over the layers the stage held. Every
    layer of a stage gets the same figures, so a stage that holds the embedding or the head with blocks spreads
    their cost over its blocks. E009: a profile without its layers' placement (a model placed by hand, or an
    older ppdsl), or with a stage whose times are missing."""
    meta = profile.meta
    counts, activation = meta.get("layers_per_stage"), meta.get("activation_bytes_per_stage")
    if not (_counts(counts) and isinstance(activation, list) and len(activation) == len(counts)):
        raise DiagnosticError(
            [
                Diagnostic(
                    "E009",
                    "the profile does not say which layers each stage held (`otherData.layers_per_stage` and "
                    "`activation_bytes_per_stage`), so it cannot be divided into layers",
                    help="profile a model built with `ctx.pipeline` (the built-in GPT is one): `ppdsl run FILE "
                    "--profile trace.json`, then `ppdsl calibrate trace.json --layers layers.json`",
                )
            ]
        )
    layers = []
    for stage, n in enumerate(counts):
        measured = costs["stages"].get(str(stage), {})
        times = {}
        for field, types in LAYER_TIMES.items():
            found = [measured[t] for t in types if t in measured]
            if field != "backward_w" and not found:
                raise DiagnosticError(
                    [
                        Diagnostic(
                            "E009",
                            f"the profile has no `{types[0]}` job of stage {stage}: its layers' times are unknown",
                            help="profile every stage: `ppdsl run FILE --profile trace.json` on one process",
                        )
                    ]
                )
            times[field] = found[0] * 1e3 / n if found else 0.0
        for i in range(n):
            first, last = stage == 0 and i == 0, stage == len(counts) - 1 and i == n - 1
            kind = "E" if first else "L" if last else "T"
            layers.append({"name": kind, **times, "activation": activation[stage] / n})
    return {"unit": "ms", "layers": layers}


def _counts(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(type(n) is int and 1 <= n <= MAX_SIZE for n in value)
