"""What every command shares: the consoles, the options, and how diagnostics end a command.

Exit status comes from the diagnostic code registry (`ppdsl.common.codes.exit_code`): 0 ok, 1 the schedule is
wrong for these sizes, 2 the input cannot be used.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ppdsl.analysis.costs import CostSpec, parse_cost_pairs
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS, default_vpp
from ppdsl.analysis.layers import LayerProfile, Partition, parse_partition, read_profile
from ppdsl.analysis.memory import MeasureMemory
from ppdsl.analysis.scenario import Scenario
from ppdsl.common.codes import EXIT_USAGE, exit_code
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, SourceCache, render_all
from ppdsl.common.files import write_output, write_stdout
from ppdsl.common.sizes import BATCH_RANGE, MAX_JOBS_RANGE, SIZE_RANGE, check_batch_size, parse_params
from ppdsl.common.sizes import DPI_RANGE as DPI_RANGE  # (the ranges live below: a request checks them too)
from ppdsl.common.sizes import SEED_RANGE as SEED_RANGE
from ppdsl.common.sizes import STEPS_RANGE as STEPS_RANGE
from ppdsl.common.sizes import TIME_LIMIT_RANGE as TIME_LIMIT_RANGE
from ppdsl.common.sizes import WORKERS_RANGE as WORKERS_RANGE
from ppdsl.common.text import number_text
from ppdsl.common.units import parse_memory_limit
from ppdsl.language.library import find_schedule


class Trimmed:
    """A renderable whose lines end at their last character: a table pads every cell of its last column to the
    widest one, and a line that ends in spaces is what a user copies or a script compares."""

    def __init__(self, renderable: RenderableType):
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.renderable, options, pad=False):
            while line and not line[-1].control and not line[-1].text.rstrip(" "):
                line.pop()
            if line and not line[-1].control:
                last = line[-1]
                line[-1] = Segment(last.text.rstrip(" "), last.style)
            yield from line
            yield Segment.line()


class PpdslConsole(Console):
    """Rich's console, printing tables `Trimmed`."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(Trimmed(o) if isinstance(o, Table) else o for o in objects), **kwargs)


def console(stderr: bool = False) -> Console:
    """Every console ppdsl prints through. Rich would rewrite user text: markup (`[b]`), emoji codes (`a:x:b`
    becomes `a❌b`) and highlighting are off, so strings print verbatim; ppdsl's own styles are `Text` objects
    (`styled`). Data (JSON, CSV) bypasses rich altogether (`print_data`). Tables print without trailing spaces."""
    return PpdslConsole(stderr=stderr, highlight=False, soft_wrap=True, markup=False, emoji=False)


out = console()
err = console(stderr=True)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line for a console: strings as they are (user text is passed through `escaped` by the caller), and
    `(text, style)` pairs for ppdsl's own colours: `styled(("ok", "green"), ": ...")`."""
    return Text.assemble(*parts)


def print_data(text: str, to: Console | None = None) -> None:
    """Machine-readable output (JSON, CSV) written as it is, not through rich, to `to`'s stream (stdout)."""
    stream = (to or out).file
    stream.write(text if text.endswith("\n") else text + "\n")
    stream.flush()


T = TypeVar("T")

# ---------------------------------------------------------------- options


class TextOrJson(str, Enum):
    text = "text"
    json = "json"


class TableFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


def in_range(flag: str, low: float, high: float) -> Callable[[T], T]:
    """The typer callback that keeps a numeric flag finite and from `low` to `high` (both included): anything
    else (NaN, infinity, out of range) ends the command with E007 naming the flag and its range. A flag not
    given (None) passes. Every numeric flag of every command goes through one of these."""

    def check(value: T) -> T:
        if value is None:
            return value
        if not (math.isfinite(value) and low <= value <= high):
            kind = "an integer" if isinstance(value, int) else "a number"
            usage_error(f"`{flag}` must be {kind} from {_bound(low)} to {_bound(high)}, got {number_text(value)}")
        return value

    return check


