"""Tiled attention with an online softmax: FlashAttention's forward, and its backward from the
stored log-sum-exp (twin: port_ts/src/nn/tiledAttention.ts; docs/tiled_attention.md).

The scores of a query block are never stored whole: the keys arrive a tile at a time, and each
query row keeps a running maximum m, a running sum l and a running output o, rescaled whenever
the maximum moves. Per query block [i0, i1) (N rows of the flattened leading axes):

    m = -inf, l = 0, o = 0                                   (N, b), (N, b), (N, b, V)
    for each key tile [j0, j1) that the block's band reaches (key_tiles):
        s     = q_blk k_tile^T / sqrt(D)                     (N, b, t)   -inf where band_keep is False
        m_new = max(m, max_j s)                              (N, b)
        alpha = exp(m - m_new)   (0 while m = -inf)          (N, b)      the rescale of what came before
        p     = exp(s - m_new)   (0 where masked)            (N, b, t)
        l     = l * alpha + sum_j p                          (N, b)      in key order from +0
        o     = o * alpha + p v_tile                         (N, b, V)
        m     = m_new
    out = o / l;  lse = m + log(l)                           (N, b, V), (N, b)

Backward (FlashAttention-2's), from the stored lse, with Dv = sum over V of dout * out (N, Q):
    for each query block, each key tile it reaches:
        p   = exp(s - lse)      (0 where masked)   the softmax weights, recomputed
        dv_tile += p^T dout_blk;   dp = dout_blk v_tile^T;   ds = p * (dp - Dv)
        dq_blk  += (ds / sqrt(D)) k_tile;   dk_tile += (ds / sqrt(D))^T q_blk
dq sums its key tiles in order, dk and dv their query blocks in order.

The same maths as nn/dot_product_attention.py (causal: 2-D valid lengths q + 1) and
nn/sliding_window.py, rounded differently: the softmax is normalised once at the end (o / l,
not weights then products) and the sums run tile by tile, so the result is within a few ULP of
the plain form, not bit-identical to it (the cases check both). Both engines compute this one
the same way, bit for bit.

Masks (band_keep): causal keeps key k for query q when k <= q (needs Q = K); a window w also
requires q - k < w (w keys, the query's own included). Tiles that no row of a query block can
reach are skipped; that changes nothing, since a masked key adds +0 to every sum.
Shape legend: ... leading axes (batch, heads), N their product, Q queries, K keys, D query/key
dim, V value dim, b rows of a query block, t keys of a tile (both at most `tile`).
"""

import math

import numpy as np

from ..core.mathlib import exp, log
from ..core.ops import matmul, matmul_nt, sum_last
from .dot_product_attention import transpose_last


def band_keep(rows, cols, causal, window):
    """bool (len(rows), len(cols)) or None (every key kept): causal: col <= row; a window w:
    row - col < w as well."""
    if not causal and window is None:
        return None
    r, c = np.asarray(rows)[:, None], np.asarray(cols)[None, :]
    keep = c <= r if causal else np.ones((r.shape[0], c.shape[1]), dtype=bool)
    if window is not None:
        keep = keep & (r - c < window)
    return keep


