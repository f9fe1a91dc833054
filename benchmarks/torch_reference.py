"""PyTorch ``torch.distributed.pipelining`` as a reference for ppdsl.

Two uses:

* a speed baseline: how long torch takes to build an interleaved 1F1B schedule
  with communication ops (``get_schedule_ops(..., with_comms=True)``) and to
  dry-run it (``_simulate_comms_compute``);
* an interchange oracle: torch's compute-only CSV format, written and read by
  torch's own ``_dump_csv`` / ``_load_csv`` methods.

torch is imported lazily, inside the functions, so importing this module is
cheap and works where torch is missing.  Only private torch APIs exist for all
of this; they were checked against torch 2.13.0.

Format facts (torch 2.13.0):

* one CSV row per rank (row ``r`` is rank ``r``), one column per time step;
  rows may have different lengths; ``csv.writer`` defaults, so lines end in
  ``\\r\\n`` and there is no header;
* an idle step (``None`` in ``pipeline_order``) is an empty field;
* an action is ``<stage><TYPE>[<microbatch>]`` where ``stage`` is the *global*
  stage index and TYPE is one of ``F`` (forward), ``B`` (full backward),
  ``I`` (backward w.r.t. input), ``W`` (backward w.r.t. weights),
  ``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD`` (no microbatch), ``SEND_F``,
  ``RECV_F``, ``SEND_B``, ``RECV_B``; DualPipeV also emits
  ``(<a>;<b>)OVERLAP_F_B``.

In this module an idle step is the empty string ``""``, as in the CSV.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch.distributed.pipelining.schedules import _Action

__all__ = [
    "SCHEDULE_NAMES",
    "TorchLoadedSchedule",
    "action_strings",
    "available_schedules",
    "count_compute_actions",
    "parse_action_strings",
    "simulated_steps",
    "stage_to_rank_from_ops",
    "time_torch_check",
    "torch_compute_schedule",
    "torch_dump_compute_csv",
    "torch_interleaved_ops",
    "torch_load_compute_csv",
    "torch_simulate",
    "torch_write_schedule_csv",
]

#: Schedule names accepted by ``torch...schedules.get_schedule_class``.
SCHEDULE_NAMES: tuple[str, ...] = (
    "GPipe",
    "1F1B",
    "Interleaved1F1B",
    "LoopedBFS",
    "InterleavedZeroBubble",
    "ZBVZeroBubble",
    "DualPipeV",
)

#: Types that torch's simulator rejects; they act on one rank only and carry
#: no cross-rank dependency, so dropping them does not change the simulation.
_RANK_LOCAL_TYPES: tuple[str, ...] = ("UNSHARD", "RESHARD", "REDUCE_GRAD")

#: Computation types that are compute (``_Action.is_compute_op``).
_COMPUTE_TYPES: tuple[str, ...] = ("F", "B", "I", "W", "OVERLAP_F_B")

Order = dict[int, list[str]]
ActionOrder = dict[int, list["_Action | None"]]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _schedule_class(schedule: str | type) -> type:
    from torch.distributed.pipelining.schedules import get_schedule_class

    return get_schedule_class(schedule) if isinstance(schedule, str) else schedule


def _is_single_stage(schedule_class: type) -> bool:
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle

    return issubclass(schedule_class, PipelineScheduleSingle)


def _mock_stages(pp: int, num_stages: int, count: int) -> list[Any]:
    """Stand-in stages, built the way ``_schedule_visualizer`` builds them."""
    from unittest import mock

    from torch.distributed.pipelining.stage import PipelineStage

    stage = mock.create_autospec(PipelineStage, instance=True)
    stage.group_rank = 0
    stage.group_size = pp
    stage.submod = None
    stage.num_stages = num_stages
    return [stage] * count


def _runtime(pp: int, num_stages: int, microbatches: int) -> Any:
    """An empty ``_PipelineScheduleRuntime`` over ``pp`` ranks (no process group)."""
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    count = max(1, num_stages // pp)
    return _PipelineScheduleRuntime(_mock_stages(pp, num_stages, count), microbatches)


def available_schedules() -> list[str]:
    """Those of :data:`SCHEDULE_NAMES` that the installed torch knows."""
    available = []
    for name in SCHEDULE_NAMES:
        try:
            _schedule_class(name)
        except ValueError:
            continue
        available.append(name)
    return available


def action_strings(order: Mapping[int, Sequence[_Action | None]]) -> Order:
    """``rank -> [str(action) or ""]``: the text torch writes to its CSV."""
    return {rank: ["" if a is None else str(a) for a in actions] for rank, actions in sorted(order.items())}


def parse_action_strings(order: Mapping[int, Sequence[str]]) -> ActionOrder:
    """Inverse of :func:`action_strings`, with torch's ``_Action.from_str``."""
    from torch.distributed.pipelining.schedules import _Action

    return {rank: [_Action.from_str(s) for s in actions] for rank, actions in sorted(order.items())}