def _bound(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


File = Annotated[str, typer.Argument(help="A .sched file, or the name of a shipped schedule (`1f1b`).")]
PP = Annotated[
    int, typer.Option("--pp", help="Pipeline degree (number of ranks).", callback=in_range("--pp", *SIZE_RANGE))
]
Micro = Annotated[
    int,
    typer.Option(
        "--microbatches", "-m", help="Micro-batches per step.", callback=in_range("--microbatches", *SIZE_RANGE)
    ),
]
VPP = Annotated[
    int | None,
    typer.Option(
        "--vpp",
        help="Chunks (virtual stages) per rank. Default 1, or the one count the schedule's `require`s allow (ZB-V: 2).",
        callback=in_range("--vpp", *SIZE_RANGE),
        show_default=False,
    ),
]
Chunks = Annotated[
    int, typer.Option("--vpp", help="Chunks (virtual stages) per rank.", callback=in_range("--vpp", *SIZE_RANGE))
]
DP = Annotated[
    int,
    typer.Option(
        "--dp",
        help="Data-parallel degree: replicas of each rank, which run its order and join its `reduce_grads`.",
        callback=in_range("--dp", *SIZE_RANGE),
    ),
]
Params = Annotated[list[str] | None, typer.Option("--param", help="Schedule parameter, `name=value`; repeatable.")]
CostPairs = Annotated[
    str | None,
    typer.Option("--cost", help="Override costs: `forward=1,backward=2`; `latency=` and `bandwidth=` for links."),
]
CostFile = Annotated[
    Path | None, typer.Option("--costs", help="Cost file (JSON from `ppdsl calibrate`): times in seconds.")
]
Rendezvous = Annotated[
    bool,
    typer.Option(
        "--rendezvous",
        help="A send waits until its receive is posted (synchronous sends, as ppdsl's CPU ranks make; torch's "
        "isend does not wait).",
    ),
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="Measure activation bytes on this model (`module:function` or `builtin`)."),
]
BatchOption = Annotated[
    int,
    typer.Option(
        "--batch-size", help="Samples per step, with --model.", callback=in_range("--batch-size", *BATCH_RANGE)
    ),
]
LayersOption = Annotated[
    Path | None,
    typer.Option(
        "--layers",
        help="Layer profile (JSON): each layer's forward, backward_b and backward_w time, optionally its activation; "
        "the stages' costs and memory come from it and the partition.",
    ),
]
PartitionOption = Annotated[
    str | None,
    typer.Option(
        "--partition",
        help="Layers per virtual stage in stage order (`9,10,9,6`), or a Megatron layout (`Et*8|t*9|t*8|t*7L`); "
        "default: the file's `partition`, else an even split of --layers.",
    ),
]
Output = Annotated[str | None, typer.Option("--output", "-o", help="Write here instead of stdout (`-`: stdout).")]
MaxJobs = Annotated[
    int,
    typer.Option(
        "--max-jobs",
        help="Refuse sizes whose expansion needs more jobs than this, before anything runs.",
        callback=in_range("--max-jobs", *MAX_JOBS_RANGE),
    ),
]

PICTURE_SUFFIXES = (".png", ".svg", ".pdf")

# ---------------------------------------------------------------- ending a command


def fail(diagnostics: list[Diagnostic], code: int | None = None) -> NoReturn:
    """Print the diagnostics and end the command (exit status from the registry unless given)."""
    err.print(render_all(diagnostics, SourceCache(), color=err.is_terminal), markup=False)
    raise typer.Exit(exit_code(diagnostics) if code is None else code)


def diagnosed(fn: Callable[..., T], *args, **kwargs) -> T:
    """Call into the front end; its diagnostics end the command (E: exit 2, S: exit 1)."""
    try:
        return fn(*args, **kwargs)
    except DiagnosticError as e:
        fail(e.diagnostics)


def usage_error(message: str, help: str = "") -> NoReturn:
    fail([Diagnostic("E007", message, help=help)], EXIT_USAGE)


# ---------------------------------------------------------------- output


def to_stdout(output: str | Path | None) -> bool:
    """`-o -` (or no `-o` where stdout is the default): the data goes to stdout."""
    return output is None or str(output) == "-"


def report_console(output: str | Path | None) -> Console:
    """Where a command's messages go: stdout, unless the data does (`-o -`), then stderr, so a pipe gets the data
    alone."""
    return err if output is not None and str(output) == "-" else out


def output_name(output: str | Path | None) -> str:
    """What messages call the output: its path, or stdout."""
    return "stdout" if to_stdout(output) else str(output)


