"""`nn.Layer` models in a ppdsl training program: built eagerly, traced into the program one stage at a time.

This is how `paddle.jit.to_static` turns a layer into a static program (`ConcreteProgram.pir_from_func_spec`): the
layer is built in dygraph, where its constructor runs as written (`register_buffer` gets a real tensor, which is
why PaddleFormers' models cannot be built under static graph building); then its parameters and buffers are swapped
for static Values (`param_guard`) and its forward runs under `to_static_mode_guard` with
`static_op_arg_cast_guard`, so that every tensor it touches becomes a Value. ppdsl does the same inside its own
training program, each layer under the chunk-id guard of its pipeline stage, with three differences:

* a parameter gets its structured name (`blocks.3.attn.qkv.weight`, or the name a root layer gives it), not the
  process-wide counter name (`linear_12.w_0`) that would differ between two builds in one process;
* its eager value becomes the program's initial value (`TrainingProgram.initial`, set after the startup program),
  where Paddle's converter would initialise it to zero and feed the eager tensor at every run;
* a trainable parameter used on two stages (a tied embedding and LM head) becomes one parameter per stage using
  it, `<name>` on the first and `<name>.stage<s>` on each other, all with the same initial value (`shared`): each
  stage computes its own part of the gradient, and the schedule's `sync_shared` job sums the parts among the
  copies' ranks before the optimizer (ppdsl/runtime/shared.py), so every copy takes the one update the tied
  parameter takes on one stage, as Megatron keeps its embedding copies in step.

`place_stack` is the pipeline helper of the model contract (`ctx.pipeline`): an embedding, a list of blocks and a
head, the blocks spread over the stages like Paddle's `PipelineLayer(seg_method=...)` spreads layers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.common.text import count


def pipeline_error(message: str, help: str = "") -> DiagnosticError:
    return DiagnosticError([Diagnostic("E039", message, help=help)])


@contextlib.contextmanager
def eager(paddle, seed: int) -> Iterator[None]:
    """Dygraph mode on the CPU with a seeded generator: build layers here as in any Paddle program."""
    from paddle.base.dygraph import guard

    with guard(paddle.CPUPlace()):
        paddle.seed(seed)
        yield


def _dtype_name(dtype) -> str:
    return str(dtype).replace("paddle.", "")


def _size(tensor) -> int:
    return int(np.prod(tensor.shape, dtype=np.int64))


def layer_tensors(layer) -> list[tuple[str, Any, bool]]:
    """(path, tensor, is_parameter) of every parameter and buffer of `layer` and its sublayers, each once. Walks the
    layers' own dicts: `Layer.named_parameters` puts eager tensors in a Value set outside dygraph and fails."""
    seen: set[int] = set()
    out = []
    for path, sub in layer.named_sublayers(include_self=True):
        for store, is_param in ((sub._parameters, True), (sub._buffers, False)):
            for key, tensor in store.items():
                if tensor is not None and id(tensor) not in seen:
                    seen.add(id(tensor))
                    out.append((f"{path}.{key}" if path else key, tensor, is_param))
    return out


