"""Activation memory from the real program: what each (job type, stage) allocates and frees, in bytes.

Paddle's `PipelineMemoryEstimator` (pass_utils) does this for the old IR only. Here the same idea on PIR, read
off the split job programs: a value a backward-side job of stage s reads the data of from an earlier job (a block
keyword argument of its program, not persistable, that one of its ops takes as an input needing the buffer: the
rule skip-GC keeps values by, `skip_gc.data_reads`) is an activation stage s keeps from its forward until its
last backward reader. So

    forward@s     allocates every such value its stage's backward jobs read
    backward@s    frees them all
    backward_b@s  frees those no backward_w reads, and allocates what it hands to backward_w
    backward_w@s  frees the rest

which is the language's `memory` model (forward allocates, backward_b frees a part, backward_w the rest), with
sizes measured instead of declared. What a job reads from a job of another stage (the stage's input, the gradient of
its output) is in transit (`StageMemory.received`): held on this stage's rank from its sender's start to the reader's
end; what backward_w reads of it, backward_b keeps for it (a weight's gradient needs the output's).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MeasureMemory, MemoryModel
from ppdsl.analysis.timing import FLOW
from ppdsl.plan.jobs import ProgramKey, program_key_of, program_name
from ppdsl.plan.kinds import ALWAYS, Memory, memory_of
from ppdsl.runtime.activations import BACKWARD_SIDE, classify, publishers, reads_from_earlier_jobs
from ppdsl.runtime.memory_jobs import OFFLOAD, RECOMPUTE, MemoryJob, written_or_copied


@dataclass(frozen=True)
class StageMemory:
    """Bytes per job type of one stage: positive allocates, negative frees."""

    stage: int
    delta: dict[str, int]
    saved_for_backward: int  # what the forward keeps until the backward (the classic activation memory)
    activations: dict[str, int] = field(default_factory=dict)  # what makes it up: value name -> bytes
    received: dict[str, int] = field(default_factory=dict)  # job type -> bytes it reads from another stage's jobs


def stage_memory(
    programs: dict[str, object], memory_jobs: Mapping[str, MemoryJob] | None = None
) -> dict[int, StageMemory]:
    """Per stage, from emulation job programs named by stage (`ppdsl.plan.jobs.program_name`). With the
    plan's memory actions (`BuiltPlan.memory_jobs`) their rows too, as the checker's memory model reads them
    (`ppdsl.analysis.memory.job_deltas`): a recompute allocates what it writes again (so the forward before it
    keeps the rest), an offload frees what it copies, a reload allocates it again."""
    by_stage: dict[int, dict[str, object]] = defaultdict(dict)
    for key, program in staged(programs).items():
        by_stage[key.stage][key.type] = program
    result = {}
    for stage, (from_forward, b_to_w, read_by_w) in classify(by_stage, publishers(programs)).items():
        saved = sum(from_forward.values())
        freed_by_w = sum(s for n, s in from_forward.items() if n in read_by_w)
        handed = sum(b_to_w.values())
        delta = {
            "forward": saved,
            "backward": -saved,
            "backward_b": -(saved - freed_by_w) + handed,
            "backward_w": -freed_by_w - handed,
        }
        result[stage] = StageMemory(stage, delta, saved, dict(from_forward))
    _count_received(programs, result)
    for name, acted in _acted_bytes(programs, result, memory_jobs or {}).items():
        key = program_key_of(name)
        result[key.stage].delta[key.type] = -acted if memory_jobs[key.type].kind == OFFLOAD else acted
    return result


def staged(programs: Mapping[str, object]) -> dict[ProgramKey, object]:
    """The programs of stages among one-process job programs (by `program_name`), by key: all but the optimizers."""
    keys = {name: program_key_of(name) for name in programs}
    return {k: programs[name] for name, k in keys.items() if k is not None and not k.per_rank}


# the jobs that receive from another stage (the timing rule's data flow): a forward its input, a backward (or
# backward_b) the output's gradient
RECEIVERS = tuple(ALWAYS[t].name for t in FLOW)


def _count_received(programs: Mapping[str, object], stages: dict[int, StageMemory]) -> None:
    """Fill each stage's `received` and make backward_b keep what backward_w reads of it, from the values each job
    program reads that only programs of other stages compute."""
    made_by = {v: [program_key_of(p) for p in names] for v, names in publishers(programs).items()}
    by_key = staged(programs)

    def foreign(key: ProgramKey) -> dict[str, int]:
        """What program `key` reads that only other stages' programs on its side compute: a forward's input, a
        backward-side job's gradient (a backward-side job also reads the forward's values: activations, kept)."""
        side = (key.type,) if memory_of(key.type) is Memory.MAKES else BACKWARD_SIDE
        reads = reads_from_earlier_jobs(by_key[key])
        return {
            v: size
            for v, size in reads.items()
            if made_by.get(v) and all(p is not None and p.stage != key.stage and p.type in side for p in made_by[v])
        }

    for stage, mem in stages.items():
        got = {t: foreign(ProgramKey(t, stage)) for t in (*RECEIVERS, "backward_w") if ProgramKey(t, stage) in by_key}
        for t in RECEIVERS:
            if got.get(t):
                mem.received[t] = sum(got[t].values())
        kept = got.get("backward_w", {})
        if kept and "backward_b" in got:
            late = {v: size for v, size in kept.items() if v not in got["backward_b"]}
            if late:  # received by backward_b all the same: the gradient arrives with its signal
                mem.received["backward_b"] = mem.received.get("backward_b", 0) + sum(late.values())
            mem.delta["backward_b"] += sum(kept.values())
            mem.delta["backward_w"] -= sum(kept.values())


def _acted_bytes(
    programs: Mapping[str, object], stages: Mapping[int, StageMemory], memory_jobs: Mapping[str, MemoryJob]
) -> dict[str, int]:
    """Memory job program -> the bytes of its stage's activations it re-makes or moves."""
    acted: dict[str, int] = {}
    for key, program in staged(programs).items():
        if key.type in memory_jobs:
            touched = written_or_copied(program, memory_jobs[key.type])
            acted[program_name(key)] = sum(b for n, b in stages[key.stage].activations.items() if n in touched)
    return acted


