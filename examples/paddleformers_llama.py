"""PaddleFormers' `LlamaForCausalLM`, pipelined by ppdsl: the recipe for bringing an existing `nn.Layer` model.

    pip install -e '.[llama]'          # PaddleFormers
    ppdsl run zbv --pp 2 --vpp 2 -m 4 --batch-size 8 --model examples.paddleformers_llama:build

1. Build the model as you always do, eagerly: inside `with ctx.layers():` (dygraph, seeded with `--seed`).
   PaddleFormers' constructors cannot run under static graph building (`register_buffer` would receive a static
   Value); ppdsl traces the built layers into its program afterwards, as `paddle.jit.to_static` does.
2. Cut it into an embedding, a list of blocks and a head. A block takes one tensor and returns one; where the model
   hands a layer more than that (Llama's decoder layers also take the rotary position embeddings and the causal
   mask), a small adapter computes it from the hidden states, exactly as the model's own forward does.
3. `ctx.name_from(model)`: the parameters keep the model's names (its `state_dict` keys), then `ctx.pipeline`.

The model is tiny (hidden 32, 4 layers) so that it trains here on a CPU; the configuration is PaddleFormers' own.
"""

from __future__ import annotations

import numpy as np

VOCAB, SEQ = 64, 16
CONFIG = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 64,
    "use_flash_attention": False,
    "use_fused_rms_norm": False,
    "fuse_rms_norm": False,  # PaddleFormers 1.2's name for it: the fused kernel has no CPU implementation
    # Llama ties the output projection to the embedding by default. Tied, one weight would live on the first and
    # the last stage, and each rank would update its own copy: ppdsl refuses that (E039). Paddle's PipelineLayer
    # keeps such a weight in step with a SharedLayerDesc and an all-reduce; untied, every weight has one stage.
    "tie_word_embeddings": False,
}


def llama():
    """The model, as anyone would build it (call it in dygraph)."""
    from paddleformers.transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**CONFIG))


def pipeline_parts(model):
    """(embedding, blocks, head) of a `LlamaForCausalLM`, sharing its layers and parameters."""
    import paddle
    from paddle import nn
    from paddleformers.transformers.masking_utils import create_causal_mask_and_row_indices

    decoder = model.model
    config = model.config

    class Embedding(nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed_tokens = decoder.embed_tokens

        def forward(self, tokens):
            return self.embed_tokens(tokens).astype(self.embed_tokens.weight.dtype)

    class Block(nn.Layer):
        """One decoder layer, with the position embeddings and the causal mask LlamaModel.forward would pass."""

        def __init__(self, layer):
            super().__init__()
            self.layer = layer
            self.rotary_emb = decoder.rotary_emb  # a buffer (inv_freq), no trainable weight: fine on every stage
            # a plain function, not a sublayer: the block must not own the whole model's parameters
            self.__dict__["prepare_mask"] = decoder._prepare_decoder_attention_mask

        def forward(self, hidden):
            batch, seq = hidden.shape[0], hidden.shape[1]
            position_ids = paddle.arange(0, seq, dtype=paddle.int64).unsqueeze(0).tile((batch, 1))
            mask, row_indices = create_causal_mask_and_row_indices(
                config=config,
                inputs_embeds=hidden,
                batch_size=batch,
                seq_length=seq,
                cache_length=0,
                attention_mask=None,
                attn_mask_startend_row_indices=None,
                prepare_decoder_attention_mask=self.prepare_mask,
            )
            return self.layer(
                hidden,
                attention_mask=mask,
                attn_mask_startend_row_indices=row_indices,
                position_ids=position_ids,
                position_embeddings=self.rotary_emb(hidden, position_ids),
            )

    class Head(nn.Layer):
        def __init__(self):
            super().__init__()
            self.norm, self.lm_head, self.criterion = decoder.norm, model.lm_head, model.criterion

        def forward(self, hidden, labels):
            loss, _ = self.criterion(self.lm_head(self.norm(hidden)), labels)
            return loss

    return Embedding(), [Block(layer) for layer in decoder.layers], Head()


def build(ctx):
    with ctx.layers():
        model = llama()
        embedding, blocks, head = pipeline_parts(model)
    ctx.name_from(model)
    tokens = ctx.data("tokens", [SEQ], "int64")
    labels = ctx.data("labels", [SEQ], "int64")
    return ctx.pipeline(embedding, blocks, head, inputs=[tokens], head_inputs=[labels], split="uniform")


def make_batch(step: int, batch_size: int, seed: int) -> dict[str, np.ndarray]:
    """The built-in models' synthetic text."""
    from ppdsl.runtime.builtin_models import synthetic_text

    return synthetic_text(step, batch_size, seed, VOCAB, SEQ)
