"""`ppdsl synth`: the fastest schedule for these sizes and costs within a memory limit, as a checked `.sched`.

Its flags are `SynthRequest`'s option fields, read off the dataclass (flag, help, range, default:
ppdsl/synth/request.py), with the flags a field is composed of in its place (`--cost` / `--costs` make `costs`,
`--model` / `--batch-size` make `memory`) and the command's own (`--max-problem`, `--format`): an option is
written once. This module reads the text flags (a limit's unit follows --model), builds the request and shows
the outcome; `ppdsl frontier` is here too.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import shlex
import sys
import typing
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.scenario import Scenario
from ppdsl.cli import budget
from ppdsl.cli.app import app
from ppdsl.cli.budget import MaxProblem
from ppdsl.cli.common import (
    PP,
    TIME_LIMIT_RANGE,
    BatchOption,
    Chunks,
    CostFile,
    CostPairs,
    Micro,
    ModelOption,
    TextOrJson,
    cost_spec,
    diagnosed,
    emit,
    err,
    in_range,
    layer_profile,
    measured_memory,
    memory_size,
    out,
    print_data,
    save_picture,
    styled,
    usage_error,
)
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.files import check_output
from ppdsl.common.text import escaped
from ppdsl.common.units import format_bytes
from ppdsl.language.library import library_files
from ppdsl.plan.kinds import action_names
from ppdsl.synth.request import SynthRequest, flag, is_option

# The flags the command composes a request's field from (the field itself is no flag: `costs` is a CostSpec)
COMPOSED = {
    "costs": [("cost", CostPairs, None), ("costs", CostFile, None)],
    "memory": [("model", ModelOption, None), ("batch_size", BatchOption, 32)],
}
# the command's own flags, after the request's
OWN = [
    ("max_problem", MaxProblem, None),
    ("fmt", Annotated[TextOrJson, typer.Option("--format", help="Report format.")], TextOrJson.text),
]


def _synth(**given: Any) -> None:
    """Find the fastest schedule within a memory limit and write it as a .sched that `ppdsl check` proves.

    With --layers, the partition of the model's layers into stages is chosen too (or fixed by --partition), the
    memory limit counts layer activations, and the file carries its partition: check it with the same --layers.
    """
    from ppdsl.synth import SynthRequest, synthesize_file
    from ppdsl.synth.request import default_time_limit, parse_actions

    cost, costs, model, batch_size = (given.pop(name) for name in ("cost", "costs", "model", "batch_size"))
    max_problem, fmt = given.pop("max_problem"), given.pop("fmt")
    pp, microbatches, output = given["pp"], given["microbatches"], given["output"]
    if given["periodic"] and given["exact"]:
        usage_error(
            "--periodic and --exact do not combine: --exact proves one size's optimum, --periodic holds for all"
        )
    seconds = given["time_limit"] if given["time_limit"] is not None else default_time_limit(given["exact"])
    budget.refuse_synth(pp, given["vpp"], microbatches, seconds, max_problem)
    spec = cost_spec(cost, costs)
    actions = parse_actions(given["memory_actions"])
    diagnosed(refuse_unused_action_costs, spec, actions)  # (before --model loads paddle)
    # (read first: a profile of `activation_bytes` counts the limit in bytes)
    profile = layer_profile(given["layers"]) if model is None else given["layers"]
    limit = memory_size(given["memory_limit"], model is not None, profile=profile)
    memory = measured_memory(model, batch_size, microbatches)
    diagnosed(check_output, output)  # a bad output is refused now, not after the search
    cost_options = " ".join(([f"--cost {shlex.quote(cost)}"] if cost else []) + ([f"--costs {costs}"] if costs else []))
    memory_options = ""
    if model is not None:
        memory_options = f"--model {model} --batch-size {batch_size}"
        if given["memory_limit"] is not None:
            memory_options += f" --memory-limit {given['memory_limit']}"
    values = {name: value.value if isinstance(value, Enum) else value for name, value in given.items()}
    values.update(
        costs=spec,
        memory_limit=limit,
        memory=memory,
        memory_options=memory_options,
        time_limit=seconds,
        command=_command_line(),
        cost_options=cost_options,
        memory_actions=actions,
        host_limit=memory_size(given["host_limit"], model is not None, "--host-limit", profile),
        layers=profile,
    )
    request = SynthRequest(**values)
    quiet = fmt is TextOrJson.json or not err.is_terminal
    with err.status("searching", spinner="dots") if not quiet else _nothing():
        note = None if quiet else (lambda msg: err.log(msg))
        outcome = diagnosed(synthesize_file, request, note)
    emit(outcome.text, output)
    rows = _library_rows(outcome, request, spec)
    if fmt is TextOrJson.json:
        report = _report(outcome, rows, output)
        if outcome.partition is not None:
            report["partition"] = list(outcome.partition.counts)
            report["partitions_tried"] = [
                {"partition": list(p.counts), "makespan": m} for p, m in outcome.partitions_tried
            ]
        print_data(json.dumps(report, indent=2))
    else:
        _print(outcome, rows, output)
        if outcome.partition is not None:
            tried = ", ".join(f"{p.text()}: {'-' if m is None else f'{m:g}'}" for p, m in outcome.partitions_tried)
            out.print(f"partition {outcome.partition.text()} (tried {tried})", markup=False)


def command_parameters() -> list[inspect.Parameter]:
    """`ppdsl synth`'s parameters: one per option field of `SynthRequest` (its flag, short alias, help, range and
    default, read off the field), the flags a composed field is made of in its place, then the command's own."""
    hints = typing.get_type_hints(SynthRequest)
    parameters = []

    def add(name: str, annotation: Any, default: Any) -> None:
        kind = inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(name, kind, default=default, annotation=annotation))

    for f in dataclasses.fields(SynthRequest):
        for name, annotation, default in COMPOSED.get(f.name, []):
            add(name, annotation, default)
        if not is_option(f):
            continue
        meta = f.metadata
        names = [meta.get("flag", flag(f)), *([meta["short"]] if "short" in meta else [])]
        checked = {"callback": in_range(flag(f), *meta["within"])} if "within" in meta else {}
        cli_type = meta.get("cli_type") or hints[f.name]
        default = None if "cli_type" in meta else f.default  # (text not given: None, the field's default follows)
        if "choices" in meta:  # shown in --help as `[looped|vshape]`
            cli_type = Enum(f.name.title(), {value: value for value in meta["choices"]}, type=str)
            default = cli_type(f.default)
        if meta.get("required") or default is dataclasses.MISSING:
            default = inspect.Parameter.empty
        add(f.name, Annotated[cli_type, typer.Option(*names, help=meta["help"], **checked)], default)
    for name, annotation, default in OWN:
        add(name, annotation, default)
    return parameters


