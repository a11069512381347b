"""Act 3: why attention divides q.k by sqrt(d) (twin: port_ts/src/nn/scoreScaling.ts).

For each model dim d in the list, in list order:
    q, k       ~ N(0, 1), each (N, d)       drawn q first, then k
    dots[n]    = sum_f q[n, f] k[n, f]       (N,)   in-order over the d features
    scaled[n]  = dots[n] / sqrt(d)           (N,)
    var_raw    = biased variance of dots     ()     Var(q.k) = d for independent unit normals
    var_scaled = biased variance of scaled   ()     stays near 1 whatever d is

Shape legend: N samples (query-key pairs), d model dim (features), S how many dims are tried.
The biased variance is the in-order mean of (x - m) * (x - m), m the in-order mean; no np.var.
Without the scale, large d pushes scores far apart and the softmax saturates.
"""

import math

import numpy as np

from ..core.ops import mean_last, sum_last


def biased_variance(x):
    """(m, v): the in-order mean of x (1-D) and the in-order mean of its squared deviations."""
    x = np.asarray(x, dtype=np.float64)
    m = mean_last(x)
    dev = x - m
    return m, mean_last(dev * dev)


def score_scaling(dims, n, rng):
    """Returns a dict of (S,) arrays, one entry per d in dims: q_mean, k_mean (in-order means of
    all N*d draws, a fingerprint of the inputs), dots_mean, var_raw, var_scaled."""
    names = ("q_mean", "k_mean", "dots_mean", "var_raw", "var_scaled")
    stats = {name: np.zeros(len(dims)) for name in names}
    for s, d in enumerate(dims):
        if not (isinstance(d, (int, np.integer)) and d > 0):
            raise ValueError(f"score_scaling needs positive integer dims, got {d!r} in {list(dims)}")
        q = rng.normal((n, d))  # (N, d)
        k = rng.normal((n, d))  # (N, d)  drawn after q
        dots = sum_last(q * k)  # (N,)
        scaled = dots / math.sqrt(d)  # (N,)
        stats["q_mean"][s] = mean_last(q.reshape(-1))
        stats["k_mean"][s] = mean_last(k.reshape(-1))
        stats["dots_mean"][s], stats["var_raw"][s] = biased_variance(dots)
        stats["var_scaled"][s] = biased_variance(scaled)[1]
    return stats
