"""The lesson's multi-head attention: PyTorch's nn.MultiheadAttention, biases on all four
projections (twin: port_ts/src/nn/lessonAttention.ts; docs/lesson_block.md).

    qkv = x W_in^T + b_in                          (B, T, 3d)   W_in (3d, d): rows [W_q; W_k; W_v]
    q, k, v = qkv[..., :d], [d:2d], [2d:]          (B, T, d)    = in_proj_weight, in_proj_bias
    qh, kh, vh = split_heads(q), ...               (B, H, T, D) head i: features [i*D, (i+1)*D)
    scores  = qh kh^T / sqrt(D)                    (B, H, T, K)
    weights = softmax(where(keep, scores, -1e6))   (B, H, T, K) keep (B|1, T, K) shared by the heads
    heads   = weights vh                           (B, H, T, D)
    out     = merge_heads(heads) W_o^T + b_o       (B, T, d)    = out_proj.weight, out_proj.bias

Shape legend: B batch, T queries, K keys, H heads, D head dim, d model dim (d = H * D).
keep None attends to every key; causal_keep(T, pads) gives the causal mask of a left-padded
batch (key k is kept for query q when pads[b] <= k <= q). A masked score is replaced by
masked_softmax's -1e6, as everywhere in the project: the same bits as the book's valid lengths
where the two masks coincide (a causal keep is 2-D valid lengths q + 1). No dropout (the
lesson's block in eval mode; our runs train with p = 0).

PyTorch's initialisation (d2l-book-facts.md section 12): W_in Xavier-uniform over the whole
(3d, d) matrix, U(+-sqrt(6 / (d + 3d))); W_o the default Linear init U(+-1/sqrt(d)); both biases 0.

masked_attention_forward is the core that the KV cache (runs/kv_cache.py) calls one query at a
time. The backwards walk the lines above from the bottom up; the three parts of dqkv are joined
back into one (B, T, 3d) gradient, so W_in and b_in get theirs from one linear_backward.
"""

import math

import numpy as np

from .linear import linear_backward, linear_forward
from .masked_softmax import MASK_VALUE, masked_softmax_backward, masked_softmax_forward
from .multi_head_attention import merge_heads, split_heads
from .dot_product_attention import transpose_last
from ..core.ops import matmul, matmul_nt


def init_lesson_attention_params(rng, d, prefix=""):
    """W_in (3d, d) ~ U(+-sqrt(6 / (4d))), b_in = 0 (3d,), W_o (d, d) ~ U(+-1/sqrt(d)), b_o = 0 (d,);
    drawn in that order (W_in, then W_o)."""
    xavier = math.sqrt(6.0 / (d + 3 * d))
    W_in = rng.uniform((3 * d, d), -xavier, xavier)  # (3d, d)
    bound = 1.0 / math.sqrt(d)
    W_o = rng.uniform((d, d), -bound, bound)  # (d, d)
    return {f"{prefix}W_in": W_in, f"{prefix}b_in": np.zeros(3 * d), f"{prefix}W_o": W_o, f"{prefix}b_o": np.zeros(d)}


def causal_keep(T, pads=None):
    """bool (B, T, T) (or (1, T, T) without pads): key k kept for query q when pads[b] <= k <= q."""
    q = np.arange(T)[:, None]
    k = np.arange(T)[None, :]
    if pads is None:
        return (k <= q)[None]  # (1, T, T)
    pads = np.asarray(pads)
    return (k <= q)[None] & (k[None] >= pads[:, None, None])  # (B, T, T)


def split_qkv(qkv):
    """(B, T, 3d) -> q, k, v (B, T, d) each: features [0, d), [d, 2d), [2d, 3d)."""
    d = qkv.shape[-1] // 3
    return (np.ascontiguousarray(qkv[..., :d]), np.ascontiguousarray(qkv[..., d:2 * d]),
            np.ascontiguousarray(qkv[..., 2 * d:]))


def join_qkv(q, k, v):
    """q, k, v (B, T, d) -> (B, T, 3d), the inverse of split_qkv."""
    return np.concatenate([q, k, v], axis=-1)


def masked_attention_forward(qh, kh, vh, keep=None):
    """qh (B, H, Q, D), kh (B, H, K, D), vh (B, H, K, D), keep None | bool (B|1, Q, K)
    -> (heads (B, H, Q, D), cache); cache["weights"] (B, H, Q, K)."""
    D = qh.shape[-1]
    scores = matmul_nt(qh, kh) / math.sqrt(D)  # (B, H, Q, K)
    keep4 = None if keep is None else np.asarray(keep)[:, None]  # (B|1, 1, Q, K)
    filled = scores if keep4 is None else np.where(keep4, scores, MASK_VALUE)  # (B, H, Q, K)
    weights, softmax = masked_softmax_forward(filled, None)  # (B, H, Q, K)
    heads = matmul(weights, vh)  # (B, H, Q, D): sum over keys in order
    return heads, {"qh": qh, "kh": kh, "vh": vh, "keep": keep4, "weights": weights, "softmax": softmax}