def _leaves(action: _Action) -> tuple[_Action, ...]:
    return action.sub_actions if action.sub_actions is not None else (action,)


def stage_to_rank_from_ops(
    ops: Sequence[Sequence[_Action | None]] | Mapping[int, Sequence[_Action | None]],
) -> dict[int, int]:
    """Which rank runs each global stage, read off the compute actions."""
    items = ops.items() if isinstance(ops, Mapping) else enumerate(ops)
    mapping: dict[int, int] = {}
    for rank, actions in items:
        for action in actions:
            if action is None or not action.is_compute_op:
                continue
            for leaf in _leaves(action):
                mapping.setdefault(leaf.stage_index, rank)
    return mapping


def count_compute_actions(
    ops: Sequence[Sequence[_Action | None]] | Mapping[int, Sequence[_Action | None]],
) -> int:
    """Compute actions (F, B, I, W; an OVERLAP_F_B counts as its parts)."""
    values = ops.values() if isinstance(ops, Mapping) else ops
    return sum(len(_leaves(a)) for actions in values for a in actions if a is not None and a.is_compute_op)


# --------------------------------------------------------------------------
# speed reference
# --------------------------------------------------------------------------


def torch_interleaved_ops(pp: int, vpp: int, microbatches: int, with_comms: bool = True) -> list[list[_Action | None]]:
    """Interleaved 1F1B as ``get_schedule_ops`` returns it: one list per rank.

    With ``with_comms`` the lists hold the lowered schedule (UNSHARD/RESHARD,
    SEND/RECV and REDUCE_GRAD added, no ``None``); without, the compute-only
    ``pipeline_order`` with ``None`` for idle steps.
    """
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    return get_schedule_ops(
        "Interleaved1F1B",
        pp,
        microbatches,
        num_stages_per_rank=vpp,
        with_comms=with_comms,
    )


def torch_simulate(
    ops: Sequence[Sequence[_Action | None]] | Mapping[int, Sequence[_Action | None]],
    stage_to_rank: Callable[[int], int] | Mapping[int, int] | None = None,
    num_stages: int | None = None,
) -> ActionOrder:
    """Run ``schedules._simulate_comms_compute`` on a lowered schedule.

    torch's signature is ``_simulate_comms_compute(pipeline_order,
    stage_to_rank: Callable[[int], int], num_stages: int)`` where
    ``pipeline_order`` is a ``dict`` rank -> actions.  It raises on UNSHARD,
    RESHARD and REDUCE_GRAD (which ``get_schedule_ops(with_comms=True)`` emits),
    so those rank-local ops are dropped first.  The mapping and stage count
    default to what the compute actions show.  Returns rank -> simulated time
    steps (``None`` = waiting).
    """
    from torch.distributed.pipelining.schedules import _simulate_comms_compute

    items = ops.items() if isinstance(ops, Mapping) else enumerate(ops)
    order = {
        rank: [a for a in actions if a is not None and a.computation_type.value not in _RANK_LOCAL_TYPES]
        for rank, actions in items
    }
    mapping = stage_to_rank_from_ops(order)
    if stage_to_rank is None:
        stage_to_rank = mapping.__getitem__
    elif isinstance(stage_to_rank, Mapping):
        stage_to_rank = stage_to_rank.__getitem__
    if num_stages is None:
        num_stages = max(mapping) + 1
    return _simulate_comms_compute(order, stage_to_rank, num_stages)