def emit(text: str | bytes, output: str | Path | None) -> None:
    """Write to `output` (`ppdsl.common.files.write_output`: atomically, never over an input), or to stdout when
    it is None or `-`."""
    if to_stdout(output):  # as UTF-8 bytes, whatever the locale's encoding (`files.write_stdout`)
        diagnosed(write_stdout, text if isinstance(text, bytes) or text.endswith("\n") else text + "\n")
        return
    diagnosed(write_output, output, text)


def picture_format(output: Path) -> str:
    """The picture format of an output name: its suffix; PNG for `-` (stdout)."""
    if str(output) == "-":
        return "png"
    suffix = output.suffix.lower()
    if suffix not in PICTURE_SUFFIXES:
        usage_error(f"cannot draw `{output}`", help="name a .png, .svg or .pdf file")
    return suffix[1:]


def save_picture(draw: Callable[[io.BytesIO, str], None], output: Path) -> None:
    """Draw into memory, then write atomically: a failed plot leaves no half-written file."""
    fmt = picture_format(output)
    buf = io.BytesIO()
    draw(buf, fmt)
    emit(buf.getvalue(), output)


# ---------------------------------------------------------------- the scenario the options describe


def cost_spec(cost: str | None, costs: Path | None) -> CostSpec:
    return diagnosed(CostSpec.read, diagnosed(parse_cost_pairs, cost), costs)


def measured_memory(model: str | None, batch_size: int, microbatches: int) -> MeasureMemory | None:
    """How `--model` measures memory (bytes, on the real program), or None. The batch is checked first, so
    a batch that does not split fails before paddle loads."""
    if model is None:
        return None
    diagnosed(check_batch_size, batch_size, microbatches)
    from ppdsl.runtime.memory import model_memory  # the runtime (paddle) only when a model is named

    return model_memory(None if model == "builtin" else model, batch_size)


def layer_profile(path: Path | None) -> LayerProfile | None:
    """`--layers FILE` read (bad profiles end the command with their located diagnostics)."""
    return None if path is None else diagnosed(read_profile, path)


def partition_option(text: str | None) -> Partition | None:
    """`--partition TEXT` read (E103 ends the command)."""
    return None if text is None else diagnosed(parse_partition, text)


def memory_size(
    text: str | None, measured: bool, option: str = "--memory-limit", profile: LayerProfile | None = None
) -> float | None:
    """A limit option in the unit memory is counted in: bytes with --model (`measured`) or with a layer profile
    that gives `activation_bytes`, else activations."""
    if text is None:
        return None
    if profile is not None and not measured:
        return diagnosed(parse_memory_limit, text, profile.memory_unit == "bytes", option, profile.path)
    return diagnosed(parse_memory_limit, text, measured, option)


def profiled_memory_size(text: str | None, measured: bool, layers: Path | None) -> float | None:
    """`--memory-limit` beside `--layers FILE`: in the profile's unit (bytes when it gives `activation_bytes`). A
    profile that does not read leaves the limit to be read in activations: the scenario reports the profile's own
    problems where the command reports them (`check --format json` too)."""
    profile = None
    if text is not None and layers is not None and not measured:
        try:
            profile = read_profile(layers)
        except DiagnosticError:
            profile = None
    return memory_size(text, measured, profile=profile)


def scenario(
    file: str,
    pp: int,
    microbatches: int,
    vpp: int | None = 1,
    param: list[str] | None = None,
    cost: str | None = None,
    costs: Path | None = None,
    rendezvous: bool = False,
    memory: MeasureMemory | None = None,
    memory_limit: float | None = None,
    max_jobs: int = DEFAULT_MAX_JOBS,
    layers: Path | None = None,
    partition: str | None = None,
    dp: int = 1,
) -> Scenario:
    """The scenario a command's options describe; bad options end the command. `vpp` None: the schedule's
    default (`default_vpp`)."""
    params = diagnosed(parse_params, param)
    # (the profile and the partition are read by the scenario: `check --format json` reports their problems too)
    chosen = Scenario(
        find_schedule(file),
        pp,
        microbatches,
        1 if vpp is None else vpp,
        params,
        cost_spec(cost, costs),
        rendezvous,
        memory,
        memory_limit,
        max_jobs,
        layers,
        partition,
        dp,
    )
    if vpp is None:
        try:
            return chosen.with_(vpp=default_vpp(chosen.definition(), pp, microbatches, params))
        except DiagnosticError:  # a file that does not load: the command reports it where it expands
            pass
    return chosen
