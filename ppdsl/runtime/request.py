"""What a training run is asked to do: every option of `ppdsl run` / `ppdsl.run(...)`, once.

`RunRequest` is the one table of the run's options: each field's name is the option (`batch_size` is
`--batch-size`), its default is the option's, its metadata holds the command line's help (`option`), and
`RunRequest(...)` validates every value at once (a `DiagnosticError` naming each bad one). Everything else is
read off it: the `ppdsl run` command's parameters (ppdsl/cli/training.py), the spec each rank process reads
(`to_spec` / `from_spec`), and `TrainConfig`, the fields that decide the training's numbers (marked `train`),
which is also what a checkpoint's identity holds (`checkpoint.run_identity`). A new option is one field here.

No paddle, numpy or file system here: the command line imports this for every command.
"""

# ruff: noqa: RUF009 (`option(...)` is `dataclasses.field` with the option's help: evaluated once, at class creation)

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.sizes import MAX_SIZE, check_batch_size, parse_params
from ppdsl.common.text import show

MAX_SEED = 2**31 - 2  # Paddle's program seed is a 32-bit int, and 2**31 - 1 stands in for seed 0 (runtime/program.py)
MAX_STEPS = 10**9  # far more than any run; past it `--steps` is a typo, and 10**30 trained without end
MAX_DP = 4096  # replicas; past it `--dp` is a typo (each is pp processes)
MAX_COMM_TIMEOUT = 24 * 3600.0  # seconds; a thread join refuses far larger timeouts
OPTIMIZERS = ("adam", "sgd")


_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")  # a host name's part between dots (RFC 1123)
MASTER_HELP = "`--master HOST:PORT`: a host name or IPv4 address, and a port from 1 to 65535 (`10.0.0.1:8090`)"


def master_problems(master: str) -> list[Diagnostic]:
    """What is wrong with a `--master` value, before the launcher (which would only log it) sees it."""
    host, colon, port = master.rpartition(":")
    if not colon:
        return [Diagnostic("E070", f"`--master {master}` has no port", help=MASTER_HELP)]
    wrong = []
    if not host:
        wrong.append("no host")
    elif len(host) > 253 or not all(_LABEL.fullmatch(label) for label in host.split(".")):
        wrong.append(f"host `{host}` is not a host name or IPv4 address")
    if not port:
        wrong.append("no port")
    elif not (port.isascii() and port.isdecimal() and 1 <= int(port) <= 65535):
        wrong.append(f"port `{port}` is not a number from 1 to 65535")
    return [Diagnostic("E070", f"`--master {master}`: {', and '.join(wrong)}", help=MASTER_HELP)] if wrong else []


def option(
    default: Any,
    help: str,
    *,
    short: str | None = None,
    argument: bool = False,
    train: bool = False,
    cli_type: Any = None,
) -> Any:
    """A run option: its default and its help; `short` a one-letter alias (`-m`), `argument` for the positional
    one, `train` for what decides the training's numbers (TrainConfig, the checkpoint identity), `cli_type` the
    command line's type where it is not the field's (`--param` is repeated text; Python may pass a mapping)."""
    metadata = {"help": help, "short": short, "argument": argument, "train": train, "cli_type": cli_type}
    return field(default=default, metadata=metadata)


def flag(name: str) -> str:
    """The command-line flag of a field: `batch_size` -> `--batch-size` (`params` is `--param`, one per pair)."""
    return "--param" if name == "params" else "--" + name.replace("_", "-")


ParamValues = Mapping[str, "int | float | bool | str"]


def _is_default(f: dataclasses.Field, value: Any) -> bool:
    """Whether an option holds its default (a path as the same place: a spec carries paths resolved)."""
    if isinstance(value, Path) and isinstance(f.default, Path):
        return value.resolve() == f.default.resolve()
    return value == f.default


# the options of a launch (one process per rank): given without --nproc-per-node, one process would ignore them
LAUNCH_ONLY = ("nnodes", "master", "node_rank", "run_dir", "comm_timeout", "rendezvous_timeout", "dry_run")


