"""A `.sched` schedule as one of Paddle's own pipeline-scheduler passes.

`pipeline_scheduler_PPDSL` is registered with Paddle's pass registry like `pipeline_scheduler_1F1B` and reads
the same attributes (`num_micro_batches`, `pp_degree`, `pp_stage`, `vpp_degree`, `split_backward`), plus
`ppdsl_schedule` (a `.sched` path or a library name) and `ppdsl_params` (the schedule's `param`s). It checks the
schedule for those sizes, takes rank `pp_stage`'s job list from its plan specification and partitions the program with
ppdsl's generic splitter (`ppdsl.runtime.plan.build_plan`), and leaves the `core.Plan` in the PassContext as
`"plan"`, where Paddle's callers look for it.

Paddle picks its pass by name from `schedule_mode`, but both places that do so refuse any name they do not
know with an `assert` (`pipeline_scheduler_pass.apply_pass`: FThenB / 1F1B / Eager1F1B / VPP / ZBH1 / ZBVPP;
`auto_parallel.static.pir_pass.pipeline_pass`: FThenB / 1F1B / VPP), so registering a pass is not enough for a
user to select it. `install()` therefore wraps both functions (and the auto-parallel engine's own reference to
`pipeline_pass`, which it imported by name): a mode `ppdsl:<name>` or a path ending in `.sched` goes to this
pass, every other mode to Paddle's original function, unchanged.

    from ppdsl.runtime import paddle_pass               # importing it installs; install() is idempotent
    strategy.pipeline.schedule_mode = "ppdsl:zbh1"      # or "schedules/zbh1.sched"

`install()` rebinds a reference to `apply_pass` that a module imported by name before (what a script's
`from paddle.distributed.passes.pipeline_scheduler_pass import apply_pass` holds), and wraps two executor steps
so that a plan runs in the program's own words: `exe.run(main, fetch_list=[loss])` fetches the plan's loss (Paddle
returns nothing for a Value of `main`, which no job program holds), and a startup program run before the plan
was built is E044 saying so, not `The variable ...@GRAD@MERGE should exist`. Paddle's own modes on a program that
does not accumulate its gradients warn that their optimizer steps on micro-batch 0's gradient alone.

A program of your own (not built by ppdsl) needs op roles: `set_op_roles(main, loss)` (from here or
`ppdsl.runtime.own_program`) after `optimizer.minimize(loss)`; the plan accumulates its gradients over the
micro-batches (their mean, as the full batch) and `loss_value(plan)` is the loss (`fetch_list=[loss]` too). Run
the startup program after `apply_pass`.

This module imports paddle; the `ppdsl` command and the front end never import it.
"""

from __future__ import annotations

import functools
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import paddle
from paddle.base import core
from paddle.distributed.passes.pass_base import PassContext, new_pass, register_pass
from paddle.distributed.passes.pipeline_scheduler_pass.pipeline_pass_base import PipelinePassBase

from ppdsl.analysis.check import check
from ppdsl.analysis.plan_spec import expansion_spec
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, SourceCache, render_all
from ppdsl.common.sizes import parse_params
from ppdsl.language.library import find_schedule
from ppdsl.plan.jobs import paddle_job_name
from ppdsl.plan.spec import PlanSpec, with_stages
from ppdsl.runtime.own_program import ProgramError, accumulates, find_loss, loss_value, set_op_roles
from ppdsl.runtime.plan import BuiltPlan, build_plan
from ppdsl.runtime.program import MERGE_SUFFIX

PASS_NAME = "pipeline_scheduler_PPDSL"
MODE_PREFIX = "ppdsl:"
CONTEXT_BUILT = "ppdsl_plan"  # the PassContext attribute holding the whole BuiltPlan (programs, loss value)
_ORIGINAL = "__ppdsl_original__"  # set on each wrapper: the function it wraps (and the mark of `install()`)


class ScheduleError(DiagnosticError):
    """The schedule cannot run at the pass's sizes; `str()` is the checker's rendered diagnostics."""

    def __init__(self, diagnostics: list[Diagnostic], what: str):
        super().__init__(diagnostics)
        self.text = f"{what}\n{render_all(diagnostics, SourceCache())}"

    def __str__(self) -> str:
        return self.text


def schedule_of_mode(mode: object) -> str | None:
    """The schedule a `schedule_mode` names, or None for Paddle's own modes ("1F1B", ...)."""
    if not isinstance(mode, str):
        return None
    if mode.startswith(MODE_PREFIX):
        return mode[len(MODE_PREFIX) :].strip()
    if mode.endswith(".sched"):
        return mode
    return None


