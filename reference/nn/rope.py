"""Rotary position embeddings, RoPE (twin: port_ts/src/nn/rope.ts): each (even, odd) feature pair
of a query or key at position p is rotated by the angle p * w_i, w_i = 10000^(-2i/d).

    div_i    = 10000 ** ((2i) / d)                     (d/2,)    i = 0..d/2-1, 1 / w_i
    angle    = p / div_i                               (T, d/2)  p the position of step t
    c, s     = cos(angle), sin(angle)                  (T, d/2)
    out[2i]   = x[2i] * c - x[2i+1] * s                (..., T, d)
    out[2i+1] = x[2i] * s + x[2i+1] * c
    rope attention: out = attention(rope(q, q positions), rope(k, k positions), v)

Shape legend: B batch, H heads, T steps (the second-to-last axis of x), Q queries, K keys, D head
dim, d features (even), V value dim. Positions default to 0..T-1; any integer positions may be
given (a cached prefix starts later). The angles are the sinusoidal table's: at positions 0..T-1,
c and s are its odd and even columns bit for bit (the same pow_ln, the same division, mathlib's
sin and cos). A rotation moves the scores of two positions by their gap alone: q_m . k_n after
RoPE depends on m - n, not on m and n.
Backward: the rotation's transpose, dx[2i] = dout[2i] * c + dout[2i+1] * s,
dx[2i+1] = dout[2i+1] * c - dout[2i] * s.
"""

import numpy as np

from .dot_product_attention import dot_product_attention_backward, dot_product_attention_forward
from .positional_encoding import LN_BASE
from ..core.mathlib import cos, pow_ln, sin


def rope_angles(positions, d):
    """(cos, sin), each (T, d/2), of the angles p / 10000^((2i) / d) at the given positions (T,)."""
    if d % 2 != 0 or d <= 0:
        raise ValueError(f"rope needs an even, positive feature dim d (pairs of features), got d = {d}")
    positions = np.asarray(positions)
    if positions.ndim != 1 or positions.dtype.kind not in "iu":
        raise ValueError(f"rope needs positions as a 1-D array of integers, got {positions.dtype} of shape {positions.shape}")
    exponent = np.arange(0, d, 2, dtype=np.float64) / d  # (d/2,)  (2i) / d
    div = pow_ln(LN_BASE, exponent)  # (d/2,)  10000 ** ((2i) / d) = 1 / w_i
    angle = positions.astype(np.float64)[:, None] / div[None, :]  # (T, d/2)
    return cos(angle), sin(angle)


def rope_forward(x, positions=None):
    """x (..., T, d) -> (out (..., T, d), cache): pair (2i, 2i+1) of step t rotated by positions[t] * w_i."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim < 2:
        raise ValueError(f"rope_forward needs x of shape (..., T, d), got {x.shape}")
    T, d = x.shape[-2], x.shape[-1]
    positions = np.arange(T, dtype=np.int64) if positions is None else np.asarray(positions)
    if positions.shape != (T,):
        raise ValueError(f"rope_forward needs one position per step: x has T = {T} steps, positions {positions.shape}")
    c, s = rope_angles(positions, d)  # (T, d/2) each
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (..., T, d/2): the pair (2i, 2i + 1)
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out, {"cos": c, "sin": s, "positions": positions}


def rope_backward(dout, cache):
    """Returns dx (..., T, d): the rotation by -angle (the forward's transpose)."""
    dout = np.asarray(dout, dtype=np.float64)
    c, s = cache["cos"], cache["sin"]
    if dout.ndim < 2 or dout.shape[-2:] != (c.shape[0], 2 * c.shape[1]):
        raise ValueError(f"rope_backward needs dout of shape (..., {c.shape[0]}, {2 * c.shape[1]}), got {dout.shape}")
    d0, d1 = dout[..., 0::2], dout[..., 1::2]
    dx = np.empty_like(dout)
    dx[..., 0::2] = d0 * c + d1 * s  # inverts out[2i] = x[2i] c - x[2i+1] s and out[2i+1] = x[2i] s + x[2i+1] c
    dx[..., 1::2] = d1 * c - d0 * s
    return dx


def rope_attention_forward(q, k, v, valid_lens=None, q_positions=None, k_positions=None):
    """Scaled dot-product attention of RoPE-rotated queries and keys: q (B, ..., Q, D),
    k (B, ..., K, D), v (B, ..., K, V) -> (out (B, ..., Q, V), cache); cache["weights"] the weights."""
    q_rot, q_cache = rope_forward(q, q_positions)
    k_rot, k_cache = rope_forward(k, k_positions)
    out, attn = dot_product_attention_forward(q_rot, k_rot, v, valid_lens)
    return out, {"q_rope": q_cache, "k_rope": k_cache, "attn": attn, "weights": attn["weights"]}


def rope_attention_backward(dout, cache):
    """Returns (dq, dk, dv): attention's backward, then each rotation's."""
    dq_rot, dk_rot, dv = dot_product_attention_backward(dout, cache["attn"])  # inverts the attention of q_rot, k_rot, v
    return rope_backward(dq_rot, cache["q_rope"]), rope_backward(dk_rot, cache["k_rope"]), dv
