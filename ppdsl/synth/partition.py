"""`ppdsl synth --layers FILE` (`SynthRequest.layers`): the partition of an uneven model's layers chosen together
with the order; `synthesize_file` routes a request with a profile here.

The search itself (`synthesize_file`) knows stages, not layers: a partition becomes what it searches with, each
stage's costs (a cost file's `stages`, the sums of its layers' times) and its activations (a memory model in
activations, each stage's forward holding its layers' activation). A few partitions are tried, each searched for
a share of the time limit:

- the split that minimises the busiest virtual stage's work (`layers.min_max_partition`, the DP torchtitan's and
  torch's auto-partitions compute), and the even split;
- the DP split with one layer moved across each boundary of its critical stage (torch's `_partition.py` refines
  its DP the same way): the stage a schedule waits on is not always the one with the most work, once warm-up,
  cool-down and the memory limit count.

The fastest within the memory limit wins (ties: the smaller peak), and the file written carries its partition
(`partition = [...]`): it is checked again as `ppdsl check FILE --layers PROFILE` reads it, which must agree with
the search. `--partition` (`SynthRequest.partition`) fixes the partition instead. With a profile of activation
bytes (`activation_bytes`) the stages hold bytes and the limit is in bytes.
"""

from __future__ import annotations

import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from ppdsl.analysis.check import check
from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.layers import LayerProfile, Partition, StageWork, even_partition, min_max_partition, stage_work
from ppdsl.analysis.memory import MemoryModel
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.synth.request import SynthRequest
from ppdsl.synth.search import Infeasible

Outcome = TypeVar("Outcome")  # the driver's SynthOutcome

MAX_CANDIDATES = 4  # partitions searched when it is free: the DP's, the even one, two moves of the DP's
EPS = 1e-6


def candidates(profile: LayerProfile, stages: int) -> list[Partition]:
    """The partitions tried when the partition is free, best guess first, without repeats."""
    if len(profile.layers) < stages:
        return [even_partition(len(profile.layers), stages)]
    dp = min_max_partition(profile, stages)
    found = [dp, even_partition(len(profile.layers), stages)]
    work = stage_work(dp, stages, profile)
    critical = work.critical
    for neighbour in (critical - 1, critical + 1):  # one layer of the critical stage moved to a neighbour
        if 0 <= neighbour < stages and dp.counts[critical] > 1:
            counts = list(dp.counts)
            counts[critical] -= 1
            counts[neighbour] += 1
            found.append(Partition(tuple(counts)))
    unique: list[Partition] = []
    for p in found:
        if p.counts not in [q.counts for q in unique]:
            unique.append(p)
    return unique[:MAX_CANDIDATES]


def stage_request(request: SynthRequest, work: StageWork, backward_b_frees: float) -> SynthRequest:
    """The request with a partition's stages as costs and activations: the partition's times as a cost file's
    per-stage costs under the request's own (`--costs` stages and `--cost` pairs still win), and a memory model in
    the profile's unit (layer activations, or bytes) in which a stage's forward holds its layers' activation
    (backward_b frees its share of it). The request it makes has no profile: its stages are searched as they are."""
    stages = {
        str(s): {
            "forward": work.forward[s],
            "backward": work.backward_b[s] + work.backward_w[s],
            "backward_b": work.backward_b[s],
            "backward_w": work.backward_w[s],
        }
        for s in range(work.stages)
    }
    given = request.costs or CostSpec()
    file = dict(given.file or {})
    for stage, types in (file.get("stages") or {}).items():
        stages.setdefault(stage, {}).update(types)
    file["stages"] = stages
    file.setdefault("unit", work.unit or "ms")
    memory = MemoryModel(
        {
            s: {
                "forward": a,
                "backward": -a,
                "backward_b": -backward_b_frees * a,
                "backward_w": -(1 - backward_b_frees) * a,
            }
            for s, a in enumerate(work.activation)
        },
        unit=work.memory_unit,
    )
    return replace(request, costs=CostSpec(given.pairs, file), memory=memory, layers=None, partition=None)


def carried(text: str, partition: Partition, profile_option: str = "") -> str:
    """The synthesized file with its partition stated (after everything else: items may come in any order), and
    its docstring's check command given the profile (without it the stages' costs would be the file's own)."""
    if profile_option:
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("Check:") and profile_option not in line:
                lines[i] = f"{line} {profile_option}"
                break
        text = "\n".join(lines)
    # the bytes a profile's `activation_bytes` count are the profile's, not measured on a model
    text = re.sub(r"\(bytes\s+measured\s+on\s+the\s+model\)", "(bytes of the layer profile)", text, count=1)
    counts = ", ".join(map(str, partition.counts))
    empty = " allow empty" if partition.allow_empty else ""
    note = "# the layers of each virtual stage (check with --layers: the stages' costs and memory follow)\n"
    return text.rstrip("\n") + f"\n\n{note}partition = [{counts}]{empty}\n"