@register_pass(PASS_NAME)
class PipelinePPDSLPass(PipelinePassBase):
    """Paddle's pipeline pass contract, with the job list and the job programs taken from a `.sched` file."""

    def __init__(self) -> None:
        super().__init__()
        self.set_attr("vpp_degree", 1)
        self.set_attr("ppdsl_params", {})
        self._spec: PlanSpec | None = None

    # ------------------------------------------------------------ the schedule

    def _sizes(self) -> tuple[int, int, int, int]:
        """(pp, vpp, microbatches, rank), from Paddle's attribute names."""
        needed = ("num_micro_batches", "pp_degree", "pp_stage", "ppdsl_schedule")
        missing = [a for a in needed if self.get_attr(a) is None]
        if missing:
            raise ValueError(f"{PASS_NAME} needs the pass attribute(s) {', '.join(missing)}")
        pp, rank = int(self.get_attr("pp_degree")), int(self.get_attr("pp_stage"))
        if not 0 <= rank < pp:
            raise ValueError(f"{PASS_NAME}: pp_stage {rank} is outside 0 .. {pp - 1}")
        return pp, int(self.get_attr("vpp_degree") or 1), int(self.get_attr("num_micro_batches")), rank

    def _params(self, schedule_params: Mapping[str, object]) -> dict[str, int | float | bool]:
        raw = dict(self.get_attr("ppdsl_params") or {})
        # Paddle's VPP pass takes `split_backward` as a pass attribute; a schedule with that parameter
        # (vpp.sched) follows it unless ppdsl_params says otherwise
        if "split_backward" in schedule_params and "split_backward" not in raw and self.get_attr("split_backward"):
            raw["split_backward"] = True
        # values from a config file arrive as strings: parse them as `--param k=v` would
        text = [f"{k}={v}" for k, v in raw.items() if isinstance(v, str)]
        return {**{k: v for k, v in raw.items() if not isinstance(v, str)}, **parse_params(text)}

    def spec(self) -> PlanSpec:
        """The schedule, checked complete, ordered and deadlock-free for the pass's sizes, as a plan specification
        (of one rank's plan: no merged order)."""
        if self._spec is not None:
            return self._spec
        pp, vpp, m, _ = self._sizes()
        path = find_schedule(str(self.get_attr("ppdsl_schedule")))
        spec = Scenario(path, pp, m, vpp)
        try:
            declared = spec.definition().params
        except DiagnosticError:
            declared = {}  # the check below reports the same problem, with its source line
        try:
            params = self._params(declared)
        except DiagnosticError as err:
            raise ScheduleError(err.diagnostics, f"bad ppdsl_params for `{path}`:") from None
        result = check(spec.with_(params=params))
        if not result.valid:
            raise ScheduleError(
                result.errors or result.diagnostics,
                f"ppdsl schedule `{path}` cannot run at pp={pp} vpp={vpp} microbatches={m}:",
            )
        assert result.expansion is not None
        self._spec = expansion_spec(result.expansion)
        return self._spec

    # ------------------------------------------------------------ PipelinePassBase's two interfaces

    def _create_job_list(self) -> list[core.Job]:
        """Rank `pp_stage`'s jobs in the schedule's order, as `core.Job`s with Paddle's job type names."""
        spec = self.spec()
        rank = int(self.get_attr("pp_stage"))
        jobs = []
        for job_type, chunk, mb in spec.job_tuples(rank):
            job = core.Job(paddle_job_name(job_type, chunk, spec.vpp))
            job.set_micro_batch_id(mb)
            jobs.append(job)
        return jobs

    def _partial_pir_programs(self, program: paddle.pir.Program) -> tuple[list[str], list[paddle.pir.Program]]:
        """The job programs, by Paddle job type name (what `_apply_pir_single_impl` of the base class takes)."""
        built = self._build(program)
        return list(built.programs), list(built.programs.values())

    def _partial_programs(self, program: object) -> None:
        raise NotImplementedError(f"{PASS_NAME} works on PIR programs only (FLAGS_enable_pir_api=1)")

    # ------------------------------------------------------------ the pass

    def _apply_pir_single_impl(
        self, main_program: paddle.pir.Program, startup_program: object, context: PassContext
    ) -> None:
        # The base class would split with `_partial_pir_programs`, list jobs with `_create_job_list` and compute
        # skip-GC variables with Paddle's `set_skip_gc_vars`, whose PIR version frees activations a later
        # `backward_w` still reads. `build_plan` does all three (with ppdsl's skip-GC), so its plan is used as is.
        built = self._build(main_program, startup_program)
        context.set_attr("plan", built.plan)
        context.set_attr(CONTEXT_BUILT, built)
        _remember_loss(main_program, built)

    def _build(self, program: paddle.pir.Program, startup: paddle.pir.Program | None = None) -> BuiltPlan:
        spec = self.spec()
        rank = int(self.get_attr("pp_stage"))
        # The program is this rank's alone (Paddle's passes run after the dense program is cut per rank), its
        # chunks carrying chunk ids 0 .. vpp-1. build_plan works in global stages, so this rank's chunk c is
        # stage c and the other ranks' stages are numbered past them, where no op of this program lies.
        stage_of = [[c if r == rank else spec.vpp * (1 + r) + c for c in range(spec.vpp)] for r in range(spec.pp)]
        work = _with_chunk_ids(program, spec.vpp)
        dynamic = paddle.in_dynamic_mode()
        try:
            return build_plan(
                work,
                startup,  # where accumulators of a program that has none start (ppdsl.runtime.own_program)
                with_stages(spec, stage_of),
                rank=rank,
                whole_model=False,  # Paddle split the model: this program holds this rank's chunks alone
            )
        finally:
            # build_plan switches paddle to static mode; a dygraph caller (the auto-parallel engine is driven
            # from dygraph) must get its mode back
            if dynamic:
                paddle.disable_static()


