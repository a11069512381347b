"""Post-norm Transformer encoder block (twin: port_ts/src/nn/encoderBlock.ts).

    A = MHA(X, X, X, lens)                   (B, T, d)    attention-weight dropout p inside
    Y = AddNorm1(X, A) = LN1(X + drop(A))    (B, T, d)
    G = FFN(Y)                               (B, T, d)    Linear(d -> F) -> ReLU -> Linear(F -> d)
    out = AddNorm2(Y, G) = LN2(Y + drop(G))  (B, T, d)

Shape legend: B batch, T steps, d model dim, H heads, F FFN hidden. valid_lens None | (B,)
masks padded keys (1-D: shared by every query of a row).

Parameters arrive as a dict stripped of the block's prefix (take them out of a model's flat dict
with sub_params(params, "enc.blk0.")):
    attn.W_q, attn.W_k, attn.W_v, attn.W_o (d, d)   no biases
    ln1.gamma, ln1.beta (d,)
    ffn.W1 (F, d), ffn.b1 (F,), ffn.W2 (d, F), ffn.b2 (d,)
    ln2.gamma, ln2.beta (d,)
Traced sub-layers (core/trace.py): attention, addnorm1, ffn, addnorm2, forward and backward.
Generator draws when dropout_p > 0, in forward order: MHA's weight mask (B, H, T, T), AddNorm1's
mask (B, T, d), AddNorm2's mask (B, T, d).

Backward (dout (B, T, d) -> dx (B, T, d) and the parameters' gradients under the stripped names)
walks the four lines above in reverse. A tensor used twice receives its gradients as they
arrive, in one fixed order, the same in both engines:
    dY = dY_residual + dY_ffn                     from AddNorm2, then from the FFN
    dX = (dX_residual + dX_query) + dX_keyvalue   from AddNorm1, then MHA's x_q, then its x_kv
"""

import numpy as np

from .dropout import dropout_backward, dropout_forward
from .ffn import ffn_backward, ffn_forward
from .init import layer_norm_params, linear_params
from .layer_norm import layer_norm_backward, layer_norm_forward
from .multi_head_attention import multi_head_attention_backward, multi_head_attention_forward
from ..core.params import add_grads, param, sub_params
from ..core.trace import backward, sublayer


def init_mha_params(rng, d, prefix=""):
    """W_q, W_k, W_v, W_o (d, d) in that order, each U(+-1/sqrt(d)), no biases."""
    return {f"{prefix}{name}": linear_params(rng, d, d, bias=False)[0] for name in ("W_q", "W_k", "W_v", "W_o")}


def init_ffn_params(rng, d, ffn_hidden, prefix=""):
    """W1 (F, d) then b1 (F,) from U(+-1/sqrt(d)); W2 (d, F) then b2 (d,) from U(+-1/sqrt(F))."""
    W1, b1 = linear_params(rng, ffn_hidden, d)
    W2, b2 = linear_params(rng, d, ffn_hidden)
    return {f"{prefix}W1": W1, f"{prefix}b1": b1, f"{prefix}W2": W2, f"{prefix}b2": b2}


def init_layer_norm_params(d, prefix=""):
    """gamma = 1, beta = 0 (d,); draws nothing."""
    gamma, beta = layer_norm_params(d)
    return {f"{prefix}gamma": gamma, f"{prefix}beta": beta}


def init_encoder_block_params(rng, d, ffn_hidden):
    """Stripped names, drawn in this order: attn.W_q..W_o, (ln1), ffn.W1, b1, W2, b2, (ln2)."""
    return {**init_mha_params(rng, d, "attn."), **init_layer_norm_params(d, "ln1."),
            **init_ffn_params(rng, d, ffn_hidden, "ffn."), **init_layer_norm_params(d, "ln2.")}