@dataclass(frozen=True)
class RunRequest:
    """One training run: check `schedule` at these sizes, then train `steps` steps with its plan, on one process
    (every stage emulated) or, with `nproc_per_node`, one process per rank through paddle.distributed.launch."""

    schedule: str | Path = option("1f1b", "A .sched file or shipped schedule name.", argument=True, cli_type=str)
    pp: int = option(4, "Pipeline degree (stages emulated on this machine).")
    dp: int = option(
        1, "Data-parallel degree: replicas of the pipeline (pp x dp processes), gradients reduced by `reduce_grads`."
    )
    microbatches: int = option(8, "Micro-batches per step (per replica, with --dp).", short="-m")
    vpp: int = option(1, "Chunks (virtual stages) per rank.")
    params: ParamValues | Sequence[str] | None = option(
        None, "Schedule parameter, `name=value`; repeatable.", cli_type=list[str] | None
    )
    steps: int = option(30, "Training steps in all (a resumed run ends at the same step).")
    model: str | None = option(None, "`module:function` building the forward pass (see README).")
    batch_size: int = option(32, "Samples per step (all micro-batches of every replica).", train=True)
    lr: float = option(0.01, "Learning rate.", train=True)
    optimizer: str = option("adam", "adam or sgd.", train=True)
    seed: int = option(0, "Seed of parameters and synthetic data.", train=True)
    summary_json: Path | None = option(None, "Write losses, checksums and times here.")
    save_dir: Path | None = option(None, "Write checkpoints here.")
    save_every: int = option(0, "Checkpoint every N steps (0: at the end).")
    resume: Path | None = option(None, "Continue from this --save-dir.")
    profile: Path | None = option(None, "Write the last steps' measured job timings (Chrome trace).")
    profile_steps: int = option(3, "How many final steps to profile.")
    nproc_per_node: int | None = option(None, "One process per rank via paddle.distributed.launch (K per node).")
    nnodes: int = option(1, "Nodes, with --nproc-per-node.")
    master: str | None = option(None, "HOST:PORT of the rendezvous, several nodes.")
    node_rank: int = option(0, "This node's index, several nodes.")
    run_dir: Path = option(Path("ppdsl-run"), "Spec, logs and results of a launch.")
    comm_timeout: float = option(20.0, "Seconds a receive may wait before the run stops.")
    dry_run: bool = option(False, "With --nproc-per-node: print the command and every rank's jobs.")
    rendezvous_timeout: float = option(60.0, "Seconds for every rank of this node to meet its peers.")
    partition: str | None = option(
        None,
        "Layers per virtual stage (`9,10,9,6`, embedding and head counted) or a Megatron layout: the model's "
        "`ctx.pipeline` stack split by it (default: the file's `partition`, else the model's own split).",
    )
    layers: Path | None = option(
        None, "Layer profile (JSON) the check times the partition's stages by (default: every layer alike)."
    )

    def __post_init__(self) -> None:
        for f in fields(self):  # paths as Path, whatever the caller passed (a str from Python, JSON from a spec)
            value = getattr(self, f.name)
            if isinstance(value, str) and f.name in _PATH_FIELDS:
                object.__setattr__(self, f.name, Path(value))
        problems = self.problems()
        if problems:
            raise DiagnosticError(problems)
        if self.params is not None and not isinstance(self.params, Mapping):
            object.__setattr__(self, "params", parse_params(list(self.params)))

    # ------------------------------------------------------------ validation: the one place

    def problems(self) -> list[Diagnostic]:
        """Every value out of range, before anything runs: a NaN learning rate trains NaN parameters without an
        error, `--steps 10**30` trained without end."""
        problems = []
        if self.steps < 0:
            problems.append(Diagnostic("E007", f"--steps must not be negative, got {self.steps}"))
        if self.steps > MAX_STEPS:
            problems.append(Diagnostic("E007", f"--steps must be at most {MAX_STEPS}, got {self.steps}"))
        if not 1 <= self.dp <= MAX_DP:
            problems.append(Diagnostic("E007", f"--dp must be at least 1 and at most {MAX_DP}, got {self.dp}"))
        try:  # every replica trains `microbatches` of the step's dp x microbatches equal micro-batches
            check_batch_size(self.batch_size, self.microbatches * max(self.dp, 1))
        except DiagnosticError as e:
            problems += e.diagnostics
        if self.batch_size > MAX_SIZE:  # the feed is allocated whole: a larger one fails inside paddle, not here
            problems.append(Diagnostic("E007", f"--batch-size must be at most {MAX_SIZE}, got {self.batch_size}"))
        if not (math.isfinite(self.lr) and self.lr > 0):
            problems.append(
                Diagnostic("E007", f"--lr must be a finite number above 0, got {self.lr}", help="e.g. --lr 0.01")
            )
        if not 0 <= self.seed <= MAX_SEED:
            problems.append(Diagnostic("E007", f"--seed must be an integer from 0 to {MAX_SEED}, got {self.seed}"))
        if self.optimizer not in OPTIMIZERS:
            problems.append(Diagnostic("E007", f"unknown optimizer `{self.optimizer}`", help="use adam or sgd"))
        if self.save_every < 0:
            problems.append(Diagnostic("E007", f"--save-every must not be negative, got {self.save_every}"))
        if self.save_every and self.save_dir is None:
            problems.append(Diagnostic("E007", "--save-every needs --save-dir"))
        if self.profile_steps < 1:
            problems.append(Diagnostic("E007", f"--profile-steps must be at least 1, got {self.profile_steps}"))
        if not (math.isfinite(self.comm_timeout) and 0 < self.comm_timeout <= MAX_COMM_TIMEOUT):
            problems.append(
                Diagnostic(
                    "E007",
                    f"--comm-timeout must be seconds above 0, at most {MAX_COMM_TIMEOUT:g}, got {self.comm_timeout}",
                )
            )
        if not (math.isfinite(self.rendezvous_timeout) and self.rendezvous_timeout > 0):
            problems.append(
                Diagnostic(
                    "E007", f"--rendezvous-timeout must be a positive number of seconds, got {self.rendezvous_timeout}"
                )
            )
        if self.params is not None and not isinstance(self.params, Mapping):
            try:
                parse_params(list(self.params))
            except DiagnosticError as e:
                problems += e.diagnostics
        return problems + self._launch_problems()

    def _launch_problems(self) -> list[Diagnostic]:
        if self.nproc_per_node is None:
            # one process would ignore them: a launch's options without a launch
            given = [
                flag(f.name)
                for f in fields(self)
                if f.name in LAUNCH_ONLY and not _is_default(f, getattr(self, f.name))
            ]
            if not given:
                return []
            verb, them = ("goes", "it") if len(given) == 1 else ("go", "them")
            return [
                Diagnostic(
                    "E007",
                    f"{', '.join(given)} {verb} with --nproc-per-node: without it the run is one process and would "
                    f"ignore {them}",
                    help="add --nproc-per-node K (one process per rank: K x --nnodes = --pp), or drop the flag",
                )
            ]
        problems = []
        if self.profile is not None:
            problems.append(
                Diagnostic(
                    "E007",
                    "--profile records the jobs of one process, and with --nproc-per-node each rank is a process of "
                    "its own: no trace would be written",
                    help="profile the same schedule and sizes without --nproc-per-node (every rank emulated in this "
                    "process, one trace of all ranks); `ppdsl plot --measured` draws it",
                )
            )
        if self.nproc_per_node < 1 or self.nnodes < 1:
            problems.append(Diagnostic("E007", "--nproc-per-node and --nnodes must be positive"))
        elif self.nproc_per_node * self.nnodes != self.world_size:
            runs = f"pp = {self.pp}" if self.dp == 1 else f"pp x dp = {self.pp} x {self.dp} = {self.world_size} ranks"
            problems.append(
                Diagnostic(
                    "E038",
                    f"{self.nnodes} node(s) x {self.nproc_per_node} processes = {self.nnodes * self.nproc_per_node} "
                    f"ranks, but the schedule runs {runs}",
                    help="one process per rank: --nproc-per-node * --nnodes must equal --pp * --dp",
                )
            )
        if self.nnodes > 1 and not self.master:
            problems.append(Diagnostic("E038", "several nodes need --master HOST:PORT", help="the rendezvous address"))
        if not 0 <= self.node_rank < max(self.nnodes, 1):
            problems.append(Diagnostic("E038", f"--node-rank {self.node_rank} is not in 0 .. {self.nnodes - 1}"))
        if self.master:  # an empty one is a missing one (above)
            problems += master_problems(self.master)
        return problems

    # ------------------------------------------------------------ what is read off it

    @property
    def clustered(self) -> bool:
        """One process per rank (else every stage on this one)."""
        return self.nproc_per_node is not None

    def one_process_problems(self) -> list[Diagnostic]:
        """What one process cannot train (a run without `nproc_per_node`): replicas, whose gradient reduction is
        a collective between processes; the check at `dp` is still the schedule's (`ppdsl check --dp`)."""
        if self.dp == 1:
            return []
        return [
            Diagnostic(
                "E007",
                f"--dp {self.dp} needs one process per rank: one process emulates a single pipeline",
                help=f"add --nproc-per-node {self.world_size} (pp x dp ranks), or train the same step on one "
                f"process with --dp 1 -m {self.microbatches * self.dp}",
            )
        ]

    @property
    def world_size(self) -> int:
        """Every rank of the job: `dp` replicas of a `pp`-rank pipeline."""
        return self.pp * self.dp

    @property
    def local_ranks(self) -> range:
        """The ranks this node runs (every rank on one process)."""
        if self.nproc_per_node is None:
            return range(self.pp)
        return range(self.node_rank * self.nproc_per_node, (self.node_rank + 1) * self.nproc_per_node)

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig(**{f.name: getattr(self, f.name) for f in fields(TrainConfig)})

    def param_pairs(self) -> list[str]:
        """The schedule parameters as `--param` pairs (`name=value`, values as the language writes them)."""
        return [f"{k}={v if isinstance(v, str) else show(v)}" for k, v in (self.params or {}).items()]

    def to_spec(self) -> dict[str, Any]:
        """Every option as JSON for the rank processes (paths absolute: a rank may start elsewhere)."""
        spec: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Path):
                value = str(value.resolve())
            spec[f.name] = value
        spec["params"] = self.param_pairs()
        return spec

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> RunRequest:
        """The request `to_spec` wrote (a spec's other keys, the launch's own, are not options)."""
        return cls(**{f.name: spec[f.name] for f in fields(cls) if f.name in spec})


_PATH_FIELDS = {f.name for f in fields(RunRequest) if f.type in ("Path", "Path | None")}  # not `schedule`: a name too

# What decides a run's numbers, and so what a checkpoint must match: the `train` options, with their defaults.
TrainConfig = dataclasses.make_dataclass(
    "TrainConfig",
    [
        (f.name, f.type, field(default=f.default, metadata=f.metadata))
        for f in fields(RunRequest)
        if f.metadata["train"]
    ],
    frozen=True,
)
TrainConfig.__module__ = __name__
TrainConfig.__doc__ = "The training options of a RunRequest (its `train` fields): what decides the run's numbers."