def engine_vpp_error(schedule: str, vpp: int) -> str:
    """Why `dist.to_static` cannot run `schedule` at vpp > 1, and what can."""
    return (
        f"{PASS_NAME}: `{schedule}` at vpp_degree {vpp} cannot run through Paddle's auto-parallel engine: Paddle "
        "3.3.1's engine assigns ops to a rank's chunks (`complete_chunk_id`, in the looped placement only) just when "
        "schedule_mode is 'VPP', so any other mode reaches the pipeline pass with no chunk ids. Run it with "
        f"`ppdsl run {schedule} --vpp {vpp}` (one process, or one per rank with --nproc-per-node), or through "
        f"`apply_pass(main, startup, 'ppdsl:{schedule}', attrs)` on each rank's program built under "
        "`paddle.base.framework.pir_chunk_id_guard(chunk)`; with vpp_degree 1 the engine path runs every schedule."
    )


def _has_chunk_ids(program: paddle.pir.Program, vpp: int) -> bool:
    forward = [
        op
        for op in program.global_block().ops
        if op.op_role == 0 and op.name() not in ("pd_op.data", "builtin.parameter")
    ]
    return not forward or any(op.has_attr("chunk_id") and 0 <= op.chunk_id < vpp for op in forward)


def _with_chunk_ids(program: paddle.pir.Program, vpp: int) -> paddle.pir.Program:
    """The program with a chunk id on every op that needs one: with one chunk, all of them are chunk 0 (Paddle
    writes chunk ids only for VPP); with several, they must be there already."""
    if vpp == 1:
        work = program.clone()
        for op in work.global_block().ops:
            if not op.has_attr("chunk_id") or op.chunk_id != 0:
                op.set_int_attr("chunk_id", 0)
        return work
    if not _has_chunk_ids(program, vpp):
        raise ValueError(
            f"{PASS_NAME}: vpp_degree is {vpp}, but no forward op of the program carries a chunk id (0 .. {vpp - 1}); "
            "each op's `chunk_id` says which of the rank's chunks it belongs to. Paddle's auto-parallel engine "
            "writes them (complete_chunk_id) only when schedule_mode is 'VPP', in its looped placement; run such a "
            "schedule through `apply_pass` on per-rank programs whose ops carry chunk ids."
        )
    return program


# ---------------------------------------------------------------- a plan's run, in the program's own values

# (the program, its loss Value, the plan built from it) of the plans built lately: `exe.run(main,
# fetch_list=[loss])` names the Value the user holds, which no job program has (Paddle returns nothing for it).
# The programs are held here because a Value whose program is freed crashes the process when it is read.
_PLANNED_LOSSES: list[tuple[paddle.pir.Program, object, BuiltPlan]] = []
_REMEMBERED = 32


def _remember_loss(program: paddle.pir.Program, built: BuiltPlan) -> None:
    loss = find_loss(program)
    if loss is not None and built.loss_value is not None:
        _PLANNED_LOSSES.append((program, loss, built))
        del _PLANNED_LOSSES[:-_REMEMBERED]


