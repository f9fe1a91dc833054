"""A model as layers, and a partition of them into pipeline stages: what each stage costs and holds.

A **layer profile** (`--layers FILE`) lists the model's layers in order, each with its forward, input-gradient
backward (`backward_b`) and weight-gradient backward (`backward_w`) time, and optionally its activation and
parameter memory. Two JSON forms are read:

- ppdsl's own: `{"unit": "ms", "layers": [{"name": "E", "forward": 3.5, "backward_b": 2.1, "backward_w": 0.0,
  "activation": 1, "params": 0}, ...]}` (`name`, `unit`, `activation`, `params` optional);
- the compact form of public layer-profile collections: `{"pattern": "ETTT...TL", "forward_ms": {"E": ...},
  "backward_ms": {...}, "weight_ms": {...}}`, one letter per layer, and optional per-letter `activation` /
  `params`.

Without memory fields a layer holds one unit of activation per micro-batch in flight, so a stage holds its layer
count: the checker's activations become layers. `activation` is in those units (a layer's share, relative to one);
`activation_bytes` (per layer, or per letter) is what one micro-batch in flight holds in bytes, as `ppdsl calibrate`
measures it. One meaning per number: a profile gives one of the two, for every layer when it gives bytes, and with
bytes the stages hold bytes (`LayerProfile.memory_unit`), so a memory limit is read in bytes (`--memory-limit 3GiB`).

A **partition** is the number of layers on each virtual stage, in stage order (`9,10,9,6`; with chunks, one entry
per virtual stage), or a Megatron-LM layout string (`"Et*3|(tt|)*29,m|L"`: `E` embedding, `t` transformer
block, `L` loss / head, `|` between stages, `(...)*n` and `x*n` repeats). `stage_work` turns a profile and a
partition into each stage's costs and activation, which `ppdsl.analysis.expand` applies over the schedule's own
tables. Without a profile every layer is alike: a stage's jobs cost its layer count times the schedule's costs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError, Span
from ppdsl.common.files import LAYERS_BYTES, read_text
from ppdsl.common.jsontext import JsonError, parse_json

MAX_VALUE = 1e15  # as a cost (`ppdsl.analysis.costs.MAX_COST`): sums over a model stay exact enough to compare
MAX_LAYERS = 1 << 16  # layers of a profile or a partition: far more than any model has stages to hold
OWN_FORM = '`{"layers": [{"name": "T", "forward": 1.7, "backward_b": 2.0, "backward_w": 1.1}]}`'
COMPACT_FORM = '`{"pattern": "ETTL", "forward_ms": {"E": 3.5, ...}, "backward_ms": {...}, "weight_ms": {...}}`'
LAYER_FIELDS = ("name", "forward", "backward_b", "backward_w", "activation", "activation_bytes", "params")
OWN_KEYS = ("layers", "unit")
COMPACT_KEYS = ("pattern", "forward_ms", "backward_ms", "weight_ms", "activation", "activation_bytes", "params", "unit")
# The per-letter tables of the compact form and the layer field each one fills.
COMPACT_TABLES = {"forward_ms": "forward", "backward_ms": "backward_b", "weight_ms": "backward_w"}
OPTIONAL_TABLES = ("activation", "activation_bytes", "params")

# Megatron-LM's layout letters (megatron.core.transformer.pipeline_parallel_layer_layout) and the profile kinds
# each stands for: a profile's `T` is Megatron's transformer block `t`.
MEGATRON_KINDS = {"E": "E", "t": "T", "L": "L"}
LAYOUT_HELP = 'write the layers of each stage as `9,10,9,6`, or a Megatron layout as `"Et*8|t*9|t*9|t*6L"`'


@dataclass(frozen=True)
class Layer:
    """One layer: its kind (a profile's letter, or its name), its three costs, and its memory (None: not given),
    `activation` in the profile's memory unit (`LayerProfile.memory_unit`: units, or bytes)."""

    kind: str
    forward: float
    backward_b: float
    backward_w: float
    activation: float | None = None
    params: float | None = None

    @property
    def held(self) -> float:
        """What one micro-batch in flight holds: its activation, or one unit."""
        return 1.0 if self.activation is None else self.activation


@dataclass(frozen=True)
class LayerProfile:
    """A model's layers in order, and where they were read from."""

    layers: tuple[Layer, ...]
    path: str = "<profile>"
    unit: str = "ms"
    memory_unit: str = "activations"  # or "bytes": its layers' `activation_bytes`

    @property
    def kinds(self) -> str:
        return "".join(layer.kind if len(layer.kind) == 1 else "?" for layer in self.layers)


@dataclass(frozen=True)
class Partition:
    """Layers per virtual stage in stage order; `allow_empty`: a stage without layers is meant. `kinds`: the layer
    kinds of each stage, when a Megatron layout named them. `span`: where a schedule file states it."""

    counts: tuple[int, ...]
    allow_empty: bool = False
    kinds: tuple[str, ...] | None = None
    span: Span | None = None

    @property
    def layers(self) -> int:
        return sum(self.counts)

    def text(self) -> str:
        return ",".join(map(str, self.counts))


@dataclass(frozen=True)
class StageWork:
    """What each virtual stage costs and holds under a partition: [stage] -> value. `profiled`: the costs are the
    profile's times (else every layer costs the schedule's own costs, and `forward` etc. are layer counts)."""

    partition: Partition
    forward: tuple[float, ...]
    backward_b: tuple[float, ...]
    backward_w: tuple[float, ...]
    activation: tuple[float, ...]
    profiled: bool
    unit: str = "ms"
    memory_unit: str = "activations"  # what `activation` counts: layer activations, or bytes (the profile's)

    @property
    def stages(self) -> int:
        return len(self.forward)

    def time(self, stage: int) -> float:
        """One micro-batch's work on the stage: forward, then the whole backward."""
        return self.forward[stage] + self.backward_b[stage] + self.backward_w[stage]

    @property
    def critical(self) -> int:
        """The first stage with the most work: the one that bounds a pipeline's steady state."""
        times = [self.time(s) for s in range(self.stages)]
        return times.index(max(times))


# ---------------------------------------------------------------- reading a profile


def _located(text: str, path: str, needle: str, start: int = 0) -> Span:
    """The span of the first `needle` in the file's text at or after `start` (the whole first line if absent)."""
    at = text.find(needle, start) if needle else -1
    if at < 0:
        return Span(path, 1, 1, 1, 2)
    line = text.count("\n", 0, at) + 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1
    return Span(path, line, col, line, col + max(1, len(needle)))


def _value_problem(value: object) -> str | None:
    """Why `value` is not a cost or an amount of memory; None if it is one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "is not a number"
    number = float(value)
    if math.isnan(number):
        return "is not a number (NaN)"
    if number < 0:
        return f"is negative ({number:g})"
    if number > MAX_VALUE:
        return "is over 1e15"
    return None


class _Reader:
    """Collects every problem of one profile, each located in its file, before anything is built."""

    def __init__(self, text: str, path: str):
        self.text, self.path = text, path
        self.problems: list[Diagnostic] = []

    def problem(self, code: str, message: str, needle: str = "", help: str = "", start: int = 0) -> None:
        self.problems.append(
            Diagnostic(
                code,
                f"layer profile `{self.path}`: {message}",
                _located(self.text, self.path, needle, start),
                help=help,
            )
        )

    def number(self, key: str, value: object, needle: str, required: bool = True, start: int = 0) -> float | None:
        if value is None and not required:
            return None
        problem = _value_problem(value)
        if problem is not None:
            self.problem("E101", f"`{key}` {problem}", needle, help="give a finite number from 0 to 1e15", start=start)
            return None
        return float(value)

    def unknown_keys(self, data: dict, known: Sequence[str], where: str, form: str) -> None:
        for key in data:
            if key not in known:
                names = ", ".join(f"`{k}`" for k in known)
                self.problem("E100", f"unknown key `{key[:40]}`{where}", f'"{key}"', help=f"{form} holds {names}")


def read_profile(path: str | Path) -> LayerProfile:
    """The layer profile in `path` (either form, see the module). Raises DiagnosticError: E000 / E051 / E052 for a
    file that cannot be read, E100 for one that is not a profile, E101 for a bad number, E102 for a pattern letter
    without costs (a file that cannot be read is E100 too; one that is not regular or too large E051 / E052); every
    problem at once, each at its place in the file."""
    text = read_text(path, LAYERS_BYTES, "E100", "layer profile ")
    return profile_from_text(text, str(path))


def profile_from_text(text: str, path: str = "<profile>") -> LayerProfile:
    """`read_profile` of a text already read."""
    reader = _Reader(text, path)
    try:
        data = parse_json(text)
    except JsonError as err:
        where = re.search(r"at line (\d+), column (\d+)", str(err))  # where the JSON reader stopped
        line, col = (int(where.group(1)), int(where.group(2))) if where else (1, 1)
        raise DiagnosticError(
            [
                Diagnostic(
                    "E100",
                    f"layer profile `{path}` is not JSON: {err}",
                    Span(path, line, col, line, col + 1),
                    help=f"a profile is {OWN_FORM} or {COMPACT_FORM}",
                )
            ]
        ) from None
    if isinstance(data, dict) and "pattern" in data:
        layers = _compact(reader, data)
    elif isinstance(data, dict) and "layers" in data:
        layers = _own(reader, data)
    else:
        reader.problem("E100", "holds neither `layers` nor `pattern`", help=f"write {OWN_FORM} or {COMPACT_FORM}")
        layers = []
    unit = data.get("unit", "ms") if isinstance(data, dict) else "ms"
    if not isinstance(unit, str) or unit not in ("s", "ms", "us"):
        reader.problem("E100", "`unit` is not `s`, `ms` or `us`", '"unit"', help="write the unit of the times")
    if not reader.problems and not layers:
        reader.problem("E100", "has no layers", help="list the model's layers in order")
    if not reader.problems and len(layers) > MAX_LAYERS:
        reader.problem("E100", f"has {len(layers)} layers, more than {MAX_LAYERS}", help="merge layers")
    memory_unit = _memory_unit(reader, layers) if not reader.problems else "activations"
    if reader.problems:
        raise DiagnosticError(reader.problems[:20])
    return LayerProfile(tuple(layers), path, unit, memory_unit)


def _both_units(reader: _Reader, what: str, start: int = 0) -> None:
    reader.problem(
        "E100",
        f"gives {what}: an amount of memory has one unit",
        '"activation"',
        help="give every layer's activation in bytes (`activation_bytes`), or every one in units (`activation`)",
        start=start,
    )


def _memory_unit(reader: _Reader, layers: list[tuple[Layer, bool]]) -> str:
    """The unit of the layers' memory: "bytes" when they give `activation_bytes`, which then every layer must, and
    none `activation` (a profile's numbers have one meaning); else "activations". `layers`: each layer and whether
    its activation was given in bytes; they are replaced by the layers alone."""
    in_bytes = [i for i, (_, b) in enumerate(layers) if b]
    in_units = [i for i, (layer, b) in enumerate(layers) if not b and layer.activation is not None]
    without = [i for i, (layer, _) in enumerate(layers) if layer.activation is None]
    layers[:] = [layer for layer, _ in layers]
    if not in_bytes:
        return "activations"
    if in_units:
        _both_units(reader, f"`activation_bytes` and also `activation` (layer {in_units[0]})")
    elif without:
        reader.problem(
            "E100",
            f"gives `activation_bytes`, but not for layer {without[0]} (`{layers[without[0]].kind[:40]}`)",
            '"activation_bytes"',
            help="with bytes every layer needs its `activation_bytes` (0 for a layer that keeps nothing)",
        )
    return "bytes"


def _own(reader: _Reader, data: dict) -> list[tuple[Layer, bool]]:
    reader.unknown_keys(data, OWN_KEYS, "", "a profile of layers")
    rows = data["layers"]
    if not isinstance(rows, list):
        reader.problem("E100", "`layers` is not a list", '"layers"', help=f"write {OWN_FORM}")
        return []
    layers, cursor = [], reader.text.find('"layers"')
    for i, row in enumerate(rows):
        # each layer is located from the last one on: the k-th `{` after `"layers"` is layer k's
        cursor = reader.text.find("{", cursor + 1) if cursor >= 0 else -1
        where = max(cursor, 0)
        if not isinstance(row, dict):
            reader.problem("E100", f"layer {i} is not an object", "", help=f"write {OWN_FORM}")
            continue
        for key in row:
            if key not in LAYER_FIELDS:
                names = ", ".join(f"`{k}`" for k in LAYER_FIELDS)
                reader.problem(
                    "E100",
                    f"layer {i} has an unknown key `{key[:40]}`",
                    f'"{key}"',
                    help=f"a layer has {names}",
                    start=where,
                )
        missing = [k for k in ("forward", "backward_b", "backward_w") if k not in row]
        if missing:
            keys = ", ".join(f"`{k}`" for k in missing)
            reader.problem("E100", f"layer {i} has no {keys}", "{", help=f"write {OWN_FORM}", start=where)
            continue
        name = row.get("name", "layer")
        if not isinstance(name, str) or not name:
            reader.problem("E100", f"layer {i}'s `name` is not a string", '"name"', start=where)
            continue
        values = {
            k: reader.number(
                f"layers[{i}].{k}", row.get(k), f'"{k}"', k in ("forward", "backward_b", "backward_w"), where
            )
            for k in LAYER_FIELDS[1:]
        }
        if any(values[k] is None for k in ("forward", "backward_b", "backward_w")):
            continue
        in_bytes = values.pop("activation_bytes") is not None
        if in_bytes and values["activation"] is not None:
            _both_units(reader, f"layer {i} both `activation` and `activation_bytes`", where)
            continue
        if in_bytes:
            values["activation"] = float(row["activation_bytes"])
        layers.append((Layer(name, **values), in_bytes))
    return layers


def _compact(reader: _Reader, data: dict) -> list[tuple[Layer, bool]]:
    reader.unknown_keys(data, COMPACT_KEYS, "", "a pattern profile")
    pattern = data["pattern"]
    if not isinstance(pattern, str) or not pattern:
        reader.problem("E100", "`pattern` is not a string of layer letters", '"pattern"', help='write `"ETTTL"`')
        return []
    tables = {}
    for key in (*COMPACT_TABLES, *OPTIONAL_TABLES):
        table = data.get(key)
        if table is None:
            if key in COMPACT_TABLES:
                reader.problem("E100", f"has no `{key}`", help=f"write {COMPACT_FORM}")
            continue
        if not isinstance(table, dict):
            reader.problem("E100", f"`{key}` is not an object of letters", f'"{key}"', help=f"write {COMPACT_FORM}")
            continue
        at = max(reader.text.find(f'"{key}"'), 0)  # the same letter is in every table: look from this one's key
        tables[key] = {
            letter: reader.number(f"{key}.{letter}", value, f'"{letter}"', start=at) for letter, value in table.items()
        }
        for letter in table:
            if len(letter) != 1:
                reader.problem("E100", f"`{key}` names `{letter[:40]}`, not one letter", f'"{letter}"', start=at)
    if reader.problems:
        return []
    pattern_at = reader.text.find('"', reader.text.find('"pattern"') + len('"pattern"')) + 1
    for position, letter in enumerate(pattern):
        absent = [key for key in COMPACT_TABLES if letter not in tables[key]]
        if absent:
            keys = ", ".join(f"`{k}`" for k in absent)
            span = _located(reader.text, reader.path, letter, pattern_at + position)
            reader.problems.append(
                Diagnostic(
                    "E102",
                    f"layer profile `{reader.path}`: layer {position} is `{letter}`, which {keys} give no time",
                    span,
                    label="this letter",
                    help=f"add `{letter}` to {keys}, or correct the pattern (letters with times: "
                    f"{''.join(sorted(tables['forward_ms']))})",
                )
            )
    if reader.problems:
        return []
    optional = {key: tables.get(key) or {} for key in OPTIONAL_TABLES}
    in_bytes = optional["activation_bytes"]
    if optional["activation"] and in_bytes:
        _both_units(reader, "both `activation` and `activation_bytes`")
        return []
    return [
        (
            Layer(
                letter,
                tables["forward_ms"][letter],
                tables["backward_ms"][letter],
                tables["weight_ms"][letter],
                optional["activation"].get(letter, in_bytes.get(letter)),
                optional["params"].get(letter),
            ),
            letter in in_bytes,
        )
        for letter in pattern
    ]


# ---------------------------------------------------------------- partitions


def _partition_error(message: str, text: str, span: Span | None = None, help: str = LAYOUT_HELP) -> DiagnosticError:
    return DiagnosticError([Diagnostic("E103", f"cannot read the partition `{text[:60]}`: {message}", span, help=help)])


_REPEAT_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_REPEAT_ONE = re.compile(r"(.)\*(\d+)")


def parse_partition(text: str, span: Span | None = None) -> Partition:
    """`9,10,9,6` (layers per virtual stage, in stage order) or a Megatron layout (`"Et*3|(tt|)*29,m|L"`; an
    `m`, Megatron's multi-token prediction layer, is not a layer ppdsl profiles and is refused). Raises
    DiagnosticError (E103)."""
    stripped = text.strip()
    if not stripped:
        raise _partition_error("it is empty", text, span)
    if re.fullmatch(r"[0-9,\s]+", stripped):
        parts = [p.strip() for p in stripped.split(",")]
        if any(not p for p in parts):
            raise _partition_error("an entry is empty", text, span)
        if len(parts) > MAX_LAYERS or any(len(p) > 9 for p in parts):
            raise _partition_error(f"more than {MAX_LAYERS} stages, or a count past 9 digits", text, span)
        return Partition(tuple(int(p) for p in parts), span=span)
    return _megatron_layout(stripped, span)


def _megatron_layout(text: str, span: Span | None) -> Partition:
    """A Megatron-LM layout read as Megatron reads it: commas are cosmetic, `(...)*n` then `x*n` unrolled, `|`
    between virtual stages (listed in layer order: stage v * pp + r is rank r's chunk v, a looped placement)."""
    flat = text.replace(",", "").replace(" ", "")
    for pattern in (_REPEAT_GROUP, _REPEAT_ONE):
        total = 0

        def unroll(match: re.Match) -> str:
            nonlocal total
            count = int(match.group(2)) if len(match.group(2)) <= 6 else MAX_LAYERS + 1
            total += len(match.group(1)) * count
            if total > MAX_LAYERS * 2:
                raise _partition_error(f"it unrolls to more than {MAX_LAYERS} layers", text, span)
            return match.group(1) * count

        flat = pattern.sub(unroll, flat)
    stages = flat.split("|")
    for stage in stages:
        for letter in stage:
            if letter == "m":
                raise _partition_error(
                    "`m` (Megatron's multi-token prediction layer) is not a layer of a profile",
                    text,
                    span,
                    help="leave the MTP layers out, or place them by hand in Megatron",
                )
            if letter not in MEGATRON_KINDS:
                raise _partition_error(f"`{letter}` is not a layout letter (`E`, `t`, `L`, `|`, `(...)*n`)", text, span)
    if sum(map(len, stages)) > MAX_LAYERS:
        raise _partition_error(f"more than {MAX_LAYERS} layers", text, span)
    kinds = tuple("".join(MEGATRON_KINDS[letter] for letter in stage) for stage in stages)
    return Partition(tuple(len(stage) for stage in stages), kinds=kinds, span=span)


def even_partition(layers: int, stages: int) -> Partition:
    """The layers dealt as evenly as they go, the first stages taking one more where they do not divide (as
    Megatron's and torchtitan's even splits)."""
    base, extra = divmod(layers, stages)
    return Partition(tuple(base + (1 if s < extra else 0) for s in range(stages)), allow_empty=layers < stages)


def min_max_partition(profile: LayerProfile, stages: int) -> Partition:
    """The contiguous split of the profile's layers into `stages` non-empty stages whose busiest stage does the
    least work (a layer's work: forward + backward_b + backward_w), by dynamic programming over (stages, prefix):
    best[k][i] = min over j < i of max(best[k - 1][j], work(j .. i)). Among splits with that bottleneck, the one
    whose stages hold their layers earliest (the first found) is kept. As torchtitan's auto-partition and torch's
    `_partition.py` for one and several stages a rank, it balances each virtual stage, not each rank. Raises
    ValueError for fewer layers than stages."""
    n = len(profile.layers)
    if not 1 <= stages <= n:
        raise ValueError(f"{n} layers cannot fill {stages} stages")
    prefix = [0.0]
    for layer in profile.layers:
        prefix.append(prefix[-1] + layer.forward + layer.backward_b + layer.backward_w)
    inf = math.inf
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n - (stages - k) + 1):  # k stages over the first i layers, each stage non-empty
            for j in range(k - 1, i):
                value = max(best[k - 1][j], prefix[i] - prefix[j])
                if value < best[k][i] - 1e-12:
                    best[k][i], cut[k][i] = value, j
    counts, i = [], n
    for k in range(stages, 0, -1):
        j = cut[k][i]
        counts.append(i - j)
        i = j
    return Partition(tuple(reversed(counts)))


def _fit_error(message: str, partition: Partition, help: str, label: str = "") -> DiagnosticError:
    return DiagnosticError(
        [
            Diagnostic(
                "E104", f"the partition `{partition.text()[:60]}` {message}", partition.span, label=label, help=help
            )
        ]
    )


def check_partition(partition: Partition, stages: int, profile: LayerProfile | None, placement: str) -> None:
    """The partition fits the pipeline and the profile: one entry per virtual stage (E104), as many layers as the
    profile (E104), the kinds a Megatron layout names where the profile has them (E104), and no stage without a
    layer unless the partition allows it (E105)."""
    counts = partition.counts
    if len(counts) != stages:
        raise _fit_error(
            f"has {len(counts)} {'entry' if len(counts) == 1 else 'entries'}, but the pipeline has {stages} "
            f"virtual stages ({placement})",
            partition,
            help="give one layer count per virtual stage, in stage order (pp x vpp entries)",
        )
    if profile is not None and partition.layers != len(profile.layers):
        raise _fit_error(
            f"places {partition.layers} layers, but the profile `{profile.path}` has {len(profile.layers)}",
            partition,
            help="count every layer, the embedding and the head included",
        )
    if profile is not None and partition.kinds is not None:
        wanted = "".join(partition.kinds)
        have = profile.kinds
        for i, (a, b) in enumerate(zip(wanted, have, strict=True)):
            if a != b:
                raise _fit_error(
                    f"puts a `{a}` layer at position {i}, where the profile `{profile.path}` has `{b}`",
                    partition,
                    help="a Megatron layout names every layer's kind: write them in the profile's order",
                )
    empty = [s for s, n in enumerate(counts) if n == 0]
    if empty and not partition.allow_empty:
        listed = ", ".join(map(str, empty[:8])) + (" ..." if len(empty) > 8 else "")
        raise DiagnosticError(
            [
                Diagnostic(
                    "E105",
                    f"virtual {'stage' if len(empty) == 1 else 'stages'} {listed} of the partition "
                    f"`{partition.text()[:60]}` {'holds' if len(empty) == 1 else 'hold'} no layer",
                    partition.span,
                    label="an empty stage" if partition.span else "",
                    help="move a layer onto it, or write `allow empty` after the partition if it is meant "
                    "(an empty stage still sends and receives every micro-batch)",
                )
            ]
        )


def stage_work(partition: Partition, stages: int, profile: LayerProfile | None, placement: str = "") -> StageWork:
    """Each stage's costs and activation under `partition` (checked first, `check_partition`): sums over its
    layers of the profile, or, without one, its layer count (every layer alike)."""
    check_partition(partition, stages, profile, placement or f"{stages} stages")
    forward, backward_b, backward_w, held = [], [], [], []
    start = 0
    for n in partition.counts:
        if profile is None:
            forward.append(float(n))
            backward_b.append(float(n))
            backward_w.append(float(n))
            held.append(float(n))
        else:
            layers = profile.layers[start : start + n]
            forward.append(math.fsum(layer.forward for layer in layers))
            backward_b.append(math.fsum(layer.backward_b for layer in layers))
            backward_w.append(math.fsum(layer.backward_w for layer in layers))
            held.append(math.fsum(layer.held for layer in layers))
        start += n
    return StageWork(
        partition,
        tuple(forward),
        tuple(backward_b),
        tuple(backward_w),
        tuple(held),
        profiled=profile is not None,
        unit=profile.unit if profile is not None else "",
        memory_unit=profile.memory_unit if profile is not None else "activations",
    )


# ---------------------------------------------------------------- Megatron layout strings


def megatron_layout(partition: Partition, profile: LayerProfile | None, looped: bool) -> str:
    """The partition as Megatron-LM's `--pipeline-model-parallel-layout`: each stage's layers as `E`, `t`, `L`,
    runs of one letter written `t*n`, stages joined by `|`. Without a profile the first layer is the embedding and
    the last the loss (Megatron's own rule). Raises DiagnosticError (E106) for a model with other kinds of layer,
    or a placement Megatron's layout cannot say (it puts stage v * pp + r on rank r: a looped placement)."""
    if not looped:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E106",
                    "a Megatron layout places virtual stages looped (stage v * pp + r on rank r); this "
                    "schedule's placement is another",
                    partition.span,
                    help="export the partition of a looped schedule (1F1B, interleaved 1F1B)",
                )
            ]
        )
    if profile is not None:
        kinds = profile.kinds
        others = sorted({k for k in kinds if k not in ("E", "T", "L")})
        if others or kinds[:1] != "E" or kinds[-1:] != "L" or kinds.count("E") != 1 or kinds.count("L") != 1:
            shown = ", ".join(f"`{k}`" for k in others) or "no embedding first and loss last"
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E106",
                        f"the profile `{profile.path}` has layers a Megatron layout cannot name: {shown}",
                        partition.span,
                        help="Megatron's layout names embedding (E), transformer (T) and loss (L) layers, the "
                        "embedding first and the loss last; print the partition as counts instead",
                    )
                ]
            )
    elif partition.layers < 2:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E106",
                    "a Megatron layout needs an embedding and a loss layer: the partition has "
                    f"{partition.layers} layer",
                    partition.span,
                    help="count the embedding and the head",
                )
            ]
        )
    total = partition.layers
    out, start = [], 0
    for n in partition.counts:
        letters = "".join("E" if i == 0 else "L" if i == total - 1 else "t" for i in range(start, start + n))
        out.append(_runs(letters))
        start += n
    return "|".join(out)


def _runs(letters: str) -> str:
    """`Ettt` -> `Et*3`: runs longer than two written with `*n`."""
    parts = []
    for match in re.finditer(r"(.)\1*", letters):
        run = match.group()
        parts.append(f"{run[0]}*{len(run)}" if len(run) > 2 else run)
    return "".join(parts)