class LayerTracer:
    """Turns eager layers' parameters and buffers into parameters of the program being built, each once, named.

    `initial` collects their eager values by name; the trainer sets them after the startup program.
    """

    def __init__(self, paddle, initial: dict[str, np.ndarray]):
        self.paddle = paddle
        self.initial = initial
        self._values: dict[int, tuple[Any, int, str]] = {}  # id(tensor) -> (Value, stage, name)
        self._copies: dict[tuple[int, int], Any] = {}  # (id(tensor), stage) -> its copy's Value on that stage
        # a trainable parameter used on several stages: its name -> the names of its copies (its own first)
        self.shared: dict[str, list[str]] = {}
        self._tensors: list[Any] = []  # keeps converted tensors alive, so that their ids stay theirs
        self._names: dict[int, str] = {}

    def name_tensors(self, layer, prefix: str = "") -> None:
        """Name every parameter and buffer of `layer` by its structured path (`prefix.path`), unless named already."""
        for path, tensor, _ in layer_tensors(layer):
            self._names.setdefault(id(tensor), f"{prefix}.{path}" if prefix else path)

    def _value(self, tensor, stage: int, fallback: str):
        known = self._values.get(id(tensor))
        trainable = not tensor.stop_gradient
        if known is not None:
            value, home, name = known
            if trainable and home != stage:
                return self._copy(tensor, stage, name)
            return value
        name = self._names.get(id(tensor), fallback)
        if name in self.initial:
            raise pipeline_error(f"two tensors are both named `{name}`", help="give the layers distinct names")
        value = self.paddle.static.create_parameter(
            list(tensor.shape),
            _dtype_name(tensor.dtype),
            name=name,
            default_initializer=self.paddle.nn.initializer.Constant(0.0),
        )
        value.stop_gradient = not trainable
        self.initial[name] = tensor.numpy()
        self._values[id(tensor)] = (value, stage, name)
        self._tensors.append(tensor)
        return value

    def _copy(self, tensor, stage: int, name: str):
        """The copy on `stage` of the shared parameter `name` (made on first use there): its own parameter, with
        the same initial value, built on that stage (the caller's chunk-id guard)."""
        known = self._copies.get((id(tensor), stage))
        if known is not None:
            return known
        copy = f"{name}.stage{stage}"
        if copy in self.initial:
            raise pipeline_error(f"two tensors are both named `{copy}`", help="give the layers distinct names")
        value = self.paddle.static.create_parameter(
            list(tensor.shape),
            _dtype_name(tensor.dtype),
            name=copy,
            default_initializer=self.paddle.nn.initializer.Constant(0.0),
        )
        value.stop_gradient = False
        self.initial[copy] = tensor.numpy()
        self._copies[(id(tensor), stage)] = value
        self.shared.setdefault(name, [name]).append(copy)
        return value

    @contextlib.contextmanager
    def traced(self, layer, stage: int, fallback_prefix: str) -> Iterator[None]:
        """Inside, `layer` and its sublayers hold Values of this program instead of eager tensors (param_guard)."""
        import paddle

        swapped = []
        try:
            for path, sub in layer.named_sublayers(include_self=True):
                for store in (sub._parameters, sub._buffers):
                    for key, tensor in list(store.items()):
                        if isinstance(tensor, paddle.Tensor) and tensor.is_dense():
                            full = ".".join(p for p in (fallback_prefix, path, key) if p)
                            store[key] = self._value(tensor, stage, full)
                            swapped.append((store, key, tensor))
            yield
        finally:
            for store, key, tensor in swapped:
                store[key] = tensor

    def call(self, layer: Callable, stage: int, prefix: str, *args):
        """`layer(*args)` traced into the current program, on the caller's stage guard."""
        import paddle
        from paddle.base.dygraph.base import to_static_mode_guard
        from paddle.pir.core import static_op_arg_cast_guard

        if isinstance(layer, paddle.nn.Layer):
            self._check_eager(layer, prefix)
            context = self.traced(layer, stage, prefix)
        else:
            context = contextlib.nullcontext()
        counter = {"n": 0}

        def cast(arg):
            # a tensor the forward reaches that is neither a parameter nor a buffer (a plain attribute, a closure):
            # a constant of the program, with its eager value
            if isinstance(arg, paddle.Tensor):
                counter["n"] += 1
                return self._value(arg, stage, f"{prefix}.constant{counter['n']}")
            return arg

        with context, to_static_mode_guard(is_to_static=True), static_op_arg_cast_guard(cast):
            return layer(*args)

    def _check_eager(self, layer, prefix: str) -> None:
        import paddle

        for path, tensor, is_param in layer_tensors(layer):
            if is_param and not isinstance(tensor, paddle.Tensor):
                raise pipeline_error(
                    f"`{prefix}` was built in static mode (its parameter `{path}` is a static Value)",
                    help="build the layers eagerly, inside `with ctx.layers():`",
                )


def parameter_count(layer) -> int:
    """Trainable parameters of a layer (0 for a plain function)."""
    if not hasattr(layer, "named_sublayers"):
        return 0
    return sum(_size(t) for _, t, is_param in layer_tensors(layer) if is_param and not t.stop_gradient)