def simulated_steps(simulated: Mapping[int, Sequence[object]]) -> int:
    """Length of the longest rank timeline from :func:`torch_simulate`."""
    return max(len(steps) for steps in simulated.values())


def time_torch_check(pp: int, vpp: int, microbatches: int) -> dict[str, float | int]:
    """Wall time (``time.perf_counter``) of torch's build + simulate.

    ``ops_seconds``: ``get_schedule_ops(with_comms=True)`` (it builds the
    schedule class, which already lowers once, then lowers again);
    ``simulate_seconds``: :func:`torch_simulate`; ``total_seconds``: both.
    """
    import torch.distributed.pipelining.schedules  # noqa: F401  (import cost out)

    t0 = time.perf_counter()
    ops = torch_interleaved_ops(pp, vpp, microbatches, with_comms=True)
    t1 = time.perf_counter()
    simulated = torch_simulate(ops)
    t2 = time.perf_counter()
    return {
        "pp": pp,
        "vpp": vpp,
        "microbatches": microbatches,
        "ops_seconds": t1 - t0,
        "simulate_seconds": t2 - t1,
        "total_seconds": t2 - t0,
        "compute_actions": count_compute_actions(ops),
        "lowered_actions": sum(len(actions) for actions in ops),
        "simulated_steps": simulated_steps(simulated),
    }


# --------------------------------------------------------------------------
# compute-only schedules and CSV interchange
# --------------------------------------------------------------------------


def _default_vpp(schedule_class: type, vpp: int | None) -> int:
    if vpp is not None:
        return vpp
    return 1 if _is_single_stage(schedule_class) else 2


def _torch_schedule(schedule: str | type, pp: int, microbatches: int, vpp: int) -> Any:
    """An instance of the torch schedule class over stand-in stages."""
    schedule_class = _schedule_class(schedule)
    stages = _mock_stages(pp, pp * vpp, vpp)
    if _is_single_stage(schedule_class):
        if vpp != 1:
            raise ValueError(f"{schedule_class.__name__} has one stage per rank")
        return schedule_class(stages[0], microbatches)
    return schedule_class(stages, microbatches)


def torch_compute_schedule(
    schedule: str | type,
    pp: int,
    microbatches: int,
    vpp: int | None = None,
    keep_reduce_grad: bool = False,
) -> Order:
    """torch's compute-only ``pipeline_order`` as ``rank -> [action string]``.

    ``""`` marks an idle step.  ``vpp`` is stages per rank (default 1 for
    GPipe/1F1B, 2 for the others).  GPipe and 1F1B build their order through
    ``_add_reduce_grad``, which drops the idle steps and appends
    ``<stage>REDUCE_GRAD``; that action is not compute and is removed unless
    ``keep_reduce_grad``.  Beware: in torch 2.13.0 the 1F1B order of the last
    rank is off by one microbatch (``F1..Fm`` instead of ``F0..F(m-1)``).
    """
    schedule_class = _schedule_class(schedule)
    vpp = _default_vpp(schedule_class, vpp)
    instance = _torch_schedule(schedule_class, pp, microbatches, vpp)
    order = action_strings(instance.pipeline_order)
    if not keep_reduce_grad:
        order = {rank: [s for s in actions if not s.endswith("REDUCE_GRAD")] for rank, actions in order.items()}
    return order