def _fetchable(value: object) -> object | None:
    """The job program's Value to fetch for `value` of a program this pass planned: its loss, or a diagnostic for
    any other of its values; None for a value of a program the pass never saw (Paddle's behaviour stands)."""
    program = value.block.program
    planned = [(loss, built) for source, loss, built in _PLANNED_LOSSES if source is program]
    for loss, built in reversed(planned):
        if loss.is_same(value):
            return built.loss_value
    if planned:
        raise ProgramError(
            [
                Diagnostic(
                    "E044",
                    "`fetch_list` names a value of the program the plan was built from, which none of the plan's "
                    "job programs holds (Paddle would return nothing for it)",
                    help="fetch the loss (`fetch_list=[loss]`), or values of the job programs "
                    "(`plan.ir_program(job_type).global_block()`)",
                )
            ]
        )
    return None


def _wrap_fetch_list(original: Callable) -> Callable:
    @functools.wraps(original)
    def _update_pir_fetch_list(self: Any, fetch_list: list, value_map_list: list) -> list:
        found = original(self, fetch_list, value_map_list)
        if len(found) == len(fetch_list) or not _PLANNED_LOSSES:
            return found
        updated = []
        for value in fetch_list:
            mapped = original(self, [value], value_map_list)
            if not mapped and not isinstance(value, str):
                planned = _fetchable(value)
                mapped = [] if planned is None else original(self, [planned], value_map_list)
            updated.extend(mapped)
        return updated

    setattr(_update_pir_fetch_list, _ORIGINAL, original)
    return _update_pir_fetch_list


_MISSING_ACCUMULATOR = re.compile(r"The variable (\S+" + re.escape(MERGE_SUFFIX) + r") should exist")


def _wrap_create_executor(original: Callable) -> Callable:
    @functools.wraps(original)
    def _create_new_executor(self: Any) -> Any:
        try:
            return original(self)
        except ValueError as err:
            missing = _MISSING_ACCUMULATOR.search(str(err))
            if missing is None:
                raise
            raise ProgramError(
                [
                    Diagnostic(
                        "E044",
                        f"the plan's gradient accumulator `{missing.group(1)}` is not in the scope: the pass added it "
                        "to the startup program, which ran before the plan was built (or in another scope)",
                        help="run the startup program after `apply_pass(main, startup, ...)`, in the scope the plan "
                        "runs in (or run it again)",
                    )
                ]
            ) from None

    setattr(_create_new_executor, _ORIGINAL, original)
    return _create_new_executor


# ---------------------------------------------------------------- making Paddle accept `.sched` modes


def apply_schedule(
    main_program: paddle.pir.Program, startup_program: paddle.pir.Program | None, schedule: str, pass_attr: Mapping
) -> core.Plan:
    """Run the PPDSL pass on `main_program` with Paddle's pass attributes (those of `apply_pass`); the plan."""
    attrs = {**pass_attr, "ppdsl_schedule": schedule}
    context = PassContext()
    new_pass(PASS_NAME, attrs).apply([main_program], [startup_program], context)
    return context.get_attr("plan")


def _warn_unaccumulated(main_program: paddle.pir.Program, mode: str, pass_attr: Mapping) -> None:
    """Paddle's own passes plan a program that does not accumulate its gradients, with no error, into a plan whose
    optimizer steps on micro-batch 0's gradient alone: say so, and which mode does accumulate them."""
    microbatches = int(pass_attr.get("num_micro_batches") or 1)
    if microbatches > 1 and not accumulates(main_program):
        warnings.warn(
            f"Paddle's `{mode}` pass does not accumulate this program's gradients over its {microbatches} "
            "micro-batches: the plan's optimizer steps on micro-batch 0's gradient alone. The mode "
            f"`ppdsl:{mode.lower()}` runs the same job order and accumulates them (their mean, as the full batch).",
            UserWarning,
            stacklevel=3,
        )


def _wrap_apply_pass(original: Callable) -> Callable:
    @functools.wraps(original)
    def apply_pass(
        main_program: paddle.pir.Program,
        startup_program: paddle.pir.Program,
        pass_name: str,
        pass_attr: dict | None = None,
    ) -> core.Plan:
        schedule = schedule_of_mode(pass_name)
        if schedule is None:
            _warn_unaccumulated(main_program, pass_name, pass_attr or {})
            # Paddle's default `pass_attr={}` is shared and mutated (1F1B writes into it): leave that as it was
            if pass_attr is None:
                return original(main_program, startup_program, pass_name)
            return original(main_program, startup_program, pass_name, pass_attr)
        return apply_schedule(main_program, startup_program, schedule, pass_attr or {})

    setattr(apply_pass, _ORIGINAL, original)
    return apply_pass


