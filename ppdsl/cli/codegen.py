"""`ppdsl compile`: a schedule as a readable Python plan module."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.cli.app import app
from ppdsl.cli.common import (
    DP,
    SIZE_RANGE,
    File,
    MaxJobs,
    Params,
    diagnosed,
    emit,
    err,
    in_range,
    out,
    scenario,
    usage_error,
)
from ppdsl.common.diagnostics import SourceCache, render_all
from ppdsl.common.text import escaped


@app.command("compile")
def compile_cmd(
    file: File,
    output: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Write the plan module here (`-` for stdout; default plan_<name>.py)."),
    ] = None,
    pp: Annotated[
        int | None,
        typer.Option(
            "--pp", help="Check the schedule at these sizes before compiling.", callback=in_range("--pp", *SIZE_RANGE)
        ),
    ] = None,
    microbatches: Annotated[
        int | None,
        typer.Option(
            "--microbatches", "-m", help="Micro-batches per step.", callback=in_range("--microbatches", *SIZE_RANGE)
        ),
    ] = None,
    vpp: Annotated[
        int | None,
        typer.Option("--vpp", help="Chunks (virtual stages) per rank.", callback=in_range("--vpp", *SIZE_RANGE)),
    ] = None,
    param: Params = None,
    dp: DP = 1,
    literal: Annotated[
        bool, typer.Option("--literal", help="Make `job_list` the expanded order of these sizes, for them only.")
    ] = False,
    max_jobs: MaxJobs = DEFAULT_MAX_JOBS,
) -> None:
    """Compile a schedule into a plan module: readable Python whose build_plan() makes its Paddle plan."""
    from ppdsl.analysis.check import check
    from ppdsl.codegen.generate import generate_plan_module, module_stem

    sized = pp is not None or microbatches is not None or vpp is not None or bool(param) or dp != 1
    if (literal or sized) and (pp is None or microbatches is None):
        what = (
            "`--literal` compiles for given sizes"
            if literal
            else "`--dp` is checked with the sizes (the plan module is the same at every degree)"
            if dp != 1
            else "sizes and parameters are checked together"
        )
        usage_error(f"{what}: pass `--pp P -m M` (and `--vpp V` for more than one chunk)")
    spec = scenario(file, pp or 1, microbatches or 1, vpp or 1, param, max_jobs=max_jobs, dp=dp)
    defn = diagnosed(spec.definition)
    if sized:  # a plan for sizes the checker rejects would hang or fail on the cluster
        result = check(spec)
        if result.diagnostics:
            err.print(render_all(result.diagnostics, SourceCache(), color=err.is_terminal), markup=False)
        if not result.valid:
            raise typer.Exit(result.exit_code)
    text = diagnosed(generate_plan_module, defn, spec.path, literal=spec if literal else None)
    if output == "-":
        emit(text, None)
        return
    target = Path(output) if output else Path(f"plan_{module_stem(defn.name)}.py")
    emit(text, target)
    form = "a literal order" if literal else "tables" if defn.tables else "loops"
    out.print(f"wrote {escaped(str(target))}: `{escaped(defn.name)}`, job_list as {form}")
