"""Sliding-window causal attention (twin: port_ts/src/nn/slidingWindow.ts; docs/tiled_attention.md).

Query q attends to the w most recent keys, its own included: q - w < k <= q.

    plain:  scores  = q k^T / sqrt(D)                           (..., T, T)
            weights = softmax(where(window_keep, scores, -1e6)) (..., T, T)   every score computed
            out     = weights v                                 (..., T, V)
    tiled:  tiled_attention(q, k, v, tile, causal, window)      only the key tiles that the
                                                                window reaches: O(T w) scores

The plain form is the mask written out (window_keep, a T x T table) on nn/lesson_attention.py's
masked_attention; the tiled form is the online softmax of nn/tiled_attention.py, whose own band
rule (band_keep) skips the tiles the window never reaches. They are the same maths, within a few
ULP (the case checks it); each is bit-identical across our engines.
Shape legend: ... leading axes (batch, heads), T steps (queries = keys), D query/key dim,
V value dim, w the window.
"""

import numpy as np

from .lesson_attention import masked_attention_backward, masked_attention_forward
from .tiled_attention import tiled_attention_backward, tiled_attention_forward


def window_keep(T, window):
    """bool (1, T, T): key k kept for query q when q - window < k <= q."""
    if not (isinstance(window, int) and window >= 1):
        raise ValueError(f"sliding_window: the window must be a positive integer, got {window!r}")
    q = np.arange(T)[:, None]
    k = np.arange(T)[None, :]
    return ((k <= q) & (k > q - window))[None]


def sliding_window_plain_forward(q, k, v, window):
    """q, k (B, H, T, D), v (B, H, T, V) -> (out (B, H, T, V), cache): the mask written out."""
    return masked_attention_forward(q, k, v, window_keep(q.shape[-2], window))


def sliding_window_plain_backward(dout, cache):
    """dout (B, H, T, V) -> (dq, dk, dv)."""
    return masked_attention_backward(dout, cache)


def sliding_window_forward(q, k, v, window, tile):
    """q, k (..., T, D), v (..., T, V) -> (out (..., T, V), cache): the tiled online softmax over
    the tiles the window reaches."""
    return tiled_attention_forward(q, k, v, tile, causal=True, window=window)


def sliding_window_backward(dout, cache):
    """dout (..., T, V) -> (dq, dk, dv), from the forward's stored log-sum-exp."""
    return tiled_attention_backward(dout, cache)
