"""Reductions in one documented order, shared by every module (twin: port_ts/src/core/ops.ts).

Every sum in the reference runs in index order from +0.0, one rounded add per term, exactly as
the port's naive loops do: acc = 0; for k in 0..K-1: acc = acc + x[k]. NumPy's own reductions
along a contiguous axis (np.sum's pairwise blocks) and BLAS matmul sum in other orders, so they
are never used on a summed axis. What is used instead (docs/performance.md):

    rows = [0, p_0, p_1, ..., p_{K-1}]      (K + 1, R) C-contiguous, term k in row k + 1
    np.add.reduce(rows, axis=0)              -> 0 + p_0 + p_1 + ... + p_{K-1}, element by element

A reduction over the OUTERMOST axis of a C-contiguous array with at least two columns walks the
rows one after another and adds each row into the running row elementwise (the pairwise
summation only runs when the summed axis is the innermost loop); so every output element is the
in-order sum from +0, bit for bit the loop's. The explicit zero row makes the start +0.0 whatever
NumPy takes as the first value, a single column is padded to two (one column would make the
summed axis the inner loop), and K is cut into blocks of at most _BLOCK terms x columns whose
row 0 carries the running sum, so memory stays bounded. tests/test_ops.py checks all this
against the plain loop, bit for bit, on data where np.sum's order gives other bits.
Shape legend: ... leading (batch) axes, M rows, K summed axis, N columns; R output elements.
"""

import math

import numpy as np

_BLOCK = 1 << 17  # doubles in one block of terms (1 MiB)
_LOOP_RATIO = 512  # R >= _LOOP_RATIO * K: few long terms, where the plain loop over k is as fast


def _sum_terms(fill, K, shape):
    """The in-order sum over k = 0..K-1 of terms t_k of shape `shape`, from +0.0.

    fill(k0, k1, out) writes t_k0 .. t_{k1-1} into out (k1 - k0,) + shape.
    """
    R = math.prod(shape)
    if R == 0 or K == 0:
        return np.zeros(shape)
    width = max(R, 2)  # one column would put the summed axis innermost (pairwise): pad to two
    c = max(1, min(K, _BLOCK // width))
    rows = np.zeros((c + 1, width))  # row 0: the running sum, from +0.0
    for k0 in range(0, K, c):
        n = min(c, K - k0)
        fill(k0, k0 + n, rows[1:n + 1, :R].reshape((n,) + shape))
        rows[0] = np.add.reduce(rows[:n + 1], axis=0)  # row by row, in index order
    return rows[0, :R].reshape(shape).copy()


def matmul(a, b):
    """a (..., M, K) @ b (..., K, N) -> (..., M, N), summing k = 0..K-1 in order."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: inner sizes differ: {a.shape} @ {b.shape}")
    lead = a.shape[:-2]  # the common case, equal leading axes or a single matrix b, needs no broadcast
    if b.ndim > 2 and b.shape[:-2] != lead:
        lead = np.broadcast_shapes(lead, b.shape[:-2])
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if math.prod(lead) * M * N >= _LOOP_RATIO * K:  # few long terms: the plain loop
        acc = np.zeros(lead + (M, N))
        for k in range(K):
            acc += a[..., :, k:k + 1] * b[..., k:k + 1, :]
        return acc
    if b.ndim == 2 and a.ndim > 2:  # one matrix b for every row: fold a's leading axes into M
        return matmul(a.reshape(-1, K), b).reshape(lead + (M, N))
    a = a.reshape((1,) * (len(lead) + 2 - a.ndim) + a.shape)  # the same rank, so k lines up
    b = b.reshape((1,) * (len(lead) + 2 - b.ndim) + b.shape)
    n = a.ndim  # transpose with the axes spelled out: np.moveaxis costs more than the move here
    a_k = np.ascontiguousarray(a.transpose((n - 1,) + tuple(range(n - 1))))  # (K, ..., M)  a[..., m, k]
    b_k = np.ascontiguousarray(b.transpose((n - 2,) + tuple(range(n - 2)) + (n - 1,)))  # (K, ..., N)  b[..., k, n]
    # term k is a[..., :, k:k+1] * b[..., k:k+1, :], the loop's product at step k (a first). The
    # terms are laid out with the longer of M and N innermost: (K, ..., M, N) or (K, ..., N, M).
    if N >= M:
        def fill(k0, k1, out):
            np.multiply(a_k[k0:k1, ..., :, None], b_k[k0:k1, ..., None, :], out=out)
        return _sum_terms(fill, K, lead + (M, N))

    def fill_t(k0, k1, out):
        np.multiply(a_k[k0:k1, ..., None, :], b_k[k0:k1, ..., :, None], out=out)
    return np.ascontiguousarray(np.swapaxes(_sum_terms(fill_t, K, lead + (N, M)), -1, -2))


def matmul_nt(a, b):
    """a (..., M, K) @ b(..., N, K)^T -> (..., M, N): the product with a row-major weight
    (out, in), as y = x W^T; same in-order sum over k."""
    return matmul(a, np.swapaxes(np.asarray(b, dtype=np.float64), -1, -2))


def matmul_tn(a, b):
    """a(..., K, M)^T @ b (..., K, N) -> (..., M, N): the sum over rows k = 0..K-1 in order,
    as dW = dout^T x (twin: matmulTn)."""
    return matmul(np.swapaxes(np.asarray(a, dtype=np.float64), -1, -2), b)


def weight_grad(dy, x):
    """dW of y = x W^T: dy (..., out), x (..., in) -> (out, in), summed over every leading row
    in row-major order (twin: weightGrad)."""
    dy = np.asarray(dy, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    return matmul_tn(dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1]))


def sum_last(x):
    """Sum over the last axis in index order: (..., K) -> (...)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim < 1:
        raise ValueError("sum_last: needs at least one axis")
    if math.prod(x.shape[:-1]) >= _LOOP_RATIO * x.shape[-1]:  # few long terms: the plain loop
        acc = np.zeros(x.shape[:-1])
        for k in range(x.shape[-1]):
            acc += x[..., k]
        return acc
    x_k = x.transpose((x.ndim - 1,) + tuple(range(x.ndim - 1)))  # (K, ...)  term k: x[..., k]
    return _sum_terms(lambda k0, k1, out: np.copyto(out, x_k[k0:k1]), x.shape[-1], x.shape[:-1])


def mean_last(x):
    """In-order sum over the last axis divided by its length: (..., K) -> (...)."""
    x = np.asarray(x, dtype=np.float64)
    return sum_last(x) / x.shape[-1]
