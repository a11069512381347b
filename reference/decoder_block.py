"""Post-norm Transformer decoder block, always causal (twin: port_ts/src/decoderBlock.ts).

    S = MHA_self(X, X, X, causal)             (B, T, d)    query t sees keys 0..t
    Y = AddNorm1(X, S) = LN1(X + drop(S))     (B, T, d)
    C = MHA_cross(Y, E, E, enc_lens)          (B, T, d)    keys/values: the encoder's output
    Z = AddNorm2(Y, C) = LN2(Y + drop(C))     (B, T, d)
    out = AddNorm3(Z, FFN(Z))                 (B, T, d)

Shape legend: B batch, T target steps, S source steps, d model dim, H heads, F FFN hidden.
The causal mask is the book's training-mode one: 2-D valid lengths [1, 2, ..., T] for every batch
row. This project applies it in every mode (docs: decisions.md "Decoding"); the book's eval mode
drops it.

Parameters (stripped of the block's prefix): self_attn.W_q..W_o, ln1.*, cross_attn.W_q..W_o,
ln2.*, ffn.W1/b1/W2/b2, ln3.* (shapes as in encoder_block.py). Generator draws when
dropout_p > 0, in forward order: self-attention weights (B, H, T, T), AddNorm1 (B, T, d),
cross-attention weights (B, H, T, S), AddNorm2 (B, T, d), AddNorm3 (B, T, d).
"""

import numpy as np

from .encoder_block import (add_norm_forward, init_ffn_params, init_layer_norm_params, init_mha_params,
                            param, sub_params)
from .ffn import ffn_forward
from .multi_head_attention import multi_head_attention_forward


def causal_valid_lens(B, T):
    """(B, T) int64: row t of every batch element may see keys 0..t, i.e. length t + 1."""
    return np.tile(np.arange(1, T + 1, dtype=np.int64), (B, 1))


def init_decoder_block_params(rng, d, ffn_hidden):
    """Stripped names, drawn in this order: self_attn.W_q..W_o, (ln1), cross_attn.W_q..W_o, (ln2),
    ffn.W1, b1, W2, b2, (ln3). Cross-attention keys/values come from the encoder, also d wide."""
    return {**init_mha_params(rng, d, "self_attn."), **init_layer_norm_params(d, "ln1."),
            **init_mha_params(rng, d, "cross_attn."), **init_layer_norm_params(d, "ln2."),
            **init_ffn_params(rng, d, ffn_hidden, "ffn."), **init_layer_norm_params(d, "ln3.")}


def decoder_block_forward(x, enc_out, enc_valid_lens, params, num_heads, dropout_p=0.0, rng=None):
    """x (B, T, d), enc_out (B, S, d), enc_valid_lens None | (B,) -> (out (B, T, d), cache)."""
    x = np.asarray(x, dtype=np.float64)
    enc_out = np.asarray(enc_out, dtype=np.float64)
    B, T, _ = x.shape
    s, self_attn = multi_head_attention_forward(x, x, sub_params(params, "self_attn."), num_heads,
                                                causal_valid_lens(B, T), dropout_p, rng)  # (B, T, d)
    y, norm1 = add_norm_forward(x, s, param(params, "ln1.gamma"), param(params, "ln1.beta"),
                                dropout_p, rng)  # (B, T, d)
    c, cross_attn = multi_head_attention_forward(y, enc_out, sub_params(params, "cross_attn."), num_heads,
                                                 enc_valid_lens, dropout_p, rng)  # (B, T, d)
    z, norm2 = add_norm_forward(y, c, param(params, "ln2.gamma"), param(params, "ln2.beta"),
                                dropout_p, rng)  # (B, T, d)
    g, ffn = ffn_forward(z, sub_params(params, "ffn."))  # (B, T, d)
    out, norm3 = add_norm_forward(z, g, param(params, "ln3.gamma"), param(params, "ln3.beta"),
                                  dropout_p, rng)  # (B, T, d)
    cache = {"x": x, "enc_out": enc_out, "self_attn": self_attn, "norm1": norm1,
             "cross_attn": cross_attn, "norm2": norm2, "ffn": ffn, "norm3": norm3,
             "self_weights": self_attn["weights"],  # (B, H, T, T)
             "cross_weights": cross_attn["weights"]}  # (B, H, T, S)
    return out, cache