def model_memory(model_spec: str | None, batch_size: int) -> MeasureMemory:
    """`Scenario.memory` for `--model`: the memory model in bytes, measured on this model (None: the built-in one)
    at this batch size, as the expansion of whatever scenario asks cuts its program."""

    def measure(exp: Expansion) -> MemoryModel:
        return memory_model(measure_stages(exp, model_spec, batch_size))

    return measure


def memory_model(stages: dict[int, StageMemory]) -> MemoryModel:
    """The activation table in bytes of measured stages (what `ppdsl.analysis.expand.expand` builds with)."""
    return MemoryModel(
        {s: dict(mem.delta) for s, mem in stages.items()},
        received={s: dict(mem.received) for s, mem in stages.items() if mem.received},
    )


def measure_stages(exp: Expansion, model_spec: str | None, batch_size: int) -> dict[int, StageMemory]:
    """Bytes per (stage, job type), measured on the model's real program cut by the expansion's orders."""
    from ppdsl.analysis.plan_spec import expansion_spec
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.plan import job_programs
    from ppdsl.runtime.program import build_training_program

    paddle = import_paddle()
    model = load_model(model_spec)
    program = build_training_program(
        paddle,
        model,
        micro_batch_size=batch_size // exp.microbatches,
        num_stages=exp.nstages,
        microbatches=exp.microbatches,
        lr=0.01,
        partition=None if exp.stage_work is None else exp.stage_work.partition.counts,  # as the run splits it
    )
    # the job programs alone: no check has run yet (this measures for one), so no order of all ranks' jobs is known,
    # and none is needed to read what each program keeps
    made = job_programs(program.main, program.startup, replace(expansion_spec(exp), rules=()))
    return stage_memory({program_name(k): p for k, p in made.programs.items()}, made.memory_jobs)


