"""Units: memory sizes as people write them (`2GiB`, `512MiB`, `1.5GB`, `4096`) and print them, and the time
units of cost files and traces."""

from __future__ import annotations

import math
import re

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.text import shortened

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-z]*)\s*$", re.I)


def parse_size(text: str) -> float:
    """Bytes in `text`; a plain number is taken as is (activation units when no model is measured)."""
    m = _SIZE.match(text)
    if not m or m.group(2).lower() not in _UNITS:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E007",
                    f"bad memory size `{shortened(text)}`",
                    help="write e.g. `2GiB`, `512MiB`, `1.5GB` or a number",
                )
            ]
        )
    size = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not math.isfinite(size):
        raise DiagnosticError(
            [Diagnostic("E007", f"memory size `{shortened(text)}` is too large", help="write e.g. `2GiB` or a number")]
        )
    return size


def parse_memory_limit(text: str, measured: bool, option: str = "--memory-limit", profile: str = "") -> float:
    """A memory limit from the command line, in the unit memory is counted in: bytes when a model is measured
    (`--model`) or a layer profile gives its layers' `activation_bytes` (`measured`: the text must carry its unit,
    `2GiB` or `4096B`), activations otherwise (a bare number). A limit in the other unit is refused (E088), not
    read as a number of this one: `2GiB` would be 2147483648 activations, a bare `2` under --model 2 bytes.
    `profile`: the layer profile that says which (its path), when no model is measured."""
    size = parse_size(text)
    unit = _SIZE.match(text).group(2)
    if profile:
        return _profile_limit(text, size, unit, measured, option, profile)
    if unit and not measured:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E088",
                    f"`{option} {shortened(text)}` is a size in bytes, but without --model memory is counted in "
                    "activations (a forward holds 1)",
                    help=f"measure bytes with `--model M --batch-size B`, or give the limit in activations "
                    f"(`{option} 4`)",
                )
            ]
        )
    if not unit and measured:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E088",
                    f"`{option} {shortened(text)}` has no unit, but with --model memory is measured in bytes",
                    help=f"write the unit: `{option} {shortened(text)}B`, or e.g. `2GiB`, `512MiB`",
                )
            ]
        )
    return size


def _profile_limit(text: str, size: float, unit: str, in_bytes: bool, option: str, profile: str) -> float:
    """`parse_memory_limit` under a layer profile, which counts bytes when it gives `activation_bytes`."""
    if unit and not in_bytes:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E088",
                    f"`{option} {shortened(text)}` is a size in bytes, but the layer profile `{shortened(profile)}` "
                    "gives no `activation_bytes`: memory is counted in layer activations (a layer holds 1, or its "
                    "`activation`)",
                    help=f"give every layer's `activation_bytes` in the profile (`ppdsl calibrate --layers` measures "
                    f"them), or the limit in layer activations (`{option} 40`)",
                )
            ]
        )
    if not unit and in_bytes:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E088",
                    f"`{option} {shortened(text)}` has no unit, but the layer profile `{shortened(profile)}` counts "
                    "its layers' activations in bytes",
                    help=f"write the unit: `{option} {shortened(text)}B`, or e.g. `3GiB`, `512MiB`",
                )
            ]
        )
    return size


def format_bytes(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


# Time. Abstract cost units are drawn as milliseconds; a cost file's times are seconds unless it says otherwise.
US_PER_COST_UNIT = 1000.0
US_PER = {"s": 1e6, "ms": 1e3, "us": 1.0}


def unit_name(us: float) -> str:
    """How a time axis in units of `us` microseconds is labelled."""
    if us == US_PER_COST_UNIT:
        return "ms"
    return {1e6: "s", 1.0: "µs"}.get(us, f"x {us:g} µs")
