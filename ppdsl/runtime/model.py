"""Models: the built-in example language model, and loading a user's `module:function`.

The model contract (`ppdsl run --model module:function`):

    def build(ctx: ModelContext) -> paddle.pir.Value:
        # called under `program_guard` and the forward op role; create inputs with `ctx.data(...)`
        # (static micro-batch dimension: `ctx.micro_batch_size`), wrap each layer in `with ctx.stage(s):`
        # for s in 0 .. ctx.num_stages - 1 (in order: stage s feeds stage s + 1), give parameters
        # explicit names, and return the scalar mean loss of the micro-batch.

    def make_batch(step: int, batch_size: int, seed: int) -> dict[str, numpy.ndarray]   # optional, same module
        # the full batch for a step, keyed by input name; leading dimension batch_size.

Without `make_batch`, inputs are synthetic: integers in [0, 16) or standard-normal floats, from the seed.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError


@dataclass
class ModelContext:
    """What a model function gets: sizes, and helpers that place ops on pipeline stages."""

    paddle: object
    micro_batch_size: int
    num_stages: int
    inputs: dict[str, tuple[list[int], str]] = field(default_factory=dict)

    @contextlib.contextmanager
    def stage(self, index: int) -> Iterator[None]:
        """Ops built inside run on global pipeline stage `index` (Paddle's chunk id)."""
        if not 0 <= index < self.num_stages:
            raise ValueError(f"stage {index} outside 0 .. {self.num_stages - 1}")
        from paddle.base.framework import pir_chunk_id_guard

        with pir_chunk_id_guard(index):
            yield

    def layer_stage(self, layer: int, layers: int) -> int:
        """The stage of layer `layer` of `layers` when layers are spread evenly over the stages."""
        return layer * self.num_stages // layers

    def data(self, name: str, shape: list[int], dtype: str = "float32"):
        """An input of one micro-batch: `shape` without the batch dimension."""
        full = [self.micro_batch_size, *shape]
        self.inputs[name] = (full, dtype)
        return self.paddle.static.data(name, full, dtype)


@dataclass(frozen=True)
class Model:
    name: str
    build: Callable[[ModelContext], object]
    make_batch: Callable[[int, int, int], dict[str, np.ndarray]] | None


# ---------------------------------------------------------------- the built-in example


@dataclass(frozen=True)
class TinyLMConfig:
    vocab: int = 64
    seq_len: int = 16
    hidden: int = 32
    layers: int = 8


CONFIG = TinyLMConfig()


def tiny_lm(ctx: ModelContext, config: TinyLMConfig = CONFIG):
    """A small MLP language model: embedding, `layers` residual MLP blocks, a vocabulary head.

    Activations are [micro-batch, sequence, hidden] with a static micro-batch dimension, which Paddle's
    backward_b / backward_w split needs. Stage 0 holds the embedding, the last stage the head and the loss.
    """
    paddle = ctx.paddle
    create = paddle.static.create_parameter
    init = paddle.nn.initializer.Normal(std=0.1)
    layers = max(config.layers, ctx.num_stages)
    with ctx.stage(0):
        tokens = ctx.data("tokens", [config.seq_len], "int64")
        table = create([config.vocab, config.hidden], "float32", name="embedding", default_initializer=init)
        h = paddle.nn.functional.embedding(tokens, table)
    for i in range(layers):
        with ctx.stage(ctx.layer_stage(i, layers)):
            w1 = create([config.hidden, 2 * config.hidden], "float32", name=f"block{i}.w1", default_initializer=init)
            b1 = create([2 * config.hidden], "float32", name=f"block{i}.b1", is_bias=True)
            w2 = create([2 * config.hidden, config.hidden], "float32", name=f"block{i}.w2", default_initializer=init)
            b2 = create([config.hidden], "float32", name=f"block{i}.b2", is_bias=True)
            h = h + paddle.matmul(paddle.nn.functional.gelu(paddle.matmul(h, w1) + b1), w2) + b2
    with ctx.stage(ctx.num_stages - 1):
        labels = ctx.data("labels", [config.seq_len], "int64")
        head = create([config.hidden, config.vocab], "float32", name="head", default_initializer=init)
        logits = paddle.matmul(h, head)
        loss = paddle.nn.functional.cross_entropy(logits, paddle.unsqueeze(labels, -1)).mean()
    return loss


def tiny_lm_batch(step: int, batch_size: int, seed: int, config: TinyLMConfig = CONFIG) -> dict[str, np.ndarray]:
    """Synthetic text with structure to learn: each token is 3 * previous + 1 (mod vocab), 10% noise."""
    rng = np.random.default_rng([seed, step])
    seq = np.empty((batch_size, config.seq_len + 1), dtype=np.int64)
    seq[:, 0] = rng.integers(0, config.vocab, batch_size)
    for t in range(1, config.seq_len + 1):
        seq[:, t] = (3 * seq[:, t - 1] + 1) % config.vocab
    noise = rng.random(seq.shape) < 0.1
    seq[noise] = rng.integers(0, config.vocab, int(noise.sum()))
    return {"tokens": seq[:, :-1], "labels": seq[:, 1:]}


BUILTIN = Model("tiny_lm", tiny_lm, tiny_lm_batch)


def load_model(spec: str | None) -> Model:
    """The built-in model for None, else `module:function` (with the module's optional `make_batch`)."""
    if spec is None:
        return BUILTIN
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise DiagnosticError(
            [Diagnostic("E031", f"bad model `{spec}`", help="write `--model package.module:function`")]
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E031",
                    f"cannot import model module `{module_name}`: {err}",
                    help="the module must be importable from the current directory or PYTHONPATH",
                )
            ]
        ) from None
    build = getattr(module, func_name, None)
    if not callable(build):
        raise DiagnosticError(
            [Diagnostic("E031", f"`{module_name}` has no function `{func_name}`", help="check the model path")]
        )
    return Model(spec, build, getattr(module, "make_batch", None))


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
