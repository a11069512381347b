"""Reductions in one documented order, shared by every module (twin: port_ts/src/ops.ts).

Every sum in the reference runs in index order from +0.0, one rounded add per term, exactly as
the port's naive loops do: acc = 0; for k in 0..K-1: acc = acc + x[k]. NumPy's own reductions
(np.sum's pairwise blocks, BLAS matmul) would sum in other orders; these helpers vectorise over
the other axes and loop over the summed axis, so the two engines round identically.
Shape legend: ... leading (batch) axes, M rows, K summed axis, N columns.
"""

import numpy as np


def matmul(a, b):
    """a (..., M, K) @ b (..., K, N) -> (..., M, N), summing k = 0..K-1 in order."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: inner sizes differ: {a.shape} @ {b.shape}")
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    acc = np.zeros(lead + (a.shape[-2], b.shape[-1]))
    for k in range(a.shape[-1]):
        acc += a[..., :, k:k + 1] * b[..., k:k + 1, :]
    return acc


def matmul_nt(a, b):
    """a (..., M, K) @ b(..., N, K)^T -> (..., M, N): the product with a row-major weight
    (out, in), as y = x W^T; same in-order sum over k."""
    return matmul(a, np.swapaxes(np.asarray(b, dtype=np.float64), -1, -2))


def sum_last(x):
    """Sum over the last axis in index order: (..., K) -> (...)."""
    x = np.asarray(x, dtype=np.float64)
    acc = np.zeros(x.shape[:-1])
    for k in range(x.shape[-1]):
        acc += x[..., k]
    return acc


def mean_last(x):
    """In-order sum over the last axis divided by its length: (..., K) -> (...)."""
    x = np.asarray(x, dtype=np.float64)
    return sum_last(x) / x.shape[-1]