def checked_with_profile(text: str, request: SynthRequest, profile: LayerProfile, user_costs: CostSpec | None):
    """`ppdsl check FILE --layers PROFILE` of the written text, as a user runs it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthesized.sched"
        path.write_text(text, encoding="utf-8")
        scenario = Scenario(
            path,
            request.pp,
            request.microbatches,
            request.vpp,
            costs=user_costs,
            layers=profile,
            memory_limit=request.memory_limit,
            max_jobs=request.max_jobs,
        )
        return check(scenario)


def synthesize_partitioned(
    request: SynthRequest,
    search: Callable[[SynthRequest], Outcome],
    progress: Callable[[str], None] | None = None,
) -> Outcome:
    """The fastest schedule and partition found within the request's memory limit (in the profile's unit: layer
    activations, or bytes), its file carrying the partition and proven by the check with the profile; the outcome
    says the partition and every one tried. The profile is `request.layers` (the file's docstring names it as
    `--layers PATH`), the partition `request.partition` when fixed. Raises DiagnosticError: a partition that does
    not fit (E104 / E105), no candidate within the limit (S114), a file that does not check as searched (E042).
    `search` is the driver's `synthesize_file`, which searches each candidate's stages (passed in: the driver routes
    requests with a profile here, so this module must not import it back)."""
    profile, fixed = request.profile(), request.fixed_partition()
    assert profile is not None, "a request with a layer profile (synthesize_file routes only those here)"
    profile_option = f"--layers {shlex.quote(profile.path)}"
    if profile.memory_unit == "bytes" and request.memory_limit is not None:  # (in activations the file holds it)
        profile_option += f" --memory-limit {request.memory_limit:.0f}B"
    stages = request.pp * request.vpp
    tried_partitions = [fixed] if fixed is not None else candidates(profile, stages)
    share = request.time_limit / len(tried_partitions)
    user_costs = request.costs
    options = " ".join(x for x in (profile_option, request.cost_options) if x)
    best: tuple[float, float, Outcome, Partition] | None = None
    tried: list[tuple[Partition, float | None]] = []
    failures: list[DiagnosticError] = []
    for partition in tried_partitions:
        work = stage_work(partition, stages, profile, f"pp={request.pp} x vpp={request.vpp}")
        searched = stage_request(
            replace(request, time_limit=share, cost_options=options), work, request.backward_b_frees
        )
        try:
            outcome = search(searched)
        except (Infeasible, DiagnosticError) as err:
            if isinstance(err, DiagnosticError) and not all(d.code == "S114" for d in err.diagnostics):
                raise
            failures.append(err if isinstance(err, DiagnosticError) else DiagnosticError([]))
            tried.append((partition, None))
            continue
        makespan = outcome.check.makespan
        peak = max(outcome.check.peak_activations, default=0.0)
        tried.append((partition, makespan))
        if progress is not None:
            progress(f"partition {partition.text()}: makespan {makespan:g}, peak {peak:g}")
        if best is None or (makespan, peak) < (best[0] - EPS, best[1]):
            best = (makespan, peak, outcome, partition)
    if best is None:
        if failures and failures[-1].diagnostics:
            raise failures[-1]
        raise DiagnosticError(
            [
                Diagnostic(
                    "S114",
                    "no partition tried has a schedule within the memory limit",
                    help="raise --memory-limit, or let --memory-actions recompute or offload",
                )
            ]
        )
    makespan, _, outcome, partition = best
    text = carried(outcome.text, partition, profile_option)
    proof = checked_with_profile(text, request, profile, user_costs)
    if not proof.valid or abs(proof.makespan - makespan) > EPS * max(1.0, makespan):
        found = proof.diagnostics[0].message if proof.diagnostics else f"makespan {proof.makespan}"
        raise DiagnosticError(
            [
                Diagnostic(
                    "E042",
                    f"the file with its partition does not check as it was searched ({found})",
                    help="this is a bug in ppdsl synth: please report it with the command",
                )
            ]
        )
    asked = replace(outcome.request, costs=user_costs, memory=None, layers=profile, partition=request.partition)
    return replace(outcome, text=text, check=proof, request=asked, partition=partition, partitions_tried=tried)


__all__ = ["candidates", "carried", "stage_request", "synthesize_partitioned"]
