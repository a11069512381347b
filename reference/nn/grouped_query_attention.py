"""Grouped-query attention: H query heads share G key/value heads, no biases (twin:
port_ts/src/nn/groupedQueryAttention.ts).

Multi-head attention whose key and value projections are shared by groups of R = H / G heads:
query head i reads key/value head i // R, as PyTorch's scaled_dot_product_attention(...,
enable_gqa=True) pairs them (repeat_interleave on the head axis).

    W_k', W_v' = repeat_heads(W_k, G, R), repeat_heads(W_v, G, R)     (d, dkv_in)   rows of head g, R times in a row
    out = multi_head_attention(x_q, x_kv, {W_q, W_k', W_v', W_o}, H, lens)   (B, Q, d)

Each repeated row computes the same sums as the shared head's, so the keys and values are those
of G heads, repeated. Shape legend: B batch, Q queries, K keys, H query heads, G key/value heads
(G divides H), D head dim, d model dim (d = H * D), dq_in / dkv_in the input feature dims. Params:
W_q (d, dq_in), W_k (G*D, dkv_in), W_v (G*D, dkv_in), W_o (d, d). G = H is multi-head attention,
bit for bit; G = 1 multi-query attention. valid_lens and dropout as in multi-head attention.

The backward is multi-head attention's, then each shared head's weight gradient is the sum of its
R copies' (sum_groups, in head order from +0).
"""

import numpy as np

from .multi_head_attention import multi_head_attention_backward, multi_head_attention_forward
from ..core.ops import sum_last


def repeat_heads(W, groups, r):
    """(G*D, n) -> (G*r*D, n): the rows of each head (D of them), r times in a row."""
    rows, n = W.shape
    return np.repeat(W.reshape(groups, rows // groups, n), r, axis=0).reshape(rows * r, n)


def sum_groups(dW, groups, r):
    """(G*r*D, n) -> (G*D, n): each head's r copies summed in head order (repeat_heads' adjoint)."""
    rows, n = dW.shape
    D = rows // (groups * r)
    return sum_last(dW.reshape(groups, r, D, n).transpose(0, 2, 3, 1)).reshape(groups * D, n)


def grouped_query_attention_forward(x_q, x_kv, params, num_heads, kv_heads, valid_lens=None, dropout_p=0.0, rng=None):
    """x_q (B, Q, dq_in), x_kv (B, K, dkv_in) -> (out (B, Q, d), cache)."""
    d = params["W_q"].shape[0]
    if num_heads < 1 or kv_heads < 1 or d % num_heads != 0 or num_heads % kv_heads != 0:
        raise ValueError(f"grouped_query_attention: model dim d = {d} must be divisible by num_heads = {num_heads}, "
                         f"and num_heads by kv_heads = {kv_heads}; choose heads dividing d and kv_heads dividing heads")
    R, shared = num_heads // kv_heads, (kv_heads * (d // num_heads), np.shape(x_kv)[-1])
    for name in ("W_k", "W_v"):
        if params[name].shape != shared:
            raise ValueError(f"grouped_query_attention: {name} must have shape {shared}, got {params[name].shape}")
    repeated = {**params, "W_k": repeat_heads(params["W_k"], kv_heads, R), "W_v": repeat_heads(params["W_v"], kv_heads, R)}
    out, cache = multi_head_attention_forward(x_q, x_kv, repeated, num_heads, valid_lens, dropout_p, rng)
    return out, {"mha": cache, "kv_heads": kv_heads, "weights": cache["weights"]}


def grouped_query_attention_backward(dout, cache):
    """dout (B, Q, d) -> (dx_q (B, Q, dq_in), dx_kv (B, K, dkv_in), {"W_q", "W_k", "W_v", "W_o"})."""
    dx_q, dx_kv, grads = multi_head_attention_backward(dout, cache["mha"])
    G = cache["kv_heads"]
    R = cache["mha"]["num_heads"] // G
    return dx_q, dx_kv, {**grads, "W_k": sum_groups(grads["W_k"], G, R), "W_v": sum_groups(grads["W_v"], G, R)}
