"""The model contract (`ppdsl run --model module:function`): what a model function gets and gives.

    def build(ctx: ModelContext) -> paddle.pir.Value:
        # called under `program_guard` and the forward op role; returns the scalar mean loss of one micro-batch.
        # Inputs: `ctx.data(name, shape)` (shape without the micro-batch dimension, which is static:
        # `ctx.micro_batch_size`). Either an `nn.Layer` stack:
        #     with ctx.layers():                      # eager: build layers as in any Paddle program
        #         embedding, blocks, head = ...
        #     return ctx.pipeline(embedding, blocks, head, inputs=[x], head_inputs=[y], split="uniform")
        # or ops placed by hand: `with ctx.stage(s):` for s in 0 .. ctx.num_stages - 1 (stage s feeds s + 1),
        # parameters with explicit names.

    def make_batch(step: int, batch_size: int, seed: int) -> dict[str, numpy.ndarray]   # optional, same module
        # the full batch for a step, keyed by input name; leading dimension batch_size.

Without `make_batch`, inputs are synthetic: integers in [0, 16) or standard-normal floats, from the seed.
The built-in models (`builtin`, the default: a small GPT; `tiny_mlp`) and loading a model by name
(`load_model`) live in `builtin_models.py`, which builds on this contract.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sysconfig
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class ModelContext:
    """What a model function gets: sizes, and helpers that place ops and layers on pipeline stages."""

    paddle: object
    micro_batch_size: int
    num_stages: int
    seed: int = 0
    inputs: dict[str, tuple[list[int], str]] = field(default_factory=dict)
    # values of parameters that come from eagerly built layers, set after the startup program (see layers.py)
    initial: dict[str, np.ndarray] = field(default_factory=dict)
    # layers per stage (`ppdsl run --partition`, the plan's `partition`): `pipeline` places by it, over `split`
    partition: tuple[int, ...] | None = None
    pipelined: bool = False  # `pipeline` placed the model (a partition can place nothing else)
    layer_stages: tuple[int, ...] | None = None  # `pipeline`'s placement: the stage of each layer, head included
    _tracer: object = None
    _stage: int | None = None

    @contextlib.contextmanager
    def stage(self, index: int) -> Iterator[None]:
        """Ops built inside run on global pipeline stage `index` (Paddle's chunk id)."""
        if not 0 <= index < self.num_stages:
            raise ValueError(f"stage {index} outside 0 .. {self.num_stages - 1}")
        from paddle.base.framework import pir_chunk_id_guard

        outer, self._stage = self._stage, index
        try:
            with pir_chunk_id_guard(index):
                yield
        finally:
            self._stage = outer

    def layer_stage(self, layer: int, layers: int) -> int:
        """The stage of layer `layer` of `layers` when layers are spread evenly over the stages."""
        return layer * self.num_stages // layers

    def data(self, name: str, shape: list[int], dtype: str = "float32"):
        """An input of one micro-batch: `shape` without the batch dimension."""
        full = [self.micro_batch_size, *shape]
        self.inputs[name] = (full, dtype)
        return self.paddle.static.data(name, full, dtype)

    # ------------------------------------------------------------ nn.Layer models

    @contextlib.contextmanager
    def layers(self) -> Iterator[None]:
        """Build `paddle.nn` layers inside, eagerly (dygraph, seeded with the run's seed), as in any Paddle program;
        `pipeline` or `call` then trace them into this program."""
        from ppdsl.runtime.layers import eager

        with eager(self.paddle, self.seed):
            yield

    def call(self, layer, *args, name: str = "layer"):
        """`layer(*args)` traced into the program on the current stage (inside `with ctx.stage(s):`); its
        parameters are named `name.<path>` unless `name_from` gave them names."""
        if self._stage is None:
            raise ValueError("ctx.call needs a stage: call it inside `with ctx.stage(s):`")
        return self._layer_tracer().call(layer, self._stage, name, *args)

    def name_from(self, root, prefix: str = "") -> None:
        """Name the parameters of `root`'s sublayers by their paths in `root` (as in its state_dict)."""
        self._layer_tracer().name_tensors(root, prefix)

    def pipeline(
        self,
        embedding,
        blocks: Sequence,
        head,
        *,
        inputs: Sequence,
        head_inputs: Sequence = (),
        split: str | Sequence[int] = "uniform",
    ):
        """Place an `nn.Layer` stack on the stages, like Paddle's `PipelineLayer`: `embedding(*inputs)` on stage 0,
        each block (one tensor in, one out) on its stage, `head(h, *head_inputs)` (the loss) on the last stage.

        `split`: "uniform" spreads the blocks by count, "params" by parameter count (the embedding's and head's
        counted on their stages), or a list of the blocks where stages 1 .. S-1 start; a run's partition
        (`ctx.partition`, layers per stage with the embedding and the head counted) replaces it. Returns the head's
        output.
        A head holding the embedding's weight (tied) gets a copy of it on its stage (`shared`), kept in step by
        the schedule's `sync_shared` (ppdsl/runtime/shared.py).
        """
        from ppdsl.runtime.layers import block_stages, parameter_count, partition_stages

        blocks = list(blocks)
        self.pipelined = True
        if self.partition is not None:
            stages = partition_stages(self.partition, len(blocks))
        else:
            stages = block_stages(
                self.num_stages,
                parameter_count(embedding),
                [parameter_count(b) for b in blocks],
                parameter_count(head),
                split,
            )
        self.layer_stages = (0, *stages, self.num_stages - 1)
        with self.stage(0):
            h = self.call(embedding, *inputs, name="embedding")
        for i, (block, s) in enumerate(zip(blocks, stages, strict=True)):
            with self.stage(s):
                h = self.call(block, h, name=f"blocks.{i}")
        with self.stage(self.num_stages - 1):
            return self.call(head, h, *head_inputs, name="head")

    @property
    def shared(self) -> dict[str, list[str]]:
        """The trainable parameters used on several stages: name -> its copies' names, one per stage (layers.py)."""
        return dict(self._tracer.shared) if self._tracer is not None else {}

    def _layer_tracer(self):
        if self._tracer is None:
            from ppdsl.runtime.layers import LayerTracer

            self._tracer = LayerTracer(self.paddle, self.initial)
        return self._tracer


@dataclass(frozen=True)
class Model:
    name: str
    build: Callable[[ModelContext], object]
    make_batch: Callable[[int, int, int], dict[str, np.ndarray]] | None


def synthetic_batch(inputs: dict[str, tuple[list[int], str]], batch_size: int, step: int, seed: int):
    rng = np.random.default_rng([seed, step])
    out = {}
    for name, (shape, dtype) in inputs.items():
        full = [batch_size, *shape[1:]]
        if "int" in dtype:
            out[name] = rng.integers(0, 16, full).astype(dtype)
        else:
            out[name] = rng.standard_normal(full).astype(dtype)
    return out


RETURNS = "the loss of one micro-batch: a scalar float Value of the program (e.g. `paddle.mean(...)`)"


def build_loss(model: Model, ctx: ModelContext):
    """`model.build(ctx)`, with the contract checked: a function that cannot take the context (E046), one that
    raises (E047, naming the line of the model's own code) and one that returns anything but a scalar float loss
    (E048) are diagnostics naming the model function, not tracebacks from deep inside Paddle."""
    from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
    from ppdsl.common.text import source_lines

    where = f"model function `{model.name}`"
    try:
        signature = inspect.signature(model.build)
        signature.bind(ctx)
    except TypeError as err:
        defined = f"{getattr(model.build, '__name__', 'build')}{signature}"
        raise DiagnosticError(
            [
                Diagnostic(
                    "E046",
                    f"{where} is `{defined}`, which cannot take the model context as its one argument ({err})",
                    help="define it as `def build(ctx):` (ctx is a ppdsl.runtime.model.ModelContext) and return "
                    + RETURNS,
                )
            ]
        ) from None
    except ValueError:  # no signature to read (a builtin): calling it tells
        pass
    try:
        loss = model.build(ctx)
    except DiagnosticError:
        raise
    except Exception as err:
        first = source_lines(str(err).strip())[0]
        raise DiagnosticError(
            [
                Diagnostic(
                    "E047",
                    f"{where} raised {type(err).__name__}{f': {first}' if first else ''}{_user_frame(err)}",
                    help=_raise_help(err),
                )
            ]
        ) from None
    problem = _loss_problem(ctx.paddle, loss)
    if problem:
        raise DiagnosticError(
            [Diagnostic("E048", f"{where} returned {problem}; it must return {RETURNS}", help=_return_help(loss))]
        )
    return loss


def _user_frame(err: BaseException) -> str:
    """` (at file:line)`: the innermost frame of the traceback outside Paddle and ppdsl, the model's own code."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # The standard library's frames too: a ppdsl context manager that refuses on entry (`with ctx.stage(7):`)
    # has `contextlib`'s frame between it and the model's line.
    stdlib = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})
    own = [
        f for f in frames if not f.filename.startswith((here, *stdlib)) and f"{os.sep}paddle{os.sep}" not in f.filename
    ]
    if not own:
        return ""
    frame = own[-1]
    path = frame.filename
    with contextlib.suppress(ValueError):
        path = os.path.relpath(path)
    return f" (at {path}:{frame.lineno})"


def _raise_help(err: BaseException) -> str:
    text = str(err)
    if isinstance(err, TypeError) and "missing" in text and "positional argument" in text:
        return (
            "`ctx.pipeline` calls `embedding(*inputs)`, each block with one tensor and `head(h, *head_inputs)`: give "
            "the head its other inputs with `head_inputs=[...]` (a layer's forward must take what it is called with)"
        )
    return (
        "the error is in the model's code or in the shapes it gives Paddle (`ctx.data(name, shape)` takes the shape "
        "without the micro-batch dimension); run the model's function alone to see the whole traceback"
    )


def _loss_problem(paddle, loss) -> str:
    """What is wrong with a returned loss, or "" when it is a scalar float Value."""
    if loss is None:
        return "None"
    if not isinstance(loss, paddle.pir.Value):
        kind = type(loss).__name__
        return f"a {kind}" + (f" of {len(loss)}" if isinstance(loss, tuple | list) else "")
    shape = list(loss.shape)
    if any(d != 1 for d in shape):
        return f"a Value of shape {shape}"
    if not loss.is_floating_point():
        return f"a Value of dtype {str(loss.dtype).replace('paddle.', '')}"
    return ""


def _return_help(loss) -> str:
    if loss is None:
        return "did the function forget `return`? end it with `return loss` (or `return ctx.pipeline(...)`)"
    if isinstance(loss, tuple | list):
        return "return the loss alone; compute anything else inside the function"
    return "reduce the loss to a scalar, e.g. `return paddle.mean(loss)`; `ctx.pipeline` returns the head's output"