def add_norm_forward(x, y, gamma, beta, dropout_p=0.0, rng=None):
    """LN(x + dropout(y)): x, y (..., d) -> (out (..., d), cache)."""
    dropped, drop_cache = dropout_forward(y, dropout_p, rng)  # (..., d)
    out, ln_cache = layer_norm_forward(x + dropped, gamma, beta)  # (..., d)
    return out, {"dropout": drop_cache, "ln": ln_cache}


# the labels a traced backward gives each returned gradient: the port's field names (core/trace.py)
ADD_NORM_GRADS, MHA_GRADS, FFN_GRADS = ("dx", "dy", "dgamma", "dbeta"), ("dxQ", "dxKv", "grads"), ("dx", "grads")


def add_norm_backward(dout, cache):
    """dout (..., d) -> (dx (..., d), dy (..., d), dgamma (d,), dbeta (d,))."""
    dsum, dgamma, dbeta = layer_norm_backward(dout, cache["ln"])  # inverts: out = LN(x + dropped)
    dx = dsum  # the residual path: x enters the sum unchanged
    dy = dropout_backward(dsum, cache["dropout"])  # inverts: dropped = dropout(y)
    return dx, dy, dgamma, dbeta


def encoder_block_forward(x, valid_lens, params, num_heads, dropout_p=0.0, rng=None):
    """x (B, T, d), valid_lens None | (B,) -> (out (B, T, d), cache)."""
    x = np.asarray(x, dtype=np.float64)
    a, attn = sublayer("attention", multi_head_attention_forward, x, x, sub_params(params, "attn."), num_heads,
                       valid_lens, dropout_p, rng)  # (B, T, d)
    y, norm1 = sublayer("addnorm1", add_norm_forward, x, a, param(params, "ln1.gamma"), param(params, "ln1.beta"),
                        dropout_p, rng)  # (B, T, d)
    g, ffn = sublayer("ffn", ffn_forward, y, sub_params(params, "ffn."))  # (B, T, d)
    out, norm2 = sublayer("addnorm2", add_norm_forward, y, g, param(params, "ln2.gamma"), param(params, "ln2.beta"),
                          dropout_p, rng)  # (B, T, d)
    cache = {"x": x, "attn": attn, "norm1": norm1, "ffn": ffn, "norm2": norm2,
             "weights": attn["weights"]}  # weights (B, H, T, T)
    return out, cache


def encoder_block_backward(dout, cache):
    """dout (B, T, d) -> (dx (B, T, d), grads): grads under the stripped names, in draw order."""
    # inverts: out = AddNorm2(Y, G)
    dy_res, dg, dgamma2, dbeta2 = backward("addnorm2", ADD_NORM_GRADS, add_norm_backward, dout, cache["norm2"])  # (B, T, d)
    # inverts: G = FFN(Y)
    dy_ffn, ffn_grads = backward("ffn", FFN_GRADS, ffn_backward, dg, cache["ffn"])  # (B, T, d)
    dy = add_grads(dy_res, dy_ffn)  # Y feeds the residual and the FFN
    # inverts: Y = AddNorm1(X, A)
    dx_res, da, dgamma1, dbeta1 = backward("addnorm1", ADD_NORM_GRADS, add_norm_backward, dy, cache["norm1"])  # (B, T, d)
    # inverts: A = MHA(X, X, X, lens)
    dx_q, dx_kv, attn_grads = backward("attention", MHA_GRADS, multi_head_attention_backward, da, cache["attn"])  # (B, T, d)
    dx = add_grads(add_grads(dx_res, dx_q), dx_kv)  # X feeds the residual, the queries, the keys and values
    grads = {f"attn.{name}": attn_grads[name] for name in ("W_q", "W_k", "W_v", "W_o")}
    grads.update({"ln1.gamma": dgamma1, "ln1.beta": dbeta1})
    grads.update({f"ffn.{name}": ffn_grads[name] for name in ("W1", "b1", "W2", "b2")})
    grads.update({"ln2.gamma": dgamma2, "ln2.beta": dbeta2})
    return dx, grads
