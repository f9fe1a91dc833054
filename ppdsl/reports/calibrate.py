"""`ppdsl calibrate`: a measured profile -> per-job costs the simulator accepts (`--costs FILE`), and how well a
simulation with those costs reproduces the measurement.

On one machine every stage runs in one process, one job at a time, so the measured step is the serial sum of
the jobs plus the executor's gaps between them; the comparable simulated figure is the sum of all ranks' busy
time. The simulated makespan with the same costs is then the prediction for pp real devices.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.scenario import Scenario
from ppdsl.reports.simulate import simulate
from ppdsl.reports.trace import Profile


def calibrate(profile: Profile) -> dict:
    """Mean duration per job type, and per (stage, job type), in seconds. Means, not medians: a step is a sum of
    jobs, and only the mean keeps that sum."""
    by_type: dict[str, list[float]] = defaultdict(list)
    by_stage: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    scale = profile.us_per_unit / 1e6  # trace units -> seconds
    for job in profile.jobs:
        seconds = (job.end - job.start) * scale
        by_type[job.type].append(seconds)
        by_stage[job.stage][job.type].append(seconds)
    return {
        "unit": "s",
        "costs": {t: statistics.fmean(v) for t, v in sorted(by_type.items())},
        "stages": {
            str(s): {t: statistics.fmean(v) for t, v in sorted(types.items())} for s, types in sorted(by_stage.items())
        },
        "latency": 0.0,
        "samples": sum(len(v) for v in by_type.values()),
    }


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


def against_simulation(profile: Profile, costs: dict) -> Comparison | None:
    """Simulate the profiled schedule with `costs`; None when the profile does not say which schedule ran."""
    meta = profile.meta
    needed = ("schedule_file", "pp", "vpp", "microbatches", "steps", "wall_seconds")
    if not all(k in meta for k in needed):
        return None
    scenario = Scenario(meta["schedule_file"], meta["pp"], meta["microbatches"], meta["vpp"], meta.get("params"))
    sim = simulate(scenario.with_(costs=CostSpec(file=costs)))
    steps = int(meta["steps"]) or 1
    scale = profile.us_per_unit / 1e6
    jobs = sum(j.end - j.start for j in profile.jobs) * scale / steps
    return Comparison(
        measured_step_seconds=float(meta["wall_seconds"]) / steps,
        measured_jobs_seconds=jobs,
        simulated_serial_seconds=sum(r.busy for r in sim.execution.ranks),
        simulated_makespan_seconds=sim.makespan,
        steps=steps,
    )
