"""Scaled dot-product attention (twin: port_ts/src/dotProductAttention.ts).

    scores  = q k^T / sqrt(D)                 (B, ..., Q, K)
    weights = masked_softmax(scores, lens)    (B, ..., Q, K)   rows sum to 1
    dropped = weights * (keep / (1 - p))      (B, ..., Q, K)   inverted dropout; p == 0: weights
    out     = dropped v                       (B, ..., Q, V)

Shape legend: B batch, ... further leading axes (heads in multi-head attention), Q queries,
K keys, D query/key dim, V value dim. The dot product sums over D in index order, and each score
is then divided by sqrt(D) (one rounded division, the same in both engines).
"""

import math

import numpy as np

from .masked_softmax import masked_softmax_forward
from .ops import matmul, matmul_nt


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