def key_tiles(i0, i1, K, tile, causal, window):
    """The key tiles [j0, j1) that some query of the block [i0, i1) reaches, in key order."""
    lo = 0 if window is None else max(0, i0 - window + 1)  # the lowest key of the block's first row
    hi = i1 if causal else K  # past the highest key of its last row
    return [(j0, min(j0 + tile, K)) for j0 in range((lo // tile) * tile, hi, tile)]


def _check(q, k, v, tile, causal, window):
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.shape[:-2] != k.shape[:-2]:
        raise ValueError(f"tiled_attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit "
                         "(need q (..., Q, D), k (..., K, D), v (..., K, V))")
    if not (isinstance(tile, int) and tile >= 1):
        raise ValueError(f"tiled_attention: tile must be a positive integer, got {tile!r}")
    if (causal or window is not None) and q.shape[-2] != k.shape[-2]:
        raise ValueError(f"tiled_attention: a causal or windowed mask needs as many queries as keys, "
                         f"got Q = {q.shape[-2]}, K = {k.shape[-2]}")
    if window is not None and not (causal and isinstance(window, int) and window >= 1):
        raise ValueError(f"tiled_attention: a window must be a positive integer on a causal mask, got {window!r}")


def tiled_attention_forward(q, k, v, tile, causal=False, window=None):
    """q (..., Q, D), k (..., K, D), v (..., K, V) -> (out (..., Q, V), cache); cache["lse"] (..., Q)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    _check(q, k, v, tile, causal, window)
    lead, Q, K, D, Vd = q.shape[:-2], q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    q3, k3, v3 = q.reshape(-1, Q, D), k.reshape(-1, K, D), v.reshape(-1, K, Vd)  # (N, ., .)
    N = q3.shape[0]
    out = np.zeros((N, Q, Vd))
    lse = np.zeros((N, Q))
    scale = math.sqrt(D)
    for i0 in range(0, Q, tile):
        i1 = min(i0 + tile, Q)
        qb = q3[:, i0:i1]  # (N, b, D)
        m = np.full((N, i1 - i0), -np.inf)  # (N, b)
        l = np.zeros((N, i1 - i0))  # (N, b)
        o = np.zeros((N, i1 - i0, Vd))  # (N, b, V)
        for j0, j1 in key_tiles(i0, i1, K, tile, causal, window):
            s = matmul_nt(qb, k3[:, j0:j1]) / scale  # (N, b, t)
            keep = band_keep(range(i0, i1), range(j0, j1), causal, window)  # (b, t) | None
            if keep is not None:
                s = np.where(keep, s, -np.inf)
            m_new = np.maximum(m, np.max(s, axis=-1))  # (N, b)
            with np.errstate(invalid="ignore"):  # the branches np.where drops may be inf - inf
                alpha = exp(np.where(m > -np.inf, m - m_new, -np.inf))  # (N, b): 0 while m = -inf
                p = exp(np.where(s > -np.inf, s - m_new[..., None], -np.inf))  # (N, b, t): 0 where masked
            l = l * alpha + sum_last(p)  # (N, b)
            o = o * alpha[..., None] + matmul(p, v3[:, j0:j1])  # (N, b, V)
            m = m_new
        out[:, i0:i1] = o / l[..., None]
        lse[:, i0:i1] = m + log(l)
    out, lse = out.reshape(lead + (Q, Vd)), lse.reshape(lead + (Q,))
    return out, {"q": q, "k": k, "v": v, "out": out, "lse": lse, "tile": tile, "causal": causal, "window": window}


def tiled_attention_backward(dout, cache):
    """dout (..., Q, V) -> (dq (..., Q, D), dk (..., K, D), dv (..., K, V))."""
    q, k, v, out, lse = cache["q"], cache["k"], cache["v"], cache["out"], cache["lse"]
    tile, causal, window = cache["tile"], cache["causal"], cache["window"]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != out.shape:
        raise ValueError(f"tiled_attention_backward: dout must have the output's shape {out.shape}, got {dout.shape}")
    Q, K, D, Vd = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    q3, k3, v3 = q.reshape(-1, Q, D), k.reshape(-1, K, D), v.reshape(-1, K, Vd)
    do3, lse2 = dout.reshape(-1, Q, Vd), lse.reshape(-1, Q)
    N = q3.shape[0]
    dvec = sum_last(do3 * out.reshape(-1, Q, Vd))  # (N, Q): the row's sum of dout * out
    dq, dk, dv = np.zeros((N, Q, D)), np.zeros((N, K, D)), np.zeros((N, K, Vd))
    scale = math.sqrt(D)
    for i0 in range(0, Q, tile):
        i1 = min(i0 + tile, Q)
        qb, dob = q3[:, i0:i1], do3[:, i0:i1]  # (N, b, D), (N, b, V)
        for j0, j1 in key_tiles(i0, i1, K, tile, causal, window):
            # s = matmul_nt(qb, k3[:, j0:j1]) / scale, masked; p as the forward's, normalised by lse
            s = matmul_nt(qb, k3[:, j0:j1]) / scale  # (N, b, t)
            keep = band_keep(range(i0, i1), range(j0, j1), causal, window)
            if keep is not None:
                s = np.where(keep, s, -np.inf)
            with np.errstate(invalid="ignore"):
                p = exp(np.where(s > -np.inf, s - lse2[:, i0:i1, None], -np.inf))  # (N, b, t)
            # o = o * alpha + matmul(p, v3[:, j0:j1]): out = sum over tiles of p v
            dv[:, j0:j1] = dv[:, j0:j1] + matmul(transpose_last(p), dob)  # (N, t, V): sum over the block's rows
            dp = matmul_nt(dob, v3[:, j0:j1])  # (N, b, t): sum over V
            # p = exp(s - lse): the softmax's backward, p * (dp - sum_j dp_j p_j), that sum is Dv
            ds = p * (dp - dvec[:, i0:i1, None])  # (N, b, t)
            dqk = ds / scale  # inverts: s = (q k^T) / scale
            dq[:, i0:i1] = dq[:, i0:i1] + matmul(dqk, k3[:, j0:j1])  # (N, b, D): sum over the tile's keys
            dk[:, j0:j1] = dk[:, j0:j1] + matmul(transpose_last(dqk), qb)  # (N, t, D): sum over the block's rows
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