def torch_dump_compute_csv(order: Mapping[int, Sequence[str]], path: str | Path) -> None:
    """Write ``rank -> [action string]`` with torch's ``_dump_csv``.

    A ``_PipelineScheduleRuntime`` is given the parsed order as its
    ``pipeline_order`` and ``_dump_csv(path, format="compute_only")`` writes it.
    """
    parsed = parse_action_strings(order)
    leaves = [leaf for actions in parsed.values() for a in actions if a is not None for leaf in _leaves(a)]
    num_stages = max((leaf.stage_index for leaf in leaves), default=0) + 1
    microbatches = max((leaf.microbatch_index or 0 for leaf in leaves), default=0) + 1
    pp = len(parsed)
    runtime = _runtime(pp, max(num_stages, pp), microbatches)
    runtime.pipeline_order = parsed
    runtime._dump_csv(str(path), format="compute_only")


def torch_write_schedule_csv(
    schedule: str | type,
    pp: int,
    microbatches: int,
    path: str | Path,
    vpp: int | None = None,
) -> Order:
    """Build a torch schedule and have torch write its compute-only CSV.

    Multi-stage schedules call their own
    ``_PipelineScheduleRuntime._dump_csv(path, format="compute_only")``;
    GPipe/1F1B have no ``_dump_csv``, so their order (without REDUCE_GRAD) goes
    through :func:`torch_dump_compute_csv`.  Returns the order written.
    """
    schedule_class = _schedule_class(schedule)
    vpp = _default_vpp(schedule_class, vpp)
    if _is_single_stage(schedule_class):
        order = torch_compute_schedule(schedule_class, pp, microbatches, vpp)
        torch_dump_compute_csv(order, path)
        return order
    instance = _torch_schedule(schedule_class, pp, microbatches, vpp)
    instance._dump_csv(str(path), format="compute_only")
    return action_strings(instance.pipeline_order)


@dataclass(frozen=True)
class TorchLoadedSchedule:
    """What torch makes of a compute-only CSV."""

    #: compute-only order as read (``""`` = idle)
    order: Order
    #: order after torch's lowering (UNSHARD/RESHARD, SEND/RECV, REDUCE_GRAD)
    order_with_comms: Order
    #: global stage index -> rank, as torch's validation inferred it
    stage_to_rank: dict[int, int]


def torch_load_compute_csv(
    path: str | Path,
    microbatches: int | None = None,
    num_stages: int | None = None,
) -> TorchLoadedSchedule:
    """Read a compute-only CSV with torch's ``_PipelineScheduleRuntime._load_csv``.

    torch validates it (every stage has ``microbatches`` forwards, as many
    backwards (B, or I+W pairs), F before B/I before W per microbatch, each stage
    on one rank) and lowers it with communication; a bad file raises
    (``AssertionError`` / ``ValueError``).  The rank count is the row count;
    stage and microbatch counts default to what the file holds.
    """
    import csv

    from torch.distributed.pipelining.schedules import _Action

    with Path(path).open(newline="") as f:
        rows = list(csv.reader(f))
    leaves = [leaf for row in rows for s in row if (a := _Action.from_str(s)) is not None for leaf in _leaves(a)]
    if num_stages is None:
        num_stages = max((leaf.stage_index for leaf in leaves), default=0) + 1
    if microbatches is None:
        microbatches = max((leaf.microbatch_index or 0 for leaf in leaves), default=0) + 1
    pp = len(rows)
    runtime = _runtime(pp, num_stages, microbatches)
    runtime._load_csv(str(path), format="compute_only")
    return TorchLoadedSchedule(
        order=action_strings(runtime.pipeline_order),
        order_with_comms=action_strings(runtime.pipeline_order_with_comms),
        stage_to_rank=dict(runtime.stage_index_to_group_rank),
    )


def _main() -> None:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pp", type=int, default=16)
    parser.add_argument("--vpp", type=int, default=2)
    parser.add_argument("-m", "--microbatches", type=int, nargs="+", default=[256])
    args = parser.parse_args()
    for m in args.microbatches:
        print(json.dumps(time_torch_check(args.pp, args.vpp, m)), flush=True)


if __name__ == "__main__":
    _main()