_synth.__signature__ = inspect.Signature(command_parameters())  # what typer reads the command's parameters from
synth_cmd = app.command("synth")(_synth)


def refuse_unused_action_costs(spec: CostSpec, actions: tuple[str, ...]) -> None:
    """`--cost offload=...` without `--memory-actions` times nothing synth writes (E110): more likely a forgotten
    option than an intent. A cost file's memory-action costs are left out instead (it may be calibrated on a run
    with them)."""
    named = [name for name in action_names() if name in (spec.pairs or {})]
    if named and not actions:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E110",
                    f"`--cost` gives `{named[0]}` a cost, but synth places no {named[0]} jobs without --memory-actions",
                    help="add `--memory-actions recompute,offload` (or the one you mean) to let the search use them, "
                    f"or drop `{named[0]}` from --cost",
                )
            ]
        )


def _command_line() -> str:
    """This command as typed, without the options that only change how the report looks."""
    args = sys.argv[1:]
    if args[:1] != ["synth"]:
        return ""
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--format":
            skip = True
            continue
        if not arg.startswith("--format="):
            kept.append(arg)
    return " ".join(["ppdsl", *map(shlex.quote, kept)])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _library_rows(outcome, request, spec):
    """The library's schedules measured at the same sizes and costs (and partition of the profile's layers, the
    one synth chose), with whether they fit the limit."""
    from ppdsl.reports.compare import compare

    base = Scenario(
        "",
        request.pp,
        request.microbatches,
        request.vpp,
        None,
        spec,
        memory=request.memory,
        layers=request.profile(),
        partition=outcome.partition,
    )
    try:
        rows = compare(library_files(), base, memory_limit=request.memory_limit, skip_broken=True)
    except Exception:
        return []
    return [r for r in rows if r.status == "ok"]


def _report(outcome, rows, output) -> dict:
    from ppdsl.synth.actions import ACTION_NAMES  # (synth has run: importing it costs nothing more)

    result = outcome.result
    report = _base_report(outcome, rows, output)
    if outcome.request.memory_actions:  # how many (stage, micro-batch)s each action took, and the host's peak
        names = result.problem.expansion.type_names  # (the orders' type indices are the probe's)
        jobs = [names[t] for order in result.orders for t, _, _ in order]
        report["memory_actions"] = {a: jobs.count(a) for a in ACTION_NAMES}  # the actions synth chooses
        report["host_peak"] = result.evaluation.host_peak
    return report


def _base_report(outcome, rows, output) -> dict:
    result, check = outcome.result, outcome.check
    return {
        "file": None if output == "-" else output,
        "makespan": result.makespan,
        "lower_bound": result.lower_bound,
        "optimal": result.optimal,
        "gap": result.gap,
        "bubble_ratio": check.bubble_ratio,
        "recompute_ratio": check.recompute_ratio,
        "peak_activations": [r.peak_activations for r in check.ranks],
        "memory_unit": check.expansion.memory_unit,
        "memory_limit": outcome.request.memory_limit,
        "pp": outcome.request.pp,
        "vpp": outcome.request.vpp,
        "microbatches": outcome.request.microbatches,
        "placement": outcome.request.placement,
        "found_by": result.origin,
        "steps": [{"step": s.name, "makespan": s.makespan, "detail": s.detail} for s in result.steps],
        "seconds": result.seconds,
        "library": [
            {
                "schedule": r.schedule,
                "makespan": r.makespan,
                "peak_activations": r.peak_activations,
                "fits": not r.over_limit if r.over_limit is not None else True,
            }
            for r in rows
        ],
    }