def masked_attention_backward(dheads, cache):
    """dheads (B, H, Q, D) -> (dqh (B, H, Q, D), dkh (B, H, K, D), dvh (B, H, K, D))."""
    qh, kh, vh, weights, keep4 = cache["qh"], cache["kh"], cache["vh"], cache["weights"], cache["keep"]
    # heads = matmul(weights, vh)
    dweights = matmul_nt(dheads, vh)  # (B, H, Q, K): sum over D
    dvh = matmul(transpose_last(weights), dheads)  # (B, H, K, D): sum over queries
    # weights, softmax = masked_softmax_forward(filled, None)
    dfilled = masked_softmax_backward(dweights, cache["softmax"])  # (B, H, Q, K)
    # filled = np.where(keep4, scores, MASK_VALUE): a masked score is a constant
    dscores = dfilled if keep4 is None else np.where(keep4, dfilled, 0.0)  # (B, H, Q, K)
    # scores = matmul_nt(qh, kh) / math.sqrt(D)
    dqk = dscores / math.sqrt(qh.shape[-1])  # (B, H, Q, K)
    dqh = matmul(dqk, kh)  # (B, H, Q, D): sum over keys
    dkh = matmul(transpose_last(dqk), qh)  # (B, H, K, D): sum over queries
    return dqh, dkh, dvh


def lesson_attention_forward(x, params, num_heads, keep=None):
    """Self-attention, x (B, T, d), keep None | bool (B|1, T, T) -> (out (B, T, d), cache)."""
    x = np.asarray(x, dtype=np.float64)
    W_in, b_in, W_o, b_o = (params[n] for n in ("W_in", "b_in", "W_o", "b_o"))
    d = x.shape[-1]
    if num_heads < 1 or d % num_heads != 0:
        raise ValueError(f"lesson_attention: model dim d = {d} must be divisible by num_heads = {num_heads}; "
                         "choose h dividing d")
    expected = {"W_in": (3 * d, d), "b_in": (3 * d,), "W_o": (d, d), "b_o": (d,)}
    for name, shape in expected.items():
        if params[name].shape != shape:
            raise ValueError(f"lesson_attention: {name} must have shape {shape}, got {params[name].shape}")
    qkv, lin_in = linear_forward(x, W_in, b_in)  # (B, T, 3d)
    q, k, v = split_qkv(qkv)  # (B, T, d) each
    qh, kh, vh = split_heads(q, num_heads), split_heads(k, num_heads), split_heads(v, num_heads)  # (B, H, T, D)
    heads, attn = masked_attention_forward(qh, kh, vh, keep)  # (B, H, T, D)
    concat = merge_heads(heads)  # (B, T, d)
    out, lin_out = linear_forward(concat, W_o, b_o)  # (B, T, d)
    cache = {"lin_in": lin_in, "lin_out": lin_out, "num_heads": num_heads, "attn": attn,
             "kh": kh, "vh": vh, "weights": attn["weights"]}
    return out, cache


def lesson_attention_backward(dout, cache):
    """dout (B, T, d) -> (dx (B, T, d), {"W_in", "b_in", "W_o", "b_o"})."""
    num_heads = cache["num_heads"]
    # out, lin_out = linear_forward(concat, W_o, b_o)
    dconcat, dW_o, db_o = linear_backward(dout, cache["lin_out"])  # (B, T, d)
    # concat = merge_heads(heads)
    dheads = split_heads(dconcat, num_heads)  # (B, H, T, D)
    # heads, attn = masked_attention_forward(qh, kh, vh, keep)
    dqh, dkh, dvh = masked_attention_backward(dheads, cache["attn"])  # (B, H, T, D) each
    # qh, kh, vh = split_heads(q, num_heads), ...
    dqkv = join_qkv(merge_heads(dqh), merge_heads(dkh), merge_heads(dvh))  # (B, T, 3d)
    # qkv, lin_in = linear_forward(x, W_in, b_in)
    dx, dW_in, db_in = linear_backward(dqkv, cache["lin_in"])  # (B, T, d)
    return dx, {"W_in": dW_in, "b_in": db_in, "W_o": dW_o, "b_o": db_o}
