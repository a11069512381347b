"""Scaled dot-product attention (twin: port_ts/src/nn/dotProductAttention.ts).

    scores  = q k^T / sqrt(D)                 (B, ..., Q, K)
    weights = masked_softmax(scores, lens)    (B, ..., Q, K)   rows sum to 1
    dropped = weights * (keep / (1 - p))      (B, ..., Q, K)   inverted dropout; p == 0: weights
    out     = dropped v                       (B, ..., Q, V)

Shape legend: B batch, ... further leading axes (heads in multi-head attention), Q queries,
K keys, D query/key dim, V value dim. The dot product sums over D in index order, and each score
is then divided by sqrt(D) (one rounded division, the same in both engines).

The backward walks these lines from the bottom up. Each product of the forward gives two
products of the backward, and every sum in them runs in index order through ops.matmul: over
V for the weights, over queries for dk and dv, over keys for dq.
"""

import math

import numpy as np

from .masked_softmax import masked_softmax_backward, masked_softmax_forward
from ..core.ops import matmul, matmul_nt


def transpose_last(x):
    """(..., M, N) -> (..., N, M), a row-major copy: the backward's transposed matmul operands."""
    return np.ascontiguousarray(np.swapaxes(np.asarray(x, dtype=np.float64), -1, -2))


def attention_dropout(weights, dropout_p, rng):
    """Inverted dropout on attention weights: (dropped, keep). p == 0 draws nothing and returns
    (weights, None); otherwise the keep mask of the weights' shape is drawn now, in one go."""
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"attention dropout: p must be a number in [0, 1), got {dropout_p!r}")
    if dropout_p == 0.0:
        return weights, None
    if rng is None:
        raise ValueError(f"dropout_p = {dropout_p} needs a generator (rng), got None")
    keep = rng.keep_mask(weights.shape, dropout_p)  # (B, ..., Q, K) of 0.0 / 1.0
    # the scale is rounded once, then one product: as dropout.py and PyTorch's x * (mask / (1 - p))
    return weights * (keep / (1.0 - dropout_p)), keep


def attention_dropout_backward(ddropped, keep, dropout_p):
    """d weights of dropped = weights * (keep / (1 - p)): the same product with the same mask;
    keep None (p == 0) passes the gradient through."""
    if keep is None:
        return ddropped
    return ddropped * (keep / (1.0 - dropout_p))


def dot_product_attention_forward(q, k, v, valid_lens=None, dropout_p=0.0, rng=None):
    """q (B, ..., Q, D), k (B, ..., K, D), v (B, ..., K, V) -> (out (B, ..., Q, V), cache)."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit "
                         "(need q (..., Q, D), k (..., K, D), v (..., K, V))")
    D = q.shape[-1]
    scores = matmul_nt(q, k) / math.sqrt(D)  # (B, ..., Q, K)
    weights, softmax_cache = masked_softmax_forward(scores, valid_lens)  # (B, ..., Q, K)
    dropped, keep = attention_dropout(weights, dropout_p, rng)  # (B, ..., Q, K)
    out = matmul(dropped, v)  # (B, ..., Q, V)
    cache = {"q": q, "k": k, "v": v, "weights": weights, "dropped": dropped, "mask": keep,
             "dropout_p": dropout_p, "softmax": softmax_cache}
    return out, cache


def dot_product_attention_backward(dout, cache):
    """dout (B, ..., Q, V) -> (dq (B, ..., Q, D), dk (B, ..., K, D), dv (B, ..., K, V))."""
    q, k, v = cache["q"], cache["k"], cache["v"]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != q.shape[:-1] + v.shape[-1:]:
        raise ValueError(f"dot_product_attention_backward: dout must have shape {q.shape[:-1] + v.shape[-1:]}, "
                         f"got {dout.shape}")
    # out = matmul(dropped, v)
    ddropped = matmul_nt(dout, v)  # (B, ..., Q, K): sum over V
    dv = matmul(transpose_last(cache["dropped"]), dout)  # (B, ..., K, V): sum over queries
    # dropped, keep = attention_dropout(weights, dropout_p, rng)
    dweights = attention_dropout_backward(ddropped, cache["mask"], cache["dropout_p"])  # (B, ..., Q, K)
    # weights, softmax_cache = masked_softmax_forward(scores, valid_lens)
    dscores = masked_softmax_backward(dweights, cache["softmax"])  # (B, ..., Q, K)
    # scores = matmul_nt(q, k) / math.sqrt(D)
    dqk = dscores / math.sqrt(q.shape[-1])  # (B, ..., Q, K)
    dq = matmul(dqk, k)  # (B, ..., Q, D): sum over keys
    dk = matmul(transpose_last(dqk), q)  # (B, ..., K, D): sum over queries
    return dq, dk, dv
