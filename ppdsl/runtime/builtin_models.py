"""The built-in models: a small GPT (the default, `--model builtin`) and the MLP it replaced (`--model tiny_mlp`);
and `load_model`, which finds a model by `--model`'s name: a built-in one, or a `module:function` of the user's.

Both read synthetic text with structure to learn (`synthetic_text`). Activations are [micro-batch, sequence,
hidden] with a static micro-batch dimension and every weight gradient is a non-transposed matmul on them, which
Paddle's backward_b / backward_w split needs; so every library schedule, zero-bubble ones included, runs on both.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ppdsl.common.diagnostics import Diagnostic, DiagnosticError
from ppdsl.runtime.env import import_paddle
from ppdsl.runtime.model import Model, ModelContext


def synthetic_text(step: int, batch_size: int, seed: int, vocab: int, seq_len: int) -> dict[str, np.ndarray]:
    """Each token is 3 * previous + 1 (mod vocab), 10% noise; labels are the tokens shifted by one."""
    rng = np.random.default_rng([seed, step])
    seq = np.empty((batch_size, seq_len + 1), dtype=np.int64)
    seq[:, 0] = rng.integers(0, vocab, batch_size)
    for t in range(1, seq_len + 1):
        seq[:, t] = (3 * seq[:, t - 1] + 1) % vocab
    noise = rng.random(seq.shape) < 0.1
    seq[noise] = rng.integers(0, vocab, int(noise.sum()))
    return {"tokens": seq[:, :-1], "labels": seq[:, 1:]}


# ---------------------------------------------------------------- GPT


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 64
    seq_len: int = 16
    hidden: int = 32
    heads: int = 4
    layers: int = 4  # at least one per stage: more stages than layers get one each
    ffn: int = 4  # MLP width / hidden


def gpt_layers(config: GPTConfig, blocks: int, tied: bool = False):
    """The embedding, `blocks` transformer blocks and the head, as `paddle.nn` layers (build them eagerly).
    `tied`: the head projects onto the vocabulary with the token embedding's weight (transposed), as GPT-2 does,
    instead of a weight of its own."""
    import paddle
    from paddle import nn

    init = paddle.ParamAttr(initializer=nn.initializer.Normal(std=0.02))

    class Embedding(nn.Layer):
        """Token and learned position embeddings."""

        def __init__(self):
            super().__init__()
            self.token = nn.Embedding(config.vocab, config.hidden, weight_attr=init)
            self.position = nn.Embedding(config.seq_len, config.hidden, weight_attr=init)

        def forward(self, tokens):
            positions = paddle.arange(tokens.shape[1], dtype="int64")
            return self.token(tokens) + self.position(positions)

    class Block(nn.Layer):
        """Pre-LayerNorm causal self-attention and GELU MLP, each with a residual connection."""

        def __init__(self):
            super().__init__()
            h = config.hidden
            self.ln1 = nn.LayerNorm(h)
            self.qkv = nn.Linear(h, 3 * h, weight_attr=init)
            self.proj = nn.Linear(h, h, weight_attr=init)
            self.ln2 = nn.LayerNorm(h)
            self.fc1 = nn.Linear(h, config.ffn * h, weight_attr=init)
            self.fc2 = nn.Linear(config.ffn * h, h, weight_attr=init)

        def forward(self, x):
            mb, seq, hidden = x.shape
            heads = config.heads
            # [mb, seq, 3 * heads, head_dim] -> [mb, 3 * heads, seq, head_dim]; q, k, v: [mb, heads, seq, head_dim]
            qkv = self.qkv(self.ln1(x)).reshape([mb, seq, 3 * heads, hidden // heads]).transpose([0, 2, 1, 3])
            q, k, v = paddle.split(qkv, 3, axis=1)
            scores = paddle.matmul(q, k, transpose_y=True) * (hidden // heads) ** -0.5
            causal = paddle.triu(paddle.full([seq, seq], -1e9, dtype=x.dtype), diagonal=1)
            attn = paddle.matmul(nn.functional.softmax(scores + causal, axis=-1), v)
            x = x + self.proj(attn.transpose([0, 2, 1, 3]).reshape([mb, seq, hidden]))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))

    class Head(nn.Layer):
        """Final LayerNorm, the vocabulary projection and the mean next-token cross entropy."""

        def __init__(self, embedding=None):
            super().__init__()
            self.ln = nn.LayerNorm(config.hidden)
            if embedding is None:
                self.out = nn.Linear(config.hidden, config.vocab, weight_attr=init, bias_attr=False)
            else:  # the one parameter of the embedding's token table, registered here too
                self.tied = embedding.token.weight

        def forward(self, x, labels):
            h = self.ln(x)
            logits = self.out(h) if hasattr(self, "out") else paddle.matmul(h, self.tied, transpose_y=True)
            return nn.functional.cross_entropy(logits, labels.unsqueeze(-1)).mean()

    embedding = Embedding()
    return embedding, [Block() for _ in range(blocks)], Head(embedding if tied else None)


def gpt(ctx: ModelContext, config: GPTConfig = GPTConfig(), tied: bool = False):
    """A small GPT: `config.layers` blocks (at least one per stage) spread evenly, embedding first, head last;
    `tied`, the head's projection is the token embedding (a parameter of the first and the last stage)."""
    with ctx.layers():
        embedding, blocks, head = gpt_layers(config, max(config.layers, ctx.num_stages), tied)
    tokens = ctx.data("tokens", [config.seq_len], "int64")
    labels = ctx.data("labels", [config.seq_len], "int64")
    return ctx.pipeline(embedding, blocks, head, inputs=[tokens], head_inputs=[labels], split="uniform")


