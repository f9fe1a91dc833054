"""Sizes and parameters as a command line gives them, checked without the language: a rank process, which never
imports it, validates its options as `ppdsl run` did."""

from __future__ import annotations

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError

MAX_SIZE = 1 << 20  # the largest pp, vpp, micro-batch count or batch an expansion or a run accepts

# The ranges of the numeric flags: sizes as `expand` takes them, a seed CP-SAT takes (32 bits), a picture that
# fits in memory (600 dpi on the largest figure is 14400 x 10000 pixels, 0.6 GB), a search that ends.
SIZE_RANGE = (1, MAX_SIZE)
SEED_RANGE = (0, 2**31 - 1)
WORKERS_RANGE = (1, 256)
BATCH_RANGE = (1, 2**31 - 1)
DPI_RANGE = (10, 600)
STEPS_RANGE = (1, 10_000)
TIME_LIMIT_RANGE = (0.01, 1e6)  # seconds
MAX_JOBS_RANGE = (1, 2**40)


def parse_params(pairs: list[str] | None) -> dict[str, str]:
    """`["k=v", ...]` from the command line: the values as written, which `expand` reads against each parameter's
    type (the schedule says it); raises DiagnosticError (E007) for a pair that is not `name=value`."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key:
            raise DiagnosticError([Diagnostic("E007", f"bad parameter `{pair}`", help="write `--param name=value`")])
        out[key] = raw
    return out


def check_batch_size(batch_size: int, microbatches: int) -> None:
    """A step's batch must split into equal micro-batches (Paddle's executor splits the fed batch along dim 0)."""
    if batch_size < 1:
        raise DiagnosticError([Diagnostic("E007", f"--batch-size must be positive, got {batch_size}")])
    if microbatches >= 1 and batch_size % microbatches:
        m = microbatches
        raise DiagnosticError(
            [
                Diagnostic(
                    "E036",
                    f"batch size {batch_size} does not split into {m} micro-batches",
                    help=f"use a batch size divisible by {m}, e.g. {m * max(1, batch_size // m)}",
                )
            ]
        )
