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
The terms of a product are laid out so that NumPy's inner loop runs along the longest of the
batch, M and N axes (the elementwise products cost the same whatever the layout, but a short
inner loop costs NumPy several times more per element), and every block is written into one
scratch array of the module, reused from call to call (a fresh megabyte per product costs page
faults); the result is a fresh array, or a permuted view of one (_sum_terms). Where one operand
is constant along that inner loop (M or N innermost), the terms are written by np.einsum with no
summed index (_products): one rounded product each, in about half np.multiply's time there. A
product or sum of at most _SMALL terms (the gradient checks' d 8 models) writes them into one
fresh (K + 1, R) block straight from its operands, in a handful of NumPy calls.
Shape legend: ... leading (batch) axes, M rows, K summed axis, N columns; R output elements.
"""

import math

import numpy as np

_BLOCK = 1 << 20  # doubles in one block of terms (8 MiB: a step of the reversal model ran 4 % faster than with 2 MiB)
_SMALL = 1 << 12  # terms of a product small enough to be written in one fresh block, from the operands as they are
_LOOP_RATIO = 512  # sum_last: R >= _LOOP_RATIO * K, few long terms, where the plain loop over k is as fast
_scratch = np.empty(0)  # the blocks of terms, reused (the reference runs one case at a time, on one thread)


def _rows(n, width):
    """A (n, width) block of the module's scratch array, row 0 set to +0.0 (contents otherwise
    undefined: every call fills the rows it reduces)."""
    global _scratch
    if _scratch.size < n * width:
        _scratch = np.empty(max(n * width, _BLOCK + 2 * width))
    rows = _scratch[:n * width].reshape(n, width)
    rows[0] = 0.0
    return rows


def _sum_terms(fill, K, shape, axes=None):
    """The in-order sum over k = 0..K-1 of terms t_k of shape `shape`, from +0.0, as a fresh
    C-contiguous array, its axes then permuted by `axes` when given: a permuted view of that
    fresh array when one block held every term, else a copy (the rows are reused). The view is
    not copied to C order: an M-innermost product's (L, N, M) sums, seen as (L, M, N), are
    already k-major for a next product that takes them as its left operand (y = x W1^T, then
    y W2^T), which would otherwise copy them back.

    fill(k0, k1, out) writes t_k0 .. t_{k1-1} into out (k1 - k0,) + shape.
    """
    R = math.prod(shape)
    if R == 0 or K == 0:
        sums = np.zeros(shape)
        return sums if axes is None else sums.transpose(axes).copy()
    width = max(R, 2)  # one column would put the summed axis innermost (pairwise): pad to two
    c = max(1, min(K, _BLOCK // width))
    rows = _rows(c + 1, width)  # row 0: the running sum, from +0.0
    if width > R:
        rows[:, R:] = 0.0  # the pad column, never read back
    if c == K:  # one block (the common case): the reduction's result is already a fresh array
        fill(0, K, rows[1:K + 1, :R].reshape((K,) + shape))
        sums = np.add.reduce(rows[:K + 1], axis=0)[:R].reshape(shape)
        return sums if axes is None else sums.transpose(axes)  # a view of the fresh result
    for k0 in range(0, K, c):
        n = min(c, K - k0)
        fill(k0, k0 + n, rows[1:n + 1, :R].reshape((n,) + shape))
        rows[0] = np.add.reduce(rows[:n + 1], axis=0)  # row by row, in index order
    sums = rows[0, :R].reshape(shape)
    return (sums if axes is None else sums.transpose(axes)).copy()  # a copy: the rows are reused


def _small_block(K, shape):
    """A fresh (K + 1,) + shape block for a small sum (at least two outputs): row 0 +0.0, the
    caller writes term k into row k + 1. A small block costs less fresh than through the scratch
    array's bookkeeping, and the operands need no contiguous copies at this size."""
    terms = np.empty((K + 1,) + tuple(shape))
    terms[0] = 0.0
    return terms


def _sum_rows(terms):
    """The in-order sums of a block from _small_block: its rows added one after another."""
    return np.add.reduce(terms.reshape(terms.shape[0], -1), axis=0).reshape(terms.shape[1:])