def gpt_model(config: GPTConfig = GPTConfig(), name: str = "gpt", tied: bool = False) -> Model:
    return Model(
        name,
        functools.partial(gpt, config=config, tied=tied),
        functools.partial(synthetic_text, vocab=config.vocab, seq_len=config.seq_len),
    )


GPT = gpt_model()
GPT_TIED = gpt_model(name="gpt_tied", tied=True)  # embedding and LM head share one weight


# ---------------------------------------------------------------- the MLP


@dataclass(frozen=True)
class MLPConfig:
    vocab: int = 64
    seq_len: int = 16
    hidden: int = 32
    layers: int = 8


def tiny_mlp(ctx: ModelContext, config: MLPConfig = MLPConfig()):
    """A small MLP language model: embedding, `layers` residual MLP blocks, a vocabulary head; ops placed by hand
    (`ctx.stage`), parameters created in the program. Stage 0 holds the embedding, the last stage the head."""
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


def tiny_mlp_model(config: MLPConfig = MLPConfig(), name: str = "tiny_mlp") -> Model:
    return Model(
        name,
        functools.partial(tiny_mlp, config=config),
        functools.partial(synthetic_text, vocab=config.vocab, seq_len=config.seq_len),
    )


TINY_MLP = tiny_mlp_model()

BUILTIN = GPT  # `--model builtin`, the default


# ---------------------------------------------------------------- a model by name


def builtin_models() -> dict[str, Model]:
    """The models `--model` names without a module: `builtin` (the default), `gpt_tied` and `tiny_mlp`."""
    return {"builtin": BUILTIN, "gpt": GPT, "gpt_tied": GPT_TIED, "tiny_mlp": TINY_MLP}


def load_model(spec: str | None, model_dir: str | Path | None = None) -> Model:
    """The built-in model for None, a built-in name, else `module:function` (with the module's `make_batch`).

    The module is looked for on sys.path, then in `model_dir` (default: the current directory, where the
    command was typed; a rank gets the launching directory from its spec)."""
    builtin = builtin_models()
    if spec is None or spec in builtin:
        return builtin[spec or "builtin"]
    module_name, _ = split_model_name(spec)
    try:
        module = _import_model_module(module_name, Path(model_dir) if model_dir is not None else Path.cwd())
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
    return model_from_module(spec, module)


def split_model_name(spec: str) -> tuple[str, str]:
    """`module:function` as (module, function); E031 for anything else."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise DiagnosticError(
            [
                Diagnostic(
                    "E031",
                    f"bad model `{spec}`",
                    help=f"write `--model package.module:function`, or one of {', '.join(sorted(builtin_models()))}",
                )
            ]
        )
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        # a file's path where Python wants a module's name: `mymod.py:build` would be "No module named 'mymod.py'"
        stem = Path(module_name).with_suffix("").name if module_name.endswith(".py") else Path(module_name).name
        folder = str(Path(module_name).parent)
        where = "" if folder == "." else f", from the folder `{folder}` (or with it on PYTHONPATH)"
        raise DiagnosticError(
            [
                Diagnostic(
                    "E031",
                    f"`--model {spec}` names a file; --model takes a module's name, as Python imports it",
                    help=f"write `--model {stem}:{func_name}`{where}",
                )
            ]
        )
    return module_name, func_name


def model_from_module(spec: str, module) -> Model:
    """The model `module:function` names, of the module imported (`make_batch` too, if it has one)."""
    module_name, func_name = split_model_name(spec)
    build = getattr(module, func_name, None)
    if not callable(build):
        raise DiagnosticError(
            [Diagnostic("E031", f"`{module_name}` has no function `{func_name}`", help="check the model path")]
        )
    return Model(spec, build, getattr(module, "make_batch", None))


def _import_model_module(module_name: str, model_dir: Path):
    """Import `module_name` with `model_dir` at the END of sys.path while it imports: the user's own module is
    found in the folder the command was typed in (a console script's sys.path has its bin folder, not the
    cwd), yet a `json.py` there never shadows the standard library or an installed package, and the folder is
    off the path again for every later import."""
    with model_dir_last(model_dir):
        return importlib.import_module(module_name)


@contextlib.contextmanager
def model_dir_last(model_dir: str | Path) -> Iterator[None]:
    """`model_dir` at the end of sys.path inside (see `_import_model_module`); a rank runs its bound `--model`
    module's code in here too, so that the modules it imports are found as they were in the launcher."""
    # the module most likely imports paddle at its top: import it first, through the one door that silences
    # what a user cannot act on (glog's INFO and WARNING lines, `No ccache found`), as the built-in models' runs do
    import_paddle()
    folder = os.fspath(model_dir)
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
