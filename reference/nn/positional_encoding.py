"""Sinusoidal positional encoding (twin: port_ts/src/nn/positionalEncoding.ts).

    div_j   = 10000 ** ((2j) / d)                 (d/2,)   one pow per frequency, j = 0..d/2-1
    angle   = i / div_j                           (L, d/2) position i times w_j = 1 / div_j
    P[i, 2j]   = sin(angle[i, j])                 (L, d)   even features: sine
    P[i, 2j+1] = cos(angle[i, j])                 (L, d)   odd features: cosine
    out     = dropout(x + P[:T])                  (B, T, d)
    sim     = (P P^T)[i, j] / (|P_i| |P_j|)       (L, L)   cosine similarity of two positions

Shape legend: B batch, T steps, L table length (positions), d model dim (even).
The expressions above are written the same way in both engines: the exponent (2j) / d is one
rounded division, div_j one mathlib pow_ln (exp of (2j) / d times ln 10000, held as a double
pair; within 1 ulp), and the angle one division, as in the book's code (but in float64, not float32). Rows of the table do
not depend on its length, so x + P[:T] uses a table of exactly T rows. Dot products and norms in
position_similarity are in-order sums over the d features.
Backward: the table is a constant, so dx = d summed = dropout_backward(dout) (a copy at p = 0).
"""

import functools

import numpy as np

from .dropout import dropout_backward, dropout_forward
from ..core.mathlib import cos, pow_ln, sin
from ..core.ops import matmul_nt, sum_last

BASE = 10000.0
LN_BASE = (9.210340371976184, -8.683024893528997e-16)  # ln 10000 = hi + lo: the nearest double, then the rest's


def sinusoidal_table(max_len, d):
    """P (max_len, d) in float64: sin on even features, cos on odd ones."""
    if d % 2 != 0 or d <= 0:
        raise ValueError(f"sinusoidal_table needs an even, positive model dim d (a sin and a cos "
                         f"per frequency), got d = {d}")
    if max_len < 0:
        raise ValueError(f"sinusoidal_table needs max_len >= 0, got {max_len}")
    exponent = np.arange(0, d, 2, dtype=np.float64) / d  # (d/2,)  (2j) / d
    div = pow_ln(LN_BASE, exponent)  # (d/2,)  10000 ** ((2j) / d) = 1 / w_j
    angle = np.arange(max_len, dtype=np.float64)[:, None] / div[None, :]  # (L, d/2)
    P = np.empty((max_len, d))
    P[:, 0::2] = sin(angle)
    P[:, 1::2] = cos(angle)
    return P


@functools.lru_cache(maxsize=32)
def _cached_table(max_len, d):
    """sinusoidal_table(max_len, d), computed once per shape and read-only: a model's forward
    adds the same rows at every call (a gradient check makes thousands of calls)."""
    P = sinusoidal_table(max_len, d)
    P.flags.writeable = False
    return P


def positional_encoding_forward(x, dropout_p=0.0, rng=None):
    """x (B, T, d) -> (out (B, T, d), cache): rows 0..T-1 of the table added, then dropout."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"positional_encoding_forward needs x of shape (B, T, d), got {x.shape}")
    T, d = x.shape[1], x.shape[2]
    P = _cached_table(T, d)  # (T, d)
    summed = x + P[None, :, :]  # (B, T, d)
    out, dropout_cache = dropout_forward(summed, dropout_p, rng)  # backward: d summed = d out via dropout
    return out, {"dropout": dropout_cache, "mask": dropout_cache["mask"]}


def positional_encoding_backward(dout, cache):
    """Returns dx (B, T, d): the gradient passes the addition unchanged, through the dropout."""
    dout = np.asarray(dout, dtype=np.float64)
    if dout.ndim != 3:
        raise ValueError(f"positional_encoding_backward needs dout of shape (B, T, d), got {dout.shape}")
    return dropout_backward(dout, cache["dropout"])  # inverts: out = dropout(x + P[:T])


def position_similarity(P):
    """Cosine similarity of every pair of rows of P (L, d) -> (L, L)."""
    P = np.asarray(P, dtype=np.float64)
    dots = matmul_nt(P, P)  # (L, L)  in-order over d
    norms = np.sqrt(sum_last(P * P))  # (L,)    in-order over d
    return dots / (norms[:, None] * norms[None, :])