def _products(spec, a, b, out):
    """out = the elementwise products of a and b, broadcast as the subscripts `spec` say, no index
    summed: every element one rounded product. np.einsum writes +0.0 + a * b, the same double
    but for a product of -0.0, which it writes +0.0; as a term of a sum from +0.0 the two are the
    same (+0.0 + -0.0 is +0.0), so every sum keeps its bits. Used where one operand is constant
    along the innermost axis (the M- and N-innermost layouts), where its loops take about half
    np.multiply's time, the more so with the operand that runs along that axis first (x * y and
    y * x are the same double); the sums are never left to np.einsum (its order is its own)."""
    np.einsum(spec, a, b, out=out, optimize=False)


def matmul(a, b):
    """a (..., M, K) @ b (..., K, N) -> (..., M, N), summing k = 0..K-1 in order."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: inner sizes differ: {a.shape} @ {b.shape}")
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if b.ndim == 2:  # one matrix b for every row: a's leading axes folded into M
        out_shape = a.shape[:-2] + (M, N)
        a3, b3 = a.reshape(1, math.prod(a.shape[:-1]), K), b.reshape(1, K, N)  # (1, M', K), (1, K, N)
    else:
        lead = a.shape[:-2]  # the common case, equal leading axes, needs no broadcast
        if b.shape[:-2] != lead:
            lead = np.broadcast_shapes(lead, b.shape[:-2])
        out_shape = lead + (M, N)
        L = math.prod(lead)
        a3 = (a if a.shape[:-2] == lead else np.broadcast_to(a, lead + (M, K))).reshape(L, M, K)  # (L, M, K)
        b3 = (b if b.shape[:-2] == lead else np.broadcast_to(b, lead + (K, N))).reshape(L, K, N)  # (L, K, N)
    L, M3 = a3.shape[0], a3.shape[1]
    R = L * M3 * N  # outputs
    if 2 <= R and K * R <= _SMALL:  # a small product: the operands as they are
        terms = _small_block(K, (L, M3, N))
        np.multiply(a3.transpose(2, 0, 1)[:, :, :, None], b3.transpose(1, 0, 2)[:, :, None, :], out=terms[1:])
        return _sum_rows(terms).reshape(out_shape)
    # term k is a[l, m, k] * b[l, k, n], the loop's product at step k (a first), written with
    # the longest of L, M and N innermost: (K, M, N, L), (K, L, M, N) or (K, L, N, M).
    if L > 1 and L >= max(M3, N):  # many small products (attention): the batch innermost
        a_k = np.ascontiguousarray(a3.transpose(2, 1, 0))  # (K, M, L)  a[l, m, k]
        b_k = np.ascontiguousarray(b3.transpose(1, 2, 0))  # (K, N, L)  b[l, k, n]

        def fill_b(k0, k1, out):
            np.multiply(a_k[k0:k1, :, None, :], b_k[k0:k1, None, :, :], out=out)
        sums = _sum_terms(fill_b, K, (M3, N, L), axes=(2, 0, 1))  # (L, M, N)
    else:
        a_k = np.ascontiguousarray(a3.transpose(2, 0, 1))  # (K, L, M)  a[l, m, k]
        b_k = np.ascontiguousarray(b3.transpose(1, 0, 2))  # (K, L, N)  b[l, k, n]
        if N >= M3:
            def fill(k0, k1, out):
                _products("kln,klm->klmn", b_k[k0:k1], a_k[k0:k1], out)  # b * a: the same product
            sums = _sum_terms(fill, K, (L, M3, N))  # (L, M, N)
        else:
            def fill_t(k0, k1, out):
                _products("klm,kln->klnm", a_k[k0:k1], b_k[k0:k1], out)
            sums = _sum_terms(fill_t, K, (L, N, M3), axes=(0, 2, 1))  # (L, M, N)
    return sums.reshape(out_shape)


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
    K, R = x.shape[-1], math.prod(x.shape[:-1])
    if R >= _LOOP_RATIO * K:  # few long terms: the plain loop
        acc = np.zeros(x.shape[:-1])
        for k in range(K):
            acc += x[..., k]
        return acc
    x_k = x.transpose((x.ndim - 1,) + tuple(range(x.ndim - 1)))  # (K, ...)  term k: x[..., k]
    if 2 <= R and K * R <= _SMALL:
        terms = _small_block(K, x.shape[:-1])
        terms[1:] = x_k
        return _sum_rows(terms)
    return _sum_terms(lambda k0, k1, out: np.copyto(out, x_k[k0:k1]), K, x.shape[:-1])


def mean_last(x):
    """In-order sum over the last axis divided by its length: (..., K) -> (...)."""
    x = np.asarray(x, dtype=np.float64)
    return sum_last(x) / x.shape[-1]