def _ratio(a: float, b: float) -> str:
    """`a / b` to 3 decimals; `-` when b is 0 (zero costs can make a schedule of no time: a valid result)."""
    return f"{a / b:.3f}" if b else "-"


def _print(outcome, rows, output) -> None:
    result, check = outcome.result, outcome.check
    in_bytes = check.expansion.memory_unit == "bytes"
    shown = format_bytes if in_bytes else (lambda x: f"{x:g}")
    where = "stdout" if output == "-" else f"`{escaped(output)}`"
    verdict = "optimal" if result.optimal else f"{result.gap:.1%} above the lower bound"
    overhead = f", recompute {check.recompute_ratio:.1%}" if check.has_recompute else ""
    out.print(
        styled(
            ("wrote", "green"),
            f" {where}: makespan {result.makespan:g} ({verdict}), bubble {check.bubble_ratio:.1%}{overhead}",
        )
    )
    out.print(
        f"lower bound {result.lower_bound:g} (makespan / bound = {_ratio(result.makespan, result.lower_bound)}); "
        f"found by {result.origin} in {result.seconds:.1f} s"
    )
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("rank", "busy", "idle", "peak memory" if in_bytes else "peak activations", "limit"):
        table.add_column(col, justify="right")
    for r in check.ranks:
        limit = "-" if r.memory_limit is None else shown(r.memory_limit)
        table.add_row(str(r.rank), f"{r.busy:g}", f"{r.idle:g}", shown(r.peak_activations), limit)
    out.print(table)
    if rows:
        lib = Table(
            title="the library at the same sizes and costs", title_justify="left", box=None, header_style="bold"
        )
        for col in ("schedule", "makespan", "peak", "fits", "vs synth"):
            lib.add_column(col, justify="left" if col == "schedule" else "right")
        for row in rows:
            fits = row.over_limit is not True
            ratio = f"{_ratio(row.makespan, result.makespan)}x"
            lib.add_row(
                escaped(row.schedule), f"{row.makespan:g}", shown(row.peak_activations), "yes" if fits else "no", ratio
            )
        out.print(lib)


@app.command("frontier")
def frontier_cmd(
    pp: PP,
    microbatches: Micro,
    vpp: Chunks = 1,
    cost: CostPairs = None,
    costs: CostFile = None,
    memory_actions: Annotated[
        str, typer.Option("--memory-actions", help="The actions synth may use: recompute, offload or both.")
    ] = "recompute,offload",
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            help="Limits on the ladder (from one micro-batch to 1F1B's peak).",
            callback=in_range("--steps", 2, 64),
        ),
    ] = 6,
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit",
            help="Seconds of search for each synth point.",
            callback=in_range("--time-limit", *TIME_LIMIT_RANGE),
        ),
    ] = 2.0,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Draw the frontier to this PNG.")] = None,
    fmt: Annotated[TextOrJson, typer.Option("--format", help="Report format.")] = TextOrJson.text,
) -> None:
    """Makespan against memory limit: synth with the order alone and with memory actions, and every library
    schedule at its own peak, so you see what each unit of memory buys."""
    from ppdsl.reports.frontier import draw_frontier, frontier
    from ppdsl.synth.request import parse_actions

    if output is not None:
        diagnosed(check_output, output)
    spec = cost_spec(cost, costs)
    actions = parse_actions(memory_actions)
    quiet = fmt is TextOrJson.json or not err.is_terminal
    with err.status("searching", spinner="dots") if not quiet else _nothing():
        fr = diagnosed(frontier, pp, microbatches, vpp, spec, actions, steps, time_limit)
    if output is not None:  # drawn into memory, written by the one writer (never through a planted symlink)
        save_picture(lambda buf, fmt_: draw_frontier(fr, buf, fmt_), Path(output))
    if fmt is TextOrJson.json:
        data = {
            "pp": pp,
            "microbatches": microbatches,
            "vpp": vpp,
            "points": [p.__dict__ for p in fr.points],
            "anchors": [a.__dict__ for a in fr.anchors],
        }
        print_data(json.dumps(data, indent=2))
        return
    table = Table(title=f"makespan against memory limit, pp={pp} m={microbatches} vpp={vpp}")
    for column in ("limit", "synth (order)", "synth (actions)", "best anchor that fits", "anchor makespan"):
        table.add_column(column, justify="left" if "anchor that" in column else "right")
    for p in fr.points:
        best = fr.best_anchor(p.limit)
        table.add_row(
            f"{p.limit:g}",
            "-" if p.order_only is None else f"{p.order_only:g}",
            "-" if p.with_actions is None else f"{p.with_actions:g}",
            escaped(best.name) if best else "-",
            f"{best.makespan:g}" if best else "-",
        )
    out.print(table)
    if output is not None:
        out.print(f"drew `{escaped(output)}`")
