"""What `ppdsl synth` is asked for: `SynthRequest`, the one table of its options (each field is a flag of the
command and a keyword of `ppdsl.synthesize`, with its help, its range and its default), the checks that need
nothing built (`SynthRequest.problems`), and the words a request is written in (placements, backward splits,
memory actions).

No search here, and nothing the command line does not load anyway: it reads these fields for every command.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from ppdsl.analysis.costs import CostSpec
from ppdsl.analysis.expand import DEFAULT_MAX_JOBS
from ppdsl.analysis.layers import LayerProfile, Partition, parse_partition, read_profile
from ppdsl.analysis.memory import MeasureMemory, MemoryModel
from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.sizes import MAX_JOBS_RANGE, SEED_RANGE, SIZE_RANGE, TIME_LIMIT_RANGE, WORKERS_RANGE
from ppdsl.common.text import escaped
from ppdsl.plan.kinds import DEFAULT_RECOMPUTE_FRACTION, OFFLOAD_NAME, RECOMPUTE_NAME

PLACEMENTS = ("looped", "vshape")
# what a (stage, micro-batch) may do with its activation: keep it, or one of the memory actions a search may choose
KEEP, RECOMPUTE, OFFLOAD = "keep", RECOMPUTE_NAME, OFFLOAD_NAME
ACTION_NAMES = (RECOMPUTE, OFFLOAD)
SPLIT_MODES = ("auto", "yes", "no")


def option(default: Any = MISSING, help: str = "", **cli: Any) -> Any:
    """A field that is an option of `ppdsl synth` and a keyword of `ppdsl.synthesize`: its default and its help;
    `cli` says how the command line spells it where the field's name and type do not: `flag` (`--split-backward`,
    `--library/--no-library`), `short` (`-m`), `within` (the range a number is checked against, on the command
    line as it is parsed and in `problems()`), `choices` (the values of a text option, shown in --help),
    `cli_type` (what the command line reads: `--memory-limit 2GiB` is text, read against --model), `required`
    (the command line needs it, as `--output`)."""
    metadata = {"help": help, **cli}
    return field(default=default, metadata=metadata)


def flag(f: Field) -> str:
    """The command-line flag of a field: `backward_b_frees` -> `--backward-b-frees`, or its own (`--split-backward`)."""
    return f.metadata.get("flag", "--" + f.name.replace("_", "-")).split("/")[0]


def is_option(f: Field) -> bool:
    """Is the field a command-line option (else the command composes it from its own, as `costs` from `--cost` and
    `--costs`, or records how the command was given, as `command`)?"""
    return "help" in f.metadata


# what the command line records of how it was given (for the file's docstring): no keyword of `ppdsl.synthesize`
RECORDED = ("memory_options", "command", "cost_options")


def api_keywords() -> list[str]:
    """The keywords of `ppdsl.synthesize`: every field of the request but what the command line records."""
    return [f.name for f in fields(SynthRequest) if f.name not in RECORDED]


def default_time_limit(exact: bool) -> float:
    """Seconds of search when none is asked: a proof (`--exact`) is given more."""
    return 120.0 if exact else 10.0


@dataclass
class SynthRequest:
    """What to synthesize: the sizes, the costs and memory, and how hard to search.

    The one table of `ppdsl synth`'s options: each `option(...)` field is a flag of the command (its name with
    dashes, its help and default: ppdsl/cli/synth.py reads them off) and a keyword of `ppdsl.synthesize`, checked
    in one place (`problems()`, which `build` runs). The other fields the command composes from its own flags
    (`costs` from --cost / --costs, `memory` from --model / --batch-size) or records for the file's docstring."""

    pp: int = option(help="Pipeline degree (number of ranks).", within=SIZE_RANGE)
    microbatches: int = option(help="Micro-batches per step.", short="-m", within=SIZE_RANGE)
    vpp: int = option(1, "Chunks (virtual stages) per rank.", within=SIZE_RANGE)
    placement: str = option("looped", "looped (stage = chunk * pp + rank) or vshape (ZB-V's V).", choices=PLACEMENTS)
    costs: CostSpec | None = None  # (the command line's --cost pairs and --costs file)
    memory_limit: float | None = option(
        None,
        "Per-rank limit: activations as `check` counts them (`4`), or bytes with a unit (`2GiB`) with --model.",
        cli_type=str | None,
    )
    memory: MemoryModel | MeasureMemory | None = None  # bytes on a model (the CLI's --model); None: activations
    memory_options: str = ""  # how to measure it again on the command line (`--model M --batch-size B`)
    # a model of layers: its profile (a path, or one read), whose partition into stages is searched with the order
    # (`option` returns a field, not a shared default: RUF009 does not know it)
    layers: LayerProfile | str | Path | None = option(  # noqa: RUF009
        None,
        "Layer profile (JSON): each layer's forward, backward_b and backward_w time, optionally its activation; "
        "the stages' costs and memory come from it and the partition.",
        cli_type=Path | None,
    )
    # text as the flag is written (`9,10,9,6` or a Megatron layout), or one read
    partition: Partition | str | None = option(  # noqa: RUF009
        None,
        "With --layers: fix the layers per virtual stage (`9,10,9,6` or a Megatron layout) instead of choosing them.",
        cli_type=str | None,
    )
    split: str = option(
        "auto", "auto (the search chooses), yes (I + W) or no (whole B).", flag="--split-backward", choices=SPLIT_MODES
    )
    backward_b_frees: float = option(0.5, "Part of an activation backward_b frees (the rest: W).", within=(0, 1))
    exact: bool = option(False, "Prove optimality with CP-SAT (or report the gap).")
    # a repeated block, written so that it holds for any number of micro-batches
    periodic: bool = option(False, "A block repeated every period, written to hold for any number of micro-batches.")
    # None: `default_time_limit` (the request holds the seconds once made)
    time_limit: float | None = option(
        None, "Seconds of search (default 10; 120 with --exact).", within=TIME_LIMIT_RANGE
    )
    seed: int = option(0, "Seed of the search's random choices.", within=SEED_RANGE)
    workers: int = option(1, "CP-SAT threads with --exact (more than 1: not deterministic).", within=WORKERS_RANGE)
    library: bool = option(  # seed the search with the library's schedules
        True, "Start the search from the library's schedules too.", flag="--library/--no-library"
    )
    cost_scale: float = 1.0  # every cost times this (compare --synth: a chunk of a V costs half a rank's work)
    max_jobs: int = option(  # sizes needing more jobs are refused before anything runs
        DEFAULT_MAX_JOBS,
        "Refuse sizes whose expansion needs more jobs than this, before anything runs.",
        within=MAX_JOBS_RANGE,
    )
    name: str = option("", "The schedule's name in the file.")
    command: str = ""  # the command line that makes this request (for the file's docstring)
    # where the file goes (named in the docstring's commands)
    output: str = option("OUT.sched", "The .sched file to write (`-`: stdout).", short="-o", required=True)
    cost_options: str = ""  # `--cost ...` / `--costs FILE` as given (for the docstring)
    # of "recompute", "offload": the search may choose them (actions.py); text is read as the flag is
    memory_actions: tuple[str, ...] = option(
        (),
        "Let the search recompute or offload activations: `recompute`, `offload` or `recompute,offload`.",
        cli_type=str | None,
    )
    # what a recompute rebuilds of what its forward does not keep as the stage input (1: a full recompute, as `check`
    # reads a recompute without a fraction); it costs that fraction of the forward (`kinds.recompute_share`)
    recompute_fraction: float = option(
        DEFAULT_RECOMPUTE_FRACTION,
        "With recompute: the part a recompute rebuilds of what its forward does not keep as the stage input (1: a "
        "full recompute, as `check` reads one without a fraction); it costs that part of the forward.",
        within=(0.01, 1),
    )
    host_limit: float | None = option(  # all ranks' offloaded memory together (with offload)
        None, "With offload: all ranks' offloaded memory together (units as --memory-limit).", cli_type=str | None
    )
    # last: the fields before it are also given by position (`SynthRequest(pp, m, vpp, placement, costs, ...)`)
    dp: int = option(
        1,
        "Data-parallel replicas of each rank: above 1 synth places each chunk's reduce_grads (not yet with "
        "--memory-actions, E079).",
        within=SIZE_RANGE,
    )

    def __post_init__(self) -> None:
        if self.time_limit is None:
            self.time_limit = default_time_limit(self.exact)
        if isinstance(self.memory_actions, str):  # (`"recompute,offload"`, as the flag is written)
            self.memory_actions = parse_actions(self.memory_actions)
        else:
            self.memory_actions = tuple(self.memory_actions)

    def problems(self) -> list[Diagnostic]:
        """What is wrong with the request before anything is built: a name the file cannot hold, an unknown memory
        action, a time limit that is no time, a number out of its option's range."""
        problems = []
        bad_name = name_problem(self.name)
        if bad_name is not None:
            problems.append(
                Diagnostic(
                    "E007",
                    f"the name `{self.name}` {bad_name}",
                    help='the name is written between double quotes in the file: leave out `"` and control characters',
                )
            )
        unknown = [a for a in self.memory_actions if a not in ACTION_NAMES]
        if unknown:
            problems.append(
                Diagnostic(
                    "E084",
                    f"unknown memory action `{unknown[0]}` in --memory-actions",
                    help="use `recompute`, `offload` or both: `--memory-actions recompute,offload`",
                )
            )
        if self.dp > 1 and self.memory_actions:  # (the actions engine times no collective yet)
            problems.append(
                Diagnostic(
                    "E079",
                    f"synth does not place reduce_grads with --memory-actions yet: at --dp {self.dp} it places "
                    "either the reductions or the memory actions",
                    help=f"search with --dp {self.dp} and no --memory-actions, or at --dp 1 with them, add "
                    f"`reduce_grads` after each chunk's last backward, and check it with `ppdsl check FILE --dp "
                    f"{self.dp}`",
                )
            )
        problems += self._layer_problems()
        if not (self.time_limit > 0 and math.isfinite(self.time_limit)):
            problems.append(
                Diagnostic("E007", f"the time limit must be a positive number of seconds, got {self.time_limit}")
            )
        return problems or self._range_problems()

    def profile(self) -> LayerProfile | None:
        """The layer profile (`layers`, a path read under the file reader's rules). Raises DiagnosticError
        (E100-E102, located in the file; `problems()` reports them)."""
        if self.layers is None or isinstance(self.layers, LayerProfile):
            return self.layers
        return read_profile(self.layers)

    def fixed_partition(self) -> Partition | None:
        """The partition asked for (`partition`, text read as --partition reads it: E103), None when it is free."""
        return parse_partition(self.partition) if isinstance(self.partition, str) else self.partition

    def _layer_problems(self) -> list[Diagnostic]:
        """A profile or a partition that does not read, a partition without a profile to split, a model measured
        beside a profile (its stages are its own, not a partition of these layers)."""
        problems = []
        for read in (self.profile, self.fixed_partition):
            try:
                read()
            except DiagnosticError as err:
                problems += err.diagnostics
        if self.partition is not None and self.layers is None:
            problems.append(
                Diagnostic(
                    "E007",
                    "synth --partition fixes a partition of --layers",
                    help="give the layer profile: --layers FILE (`layers=` in `ppdsl.synthesize`)",
                )
            )
        if self.layers is not None and self.memory is not None:
            problems.append(
                Diagnostic(
                    "E007",
                    "--model measures a model's own stages, not a partition of --layers",
                    help="drop one (a profile's layers may give their `activation_bytes`)",
                )
            )
        return problems

    def _range_problems(self) -> list[Diagnostic]:
        """The options' ranges (`within`), as the command line checks them when its flags are parsed."""
        problems = []
        for f in fields(self):
            within, value = f.metadata.get("within"), getattr(self, f.name)
            if within is None or value is None:
                continue
            low, high = within
            if not (math.isfinite(value) and low <= value <= high):
                problems.append(Diagnostic("E007", f"`{f.name}` must be from {low:g} to {high:g}, got {value}"))
        return problems


def name_problem(name: str) -> str | None:
    """Why `name` cannot be written as the schedule's name (a `.sched` string has no escapes); None if it can."""
    if '"' in name:
        return 'holds `"`, which would end the string it is written in'
    if not name.isprintable():
        return f"holds a character that cannot be written in a string (`{escaped(name)}`)"
    return None


def parse_actions(text: str | None) -> tuple[str, ...]:
    """`offload, recompute` -> ("recompute", "offload"): the known names in their canonical order, then any
    unknown ones as given (`SynthRequest.problems` reports those, E084)."""
    names = [part.strip() for part in (text or "").split(",") if part.strip()]
    return tuple(a for a in ACTION_NAMES if a in names) + tuple(n for n in names if n not in ACTION_NAMES)