def _wrap_pipeline_pass(original: Callable) -> Callable:
    @functools.wraps(original)
    def pipeline_pass(dense_main_program: list, dense_startup_program: list, pipeline_strategy: Any) -> core.Plan:
        schedule = schedule_of_mode(pipeline_strategy.schedule_mode)
        if schedule is None:
            return original(dense_main_program, dense_startup_program, pipeline_strategy)
        from paddle.distributed.auto_parallel.static.utils import get_pp_stage_by_pp_degree

        attrs = {
            "num_micro_batches": pipeline_strategy.accumulate_steps,
            "pp_degree": pipeline_strategy.pp_degree,
            "pp_stage": get_pp_stage_by_pp_degree(pipeline_strategy.pp_degree),
            "vpp_degree": pipeline_strategy.vpp_degree,
            "split_backward": getattr(pipeline_strategy, "split_backward", False),
            "ppdsl_schedule": schedule,
            # not one of Paddle's fields: set `strategy.pipeline.ppdsl_params = {...}` (it survives deepcopy)
            "ppdsl_params": dict(getattr(pipeline_strategy, "ppdsl_params", None) or {}),
        }
        if attrs["vpp_degree"] > 1 and not all(_has_chunk_ids(p, attrs["vpp_degree"]) for p in dense_main_program):
            raise ValueError(engine_vpp_error(schedule, attrs["vpp_degree"]))
        context = PassContext()
        # the engine hands lists of programs, as Paddle's `pipeline_pass` passes them on
        new_pass(PASS_NAME, attrs).apply(dense_main_program, dense_startup_program, context)
        return context.get_attr("plan")

    setattr(pipeline_pass, _ORIGINAL, original)
    return pipeline_pass


def _targets() -> list[tuple[Any, str, Callable[[Callable], Callable]]]:
    """(module or class, attribute, wrapper factory) of every place Paddle looks a pipeline schedule up by name,
    and of the two executor steps that run a plan in the program's own values (its loss fetched, the startup
    program's order diagnosed)."""
    import paddle.distributed.passes.pipeline_scheduler_pass as scheduler
    from paddle.base import executor
    from paddle.distributed.auto_parallel.static import engine, pir_pass

    return [
        (scheduler, "apply_pass", _wrap_apply_pass),
        (pir_pass, "pipeline_pass", _wrap_pipeline_pass),
        # engine.py did `from .pir_pass import pipeline_pass`: its module global is a second reference
        (engine, "pipeline_pass", _wrap_pipeline_pass),
        (executor._ExecutorCache, "_update_pir_fetch_list", _wrap_fetch_list),
        (executor._StandaloneExecutor, "_create_new_executor", _wrap_create_executor),
    ]


def _rebind_everywhere(old: Callable, new: Callable) -> None:
    """Point every module global that holds `old` at `new`: a script that did `from
    paddle.distributed.passes.pipeline_scheduler_pass import apply_pass` before `install()` holds Paddle's own
    function under its own name, which wrapping the package's attribute does not reach."""
    for module in list(sys.modules.values()):
        try:
            namespace = vars(module)
        except Exception:  # a lazy module object may raise on any attribute (an optional import failing)
            continue
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if value is old:
                namespace[name] = new


def install() -> None:
    """Let Paddle's `schedule_mode` name a `.sched` file (`"ppdsl:zbh1"`, `"my.sched"`), also where a module
    imported `apply_pass` by name before. Idempotent; importing this module does it."""
    for module, name, wrap in _targets():
        current = getattr(module, name)
        if not hasattr(current, _ORIGINAL):
            wrapped = wrap(current)
            setattr(module, name, wrapped)
            if name == "apply_pass":
                _rebind_everywhere(current, wrapped)


def uninstall() -> None:
    """Put Paddle's original functions back (where `install()` rebound them too). Idempotent."""
    for module, name, _ in _targets():
        current = getattr(module, name)
        wrapper = current
        while hasattr(current, _ORIGINAL):
            current = getattr(current, _ORIGINAL)
        setattr(module, name, current)
        if name == "apply_pass" and wrapper is not current:
            _rebind_everywhere(wrapper, current)


def installed() -> bool:
    """Whether `install()` is in effect."""
    return all(hasattr(getattr(module, name), _ORIGINAL) for module, name, _ in _targets())


# Importing the module is the install: a user's `from ppdsl.runtime.paddle_pass import set_op_roles, loss_value`
# (the two calls a program of your own needs) is then all it takes for `apply_pass(..., "ppdsl:1f1b", ...)`.
install()

__all__ = [
    "MODE_PREFIX",
    "PASS_NAME",
    "PipelinePPDSLPass",
    "ScheduleError",
    "apply_schedule",
    "install",
    "installed",
    "loss_value",
    "schedule_of_mode",
    "set_op_roles",
    "uninstall",
]
