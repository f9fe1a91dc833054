"""Oracle: PaddlePaddle 3.3.1's own pipeline job lists.

``paddle_job_list`` asks Paddle's pipeline scheduler passes
(``paddle/distributed/passes/pipeline_scheduler_pass``) for the job list one
rank runs, and returns it as ``(job_type, chunk, micro_batch)`` tuples, so
that ppdsl schedules can be compared with Paddle job for job.

Paddle is imported lazily, so importing this module is cheap and works
without Paddle installed; callers (tests) should skip when
``paddle_available()`` is False.

ZBVPP note: in Paddle 3.3.1 ``PipelineZeroBubbleVirtualPipelinePass.
_create_job_list()`` always fails with ``AttributeError: ... no attribute
'_get_max_memory'``. It needs no program: it needs the per-stage memory
tables and ``_get_max_memory()`` that the old-IR ``_partial_programs`` used
to provide, and both were deleted (ZBVPP has no PIR program split at all).
With the pipeline default ``memory_limit_times = -1`` the old code filled
the tables with zeros and returned an unlimited memory budget; we restore
exactly that (see ``_restore_zbvpp_memory_defaults``) and then run Paddle's
own ``VScheduleCreator`` unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import os
import re
import warnings
from collections.abc import Callable
from typing import Any

MODES: tuple[str, ...] = ("FThenB", "1F1B", "Eager1F1B", "VPP", "ZBH1", "ZBVPP")

# Modes whose Paddle job types carry a chunk suffix ("forward1", "backward_b0").
_CHUNKED_MODES = frozenset({"VPP", "ZBVPP"})
_CHUNK_SUFFIX = re.compile(r"^(?P<base>\D+?)(?P<chunk>\d+)$")

# Exceptions meaning "Paddle rejects these sizes": AssertionError from the size
# checks of every mode; KeyError from ZBVPP's VScheduleCreator when vpp_degree
# == 1 (it always schedules a "forward1" job); ValueError is what
# VScheduleCreator raises when it cannot place a job.
_REJECTIONS = (AssertionError, KeyError, ValueError)

Job = tuple[str, int, int]


def paddle_available() -> bool:
    """True if ``import paddle`` would find a package."""
    return importlib.util.find_spec("paddle") is not None


@functools.cache
def _new_pass() -> Callable[..., Any]:
    """Import Paddle quietly and return ``paddle.distributed.passes.new_pass``."""
    os.environ.setdefault("GLOG_minloglevel", "2")  # silence C++ glog INFO/WARNING
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")  # e.g. "No ccache found" UserWarning
        from paddle.distributed.passes import new_pass

    return new_pass


def _restore_zbvpp_memory_defaults(pass_obj: Any, pp: int, vpp: int) -> None:
    """Give a ZBVPP pass the memory inputs Paddle 3.3.1 no longer computes.

    Mirrors the pre-PIR ``_partial_programs`` / ``_get_max_memory`` for the
    default ``memory_limit_times = -1``: zero usage for every job program on
    every stage, zero base memory, unlimited budget (a ``memory_limit_times``
    attribute is therefore ignored). Scheduling is then driven by
    ``program_runtimes`` ([F, B, W, loss, comm], default [61, 72, 71, 34, 3]).
    """
    keys = [f"{t}{c}" for t in ("forward", "backward_b", "backward_w") for c in range(vpp)]
    pass_obj.program_mem_usages = [dict.fromkeys(keys, 0) for _ in range(pp)]
    pass_obj.program_max_mem_usages = [dict.fromkeys(keys, 0) for _ in range(pp)]
    pass_obj.base_memory = [0] * pp
    pass_obj._get_max_memory = lambda: float("inf")


def _to_tuple(job_type: str, micro_batch: int, chunked: bool) -> Job:
    """Paddle job -> (type without chunk suffix, chunk, micro-batch)."""
    if chunked and (match := _CHUNK_SUFFIX.match(job_type)):
        return (match["base"], int(match["chunk"]), micro_batch)
    return (job_type, 0, micro_batch)


def paddle_job_list(mode: str, pp: int, rank: int, microbatches: int, vpp: int = 1, **extra: Any) -> list[Job] | None:
    """Job list Paddle 3.3.1 builds for ``rank`` (its ``pp_stage``).

    ``mode`` is Paddle's schedule name (see ``MODES``); ``extra`` holds further
    pass attributes, e.g. ``split_backward=True`` (VPP), ``program_runtimes=
    [F, B, W, loss, comm]`` (ZBVPP). ``vpp`` is passed as ``vpp_degree`` to
    every mode; only VPP and ZBVPP read it. Returns None if Paddle rejects
    the sizes.
    """
    if mode not in MODES:
        raise ValueError(f"unknown Paddle schedule mode {mode!r}; expected one of {MODES}")
    if not 0 <= rank < pp:
        raise ValueError(f"rank {rank} out of range for pp={pp}")

    attrs = {
        "num_micro_batches": microbatches,
        "pp_degree": pp,
        "pp_stage": rank,
        "vpp_degree": vpp,
        **extra,
    }
    pass_obj = _new_pass()(f"pipeline_scheduler_{mode}", attrs)
    if mode == "ZBVPP":
        _restore_zbvpp_memory_defaults(pass_obj, pp, vpp)
    try:
        jobs = pass_obj._create_job_list()
    except _REJECTIONS:
        return None
    chunked = mode in _CHUNKED_MODES
    return [_to_tuple(job.type(), job.micro_batch_id(), chunked) for job in jobs]


def paddle_accepts(mode: str, pp: int, microbatches: int, vpp: int = 1, **extra: Any) -> bool:
    """True if Paddle builds a job list for every rank 0..pp-1.

    (Eager1F1B's check depends on the rank; rank 0 is the strictest.)
    """
    return all(paddle_job_list(mode, pp, rank, microbatches, vpp, **extra) is not None for rank in range(pp))