def block_stages(num_stages: int, embedding_size: int, block_sizes: Sequence[int], head_size: int, split) -> list[int]:
    """The stage of every block. The embedding is on stage 0, the head on the last stage; every stage holds
    something. `split`: "uniform" (blocks by count), "params" (blocks by parameter count, the embedding and head
    counted on their stages, minimising the largest stage) or the blocks where stages 1 .. S-1 start."""
    n, s = len(block_sizes), num_stages
    if isinstance(split, str):
        if split == "uniform":
            stages = _uniform_stages(n, s)
        elif split == "params":
            stages = _balanced(s, embedding_size, list(block_sizes), head_size)
        else:
            raise pipeline_error(
                f"unknown split `{split}`",
                help='use "uniform", "params" or a list of the blocks where stages start',
            )
    else:
        cuts = list(split)
        if len(cuts) != s - 1 or any(not isinstance(c, int) for c in cuts):
            raise pipeline_error(
                f"a split by cut points needs {s - 1} block indices for {s} stages, got {cuts}",
                help="give the index of the first block of each stage after the first",
            )
        if any(not 0 <= c <= n for c in cuts) or cuts != sorted(cuts):
            raise pipeline_error(f"cut points {cuts} are not ascending block indices in 0 .. {n}")
        bounds = [0, *cuts, n]
        stages = [k for k in range(s) for _ in range(bounds[k], bounds[k + 1])]
    held = {0, s - 1, *stages}
    empty = [k for k in range(s) if k not in held]
    if empty:
        raise pipeline_error(
            f"stage {empty[0]} of {s} holds no layer ({count(n, 'block')}, split {split!r})",
            help=_empty_stage_help(s, split),
        )
    return stages


def partition_stages(partition: Sequence[int], num_blocks: int) -> list[int]:
    """The stage of every block under a partition (layers per stage in stage order, the embedding the first layer
    and the head the last, as `ppdsl.analysis.layers` counts them). E104: a partition of another number of layers,
    or one that leaves the embedding's first stage or the head's last stage empty."""
    counts, layers = list(partition), num_blocks + 2
    text = ",".join(map(str, counts))
    if sum(counts) != layers:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E104",
                    f"the partition `{text[:60]}` places {sum(counts)} layers, but the model has {layers}: the "
                    f"embedding, {count(num_blocks, 'block')} and the head",
                    help=f"give counts that add up to {layers} (every layer, the embedding and the head included)",
                )
            ]
        )
    for stage, what in ((0, "the embedding"), (len(counts) - 1, "the head")):
        if counts[stage] == 0:
            raise DiagnosticError(
                [
                    Diagnostic(
                        "E104",
                        f"the partition `{text[:60]}` leaves stage {stage} empty, where the runtime places {what}",
                        help="give the first and the last stage at least one layer each",
                    )
                ]
            )
    # layer i + 1 is block i: the stage whose range of layers holds it
    bounds = [sum(counts[: k + 1]) for k in range(len(counts))]
    return [next(k for k, end in enumerate(bounds) if i + 1 < end) for i in range(num_blocks)]


def _uniform_stages(num_blocks: int, num_stages: int) -> list[int]:
    """The `uniform` split: block i on stage i * S // N, as many blocks on each stage as can be."""
    return [i * num_stages // num_blocks for i in range(num_blocks)]


def _empty_stage_help(num_stages: int, split) -> str:
    """Advice that works when followed: the fewest blocks for which the `uniform` rule itself leaves no stage
    empty (found by that rule, not by a formula beside it), and the fewest any split could place."""
    s = num_stages
    cut_points = f"cut points giving each of stages 1 .. {s - 2} a block ({max(s - 2, 1)} blocks)"
    if split == "uniform":
        fewest = next(n for n in range(1, 2 * s + 1) if {0, s - 1, *_uniform_stages(n, s)} == set(range(s)))
        return (
            f"give every stage a block: at least {fewest} blocks with the uniform split, {cut_points}, or fewer stages"
        )
    return f"give every stage a block: {cut_points}, or fewer stages"


def _balanced(s: int, first: int, sizes: list[int], last: int) -> list[int]:
    """Contiguous blocks per stage minimising the largest stage's parameters (the embedding counted on stage 0,
    the head on the last), by dynamic programming over (stages used, blocks placed); ties keep stages non-empty."""
    n = len(sizes)
    prefix = [0]
    for size in sizes:
        prefix.append(prefix[-1] + size)
    inf = float("inf")
    # best[k][j]: the smallest possible largest stage when stages 0..k-1 hold blocks 0..j-1
    best = [[inf] * (n + 1) for _ in range(s + 1)]
    cut = [[0] * (n + 1) for _ in range(s + 1)]
    best[0][0] = 0
    for k in range(1, s + 1):
        for j in range(n + 1):
            for i in range(j + 1):
                if best[k - 1][i] == inf:
                    continue
                load = prefix[j] - prefix[i] + (first if k == 1 else 0) + (last if k == s else 0)
                empty = j == i and k not in (1, s)
                cost = max(best[k - 1][i], load) + (inf if empty else 0)
                if cost < best[k][j]:
                    best[k][j], cut[k][j] = cost, i
    stages = [0] * n
    j = n
    for k in range(s, 0, -1):
        i = cut[k][j]
        for b in range(i, j):
            stages[b] = k - 1
        j = i
    return stages