@dataclass(frozen=True)
class PredictedPeaks:
    """Bytes each rank holds at its fullest job boundary, by the measured model: on the device and in the host store
    (the offloads' copies)."""

    device: list[int]
    host: list[int]


def predicted_peaks(
    programs: dict[str, object],
    job_names: list[str],
    stage_of: list[list[int]],
    memory_jobs: dict[str, MemoryJob],
) -> PredictedPeaks:
    """The peaks the emulation's job programs (`BuiltPlan.programs`, by `program_name`) make when its jobs run
    in the sequence `job_names` (`BuiltPlan.job_names`, `<program>#<micro-batch>`), at every job's end.

    A rank's level moves at the jobs of its stages: a forward keeps its stage's activations (`stage_memory`), or,
    with a recompute of its (stage, micro-batch) later, all but those the recompute writes again; a recompute
    allocates those; an offload moves what it copies from the device to the host store, its reload moves it back;
    the backward-side jobs free as `stage_memory` says. A gradient a later stage's backward hands to this stage's is
    held here from the end of the job computing it to the end of the job reading it (the measurement sees it there;
    the checker's model does not count it). Until the checker knows the memory jobs this is what a run's measured
    `peak_bytes` / `host_peak_bytes` are compared with."""
    stages = stage_memory(programs)
    rank_of = {s: r for r, row in enumerate(stage_of) for s in row}
    acted = _acted_bytes(programs, stages, memory_jobs)  # memory job program -> bytes it re-makes or moves
    transit = _gradients_in_transit(programs)
    sequence = [(name, program_key_of(name), int(mb)) for name, _, mb in (j.rpartition("#") for j in job_names)]
    recomputed = {
        (key.stage, mb): name
        for name, key, mb in sequence
        if key is not None and memory_jobs.get(key.type, MemoryJob(OFFLOAD)).kind == RECOMPUTE
    }
    pp = len(stage_of)
    level, store, peak, host_peak = [0] * pp, [0] * pp, [0] * pp, [0] * pp
    for name, key, mb in sequence:
        if key is None or key.per_rank:  # the optimizer
            continue
        s, job_type = key.stage, key.type
        r, job = rank_of[s], memory_jobs.get(job_type)
        if memory_of(job_type) is Memory.MAKES:
            level[r] += stages[s].saved_for_backward - acted.get(recomputed.get((s, mb), ""), 0)
        elif job is not None and job.kind == RECOMPUTE:
            level[r] += acted[name]
        elif job is not None:
            moved = acted[name] if job.kind == OFFLOAD else -acted[name]
            level[r], store[r] = level[r] - moved, store[r] + moved
        elif s in stages:
            level[r] += stages[s].delta.get(job_type, 0)
        for (producer, consumer, to_rank), size in transit.items():
            if name == producer:
                level[rank_of[to_rank]] += size
            elif name == consumer:
                level[r] -= size
        for k in range(pp):
            peak[k], host_peak[k] = max(peak[k], level[k]), max(host_peak[k], store[k])
    return PredictedPeaks(peak, host_peak)


def _gradients_in_transit(programs: dict[str, object]) -> dict[tuple[str, str, int], int]:
    """(producing program, reading program, reading stage) -> bytes, for values a backward-side program reads that a
    backward-side program of another stage computes (the gradient of a stage's output)."""
    made_by = publishers(programs)
    out: dict[tuple[str, str, int], int] = {}
    for key, program in staged(programs).items():
        if key.type not in BACKWARD_SIDE:
            continue
        name = program_name(key)
        for value, size in reads_from_earlier_jobs(program).items():
            for producer in made_by.get(value, ()):
                p = program_key_of(producer)
                if p is not None and p.type in BACKWARD_SIDE and p.stage != key.stage:
                    at = (producer, name, key.stage)
                    out[at] = out.get(at, 0) + size
    return out
