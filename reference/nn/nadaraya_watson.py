"""Nadaraya-Watson kernel regression, the book's attention-pooling lab (twin: nadarayaWatson.ts).

    u        = (x_train[i] - x_query[j]) / sigma      (N, Q)   distance of key i to query j
    K        = kernel(u)                              (N, Q)
    W[:, j]  = K[:, j] / sum_i K[i, j]                (N, Q)   each column sums to 1
    y_hat[j] = sum_i y_train[i] W[i, j]               (Q,)
    mae      = mean_j |y_hat[j] - y_true[j]|          ()

Shape legend: N training points (keys and values), Q queries (validation points).
Kernels on u, as the book codes them: gaussian exp(-u^2/2); boxcar 1 if |u| < 1 else 0 (strict);
constant 1; "epanechikov" max(1 - |u|, 0), which is triangular, not 3/4 (1 - u^2).
Both sums are in index order over the training points. A query with no key in the kernel's
reach (boxcar or epanechikov with a small sigma) has a column sum of 0: as in the book, its
weights are 0/0 = NaN and so is its estimate; the error over such queries is NaN too.

The lab's data: f(x) = 2 sin(x) + x; x_train = sort(U[0, 5), 40 draws), then 40 normal draws of
noise, y_train = f(x_train) + noise; x_val[j] = j / 10 for j = 0..49 (no arange drift);
y_true = f(x_val), noise-free.
"""

import numpy as np

from ..core.mathlib import exp, sin
from ..core.ops import matmul, mean_last, sum_last


def gaussian(u):
    return exp(-(u * u) / 2.0)


def boxcar(u):
    return np.where(np.abs(u) < 1.0, 1.0, 0.0)


def constant(u):
    return np.ones_like(u)


def epanechikov(u):
    return np.maximum(1.0 - np.abs(u), 0.0)


KERNELS = {"gaussian": gaussian, "boxcar": boxcar, "constant": constant, "epanechikov": epanechikov}


def target(x):
    """f(x) = 2 sin(x) + x."""
    return 2.0 * sin(x) + x


def regression_data(rng, n_train=40, n_val=50):
    """Draws x_train (sorted uniforms on [0, 5)) then the noise (normals); returns a dict of
    x_train, y_train (N,) and x_val, y_true (Q,)."""
    x_train = np.sort(rng.uniform(n_train, 0.0, 5.0))  # (N,)  draws 1..N
    noise = rng.normal(n_train)  # (N,)  drawn after the positions
    x_val = np.arange(n_val, dtype=np.float64) / 10.0  # (Q,)  j / 10, one division each
    return {"x_train": x_train, "y_train": target(x_train) + noise,
            "x_val": x_val, "y_true": target(x_val)}


def nadaraya_watson(x_train, y_train, x_query, kernel="gaussian", sigma=1.0):
    """The estimate at each query: (y_hat (Q,), weights (N, Q))."""
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; expected one of {sorted(KERNELS)}")
    if not sigma > 0:
        raise ValueError(f"the kernel width sigma must be positive, got {sigma}")
    x_train = np.asarray(x_train, dtype=np.float64)
    y_train = np.asarray(y_train, dtype=np.float64)
    x_query = np.asarray(x_query, dtype=np.float64)
    u = (x_train[:, None] - x_query[None, :]) / sigma  # (N, Q)
    K = KERNELS[kernel](u)  # (N, Q)
    col = sum_last(K.T)  # (Q,)  in-order over the training points
    with np.errstate(invalid="ignore"):  # a 0 column sum gives NaN weights, as the book
        W = K / col[None, :]  # (N, Q)
    y_hat = matmul(y_train[None, :], W)[0]  # (Q,)  in-order over the training points
    return y_hat, W


def mean_abs_error(y_hat, y_true):
    """In-order mean of |y_hat - y_true|."""
    return mean_last(np.abs(np.asarray(y_hat) - np.asarray(y_true)))
