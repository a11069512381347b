"""Post-norm Transformer decoder block, always causal (twin: port_ts/src/nn/decoderBlock.ts).

    S = MHA_self(X, X, X, causal)             (B, T, d)    query t sees keys 0..t
    Y = AddNorm1(X, S) = LN1(X + drop(S))     (B, T, d)
    C = MHA_cross(Y, E, E, enc_lens)          (B, T, d)    keys/values: the encoder's output
    Z = AddNorm2(Y, C) = LN2(Y + drop(C))     (B, T, d)
    out = AddNorm3(Z, FFN(Z))                 (B, T, d)

Shape legend: B batch, T target steps, S source steps, d model dim, H heads, F FFN hidden.
The causal mask is the book's training-mode one: 2-D valid lengths [1, 2, ..., T] for every batch
row. This project applies it in every mode (docs: decisions.md "Decoding"); the book's eval mode
drops it.

Traced sub-layers (core/trace.py): self_attention, addnorm1, cross_attention, addnorm2, ffn, addnorm3,
forward and backward.
Parameters (stripped of the block's prefix): self_attn.W_q..W_o, ln1.*, cross_attn.W_q..W_o,
ln2.*, ffn.W1/b1/W2/b2, ln3.* (shapes as in encoder_block.py). Generator draws when
dropout_p > 0, in forward order: self-attention weights (B, H, T, T), AddNorm1 (B, T, d),
cross-attention weights (B, H, T, S), AddNorm2 (B, T, d), AddNorm3 (B, T, d).

Backward (dout (B, T, d) -> dx (B, T, d), denc (B, S, d) and the parameters' gradients under the
stripped names) walks the six lines above in reverse. denc is the cross-attention's x_kv
gradient, this block's contribution to the encoder output's gradient. Tensors used more than
once receive their gradients as they arrive, in one fixed order, the same in both engines:
    dZ = dZ_residual + dZ_ffn                     from AddNorm3, then from the FFN
    dY = dY_residual + dY_query                   from AddNorm2, then the cross-attention's x_q
    dX = (dX_residual + dX_query) + dX_keyvalue   from AddNorm1, then self-attention's x_q, x_kv
"""

import numpy as np

from ..core.params import add_grads, param, sub_params
from ..core.trace import backward, sublayer
from .encoder_block import (ADD_NORM_GRADS, FFN_GRADS, MHA_GRADS, add_norm_backward, add_norm_forward, init_ffn_params,
                            init_layer_norm_params, init_mha_params)
from .ffn import ffn_backward, ffn_forward
from .multi_head_attention import multi_head_attention_backward, multi_head_attention_forward


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
    s, self_attn = sublayer("self_attention", multi_head_attention_forward, x, x, sub_params(params, "self_attn."),
                            num_heads, causal_valid_lens(B, T), dropout_p, rng)  # (B, T, d)
    y, norm1 = sublayer("addnorm1", add_norm_forward, x, s, param(params, "ln1.gamma"), param(params, "ln1.beta"),
                        dropout_p, rng)  # (B, T, d)
    c, cross_attn = sublayer("cross_attention", multi_head_attention_forward, y, enc_out,
                             sub_params(params, "cross_attn."), num_heads, enc_valid_lens, dropout_p, rng)  # (B, T, d)
    z, norm2 = sublayer("addnorm2", add_norm_forward, y, c, param(params, "ln2.gamma"), param(params, "ln2.beta"),
                        dropout_p, rng)  # (B, T, d)
    g, ffn = sublayer("ffn", ffn_forward, z, sub_params(params, "ffn."))  # (B, T, d)
    out, norm3 = sublayer("addnorm3", add_norm_forward, z, g, param(params, "ln3.gamma"), param(params, "ln3.beta"),
                          dropout_p, rng)  # (B, T, d)
    cache = {"x": x, "enc_out": enc_out, "self_attn": self_attn, "norm1": norm1,
             "cross_attn": cross_attn, "norm2": norm2, "ffn": ffn, "norm3": norm3,
             "self_weights": self_attn["weights"],  # (B, H, T, T)
             "cross_weights": cross_attn["weights"]}  # (B, H, T, S)
    return out, cache


def decoder_block_backward(dout, cache):
    """dout (B, T, d) -> (dx (B, T, d), denc (B, S, d), grads under the stripped names, in draw order)."""
    # inverts: out = AddNorm3(Z, G)
    dz_res, dg, dgamma3, dbeta3 = backward("addnorm3", ADD_NORM_GRADS, add_norm_backward, dout, cache["norm3"])  # (B, T, d)
    # inverts: G = FFN(Z)
    dz_ffn, ffn_grads = backward("ffn", FFN_GRADS, ffn_backward, dg, cache["ffn"])  # (B, T, d)
    dz = add_grads(dz_res, dz_ffn)  # Z feeds the residual and the FFN
    # inverts: Z = AddNorm2(Y, C)
    dy_res, dc, dgamma2, dbeta2 = backward("addnorm2", ADD_NORM_GRADS, add_norm_backward, dz, cache["norm2"])  # (B, T, d)
    # inverts: C = MHA_cross(Y, E, E, enc_lens)
    dy_q, denc, cross_grads = backward("cross_attention", MHA_GRADS, multi_head_attention_backward, dc,
                                       cache["cross_attn"])  # (B, T, d), (B, S, d)
    dy = add_grads(dy_res, dy_q)  # Y feeds the residual and the cross-attention's queries
    # inverts: Y = AddNorm1(X, S)
    dx_res, ds, dgamma1, dbeta1 = backward("addnorm1", ADD_NORM_GRADS, add_norm_backward, dy, cache["norm1"])  # (B, T, d)
    # inverts: S = MHA_self(X, X, X, causal)
    dx_q, dx_kv, self_grads = backward("self_attention", MHA_GRADS, multi_head_attention_backward, ds,
                                       cache["self_attn"])  # (B, T, d) each
    dx = add_grads(add_grads(dx_res, dx_q), dx_kv)  # X feeds the residual, the queries, the keys and values
    names = ("W_q", "W_k", "W_v", "W_o")
    grads = {f"self_attn.{name}": self_grads[name] for name in names}
    grads.update({"ln1.gamma": dgamma1, "ln1.beta": dbeta1})
    grads.update({f"cross_attn.{name}": cross_grads[name] for name in names})
    grads.update({"ln2.gamma": dgamma2, "ln2.beta": dbeta2})
    grads.update({f"ffn.{name}": ffn_grads[name] for name in ("W1", "b1", "W2", "b2")})
    grads.update({"ln3.gamma": dgamma3, "ln3.beta": dbeta3})
    return dx, denc, grads
