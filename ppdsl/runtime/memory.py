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
sizes measured instead of declared.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ppdsl.analysis.expansion import Expansion
from ppdsl.analysis.memory import MeasureMemory, MemoryModel
from ppdsl.runtime.activations import classify, publishers


@dataclass(frozen=True)
class StageMemory:
    """Bytes per job type of one stage: positive allocates, negative frees."""

    stage: int
    delta: dict[str, int]
    saved_for_backward: int  # what the forward keeps until the backward (the classic activation memory)


def stage_memory(programs: dict[str, object]) -> dict[int, StageMemory]:
    """Per stage, from emulation job programs named `<type>@<stage>` (`ppdsl.runtime.plan.build_plan`)."""
    by_stage: dict[int, dict[str, object]] = defaultdict(dict)
    for name, program in programs.items():
        job_type, _, stage = name.partition("@")
        if stage.isdigit():
            by_stage[int(stage)][job_type] = program
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
        result[stage] = StageMemory(stage, delta, saved)
    return result


def model_memory(model_spec: str | None, batch_size: int) -> MeasureMemory:
    """`Scenario.memory` for `--model`: the memory model in bytes, measured on this model (None: the built-in one)
    at this batch size, as the expansion of whatever scenario asks cuts its program."""

    def measure(exp: Expansion) -> MemoryModel:
        return memory_model(measure_stages(exp, model_spec, batch_size))

    return measure


def memory_model(stages: dict[int, StageMemory]) -> MemoryModel:
    """The activation table in bytes of measured stages (what `ppdsl.analysis.expand.expand` builds with)."""
    return MemoryModel({s: dict(mem.delta) for s, mem in stages.items()})


def measure_stages(exp: Expansion, model_spec: str | None, batch_size: int) -> dict[int, StageMemory]:
    """Bytes per (stage, job type), measured on the model's real program cut by the expansion's orders."""
    from ppdsl.runtime.builtin_models import load_model
    from ppdsl.runtime.env import import_paddle
    from ppdsl.runtime.plan import build_plan
    from ppdsl.runtime.program import build_training_program
    from ppdsl.runtime.train import plan_arguments

    paddle = import_paddle()
    model = load_model(model_spec)
    program = build_training_program(
        paddle,
        model,
        micro_batch_size=batch_size // exp.microbatches,
        num_stages=exp.nstages,
        microbatches=exp.microbatches,
        lr=0.01,
    )
    built = build_plan(
        program.main,
        program.startup,
        **plan_arguments(exp, rules=[]),
    )
    return stage_memory(built.programs)
