"""Layer normalisation over the last axis, biased variance (twin: layerNorm.ts).

Shapes: x (..., d); gamma (d,); beta (d,) -> out (..., d). Per row of d features:
  mean = (in-order sum of x) / d
  xc   = x - mean
  var  = (in-order sum of xc * xc) / d          biased, as nn.LayerNorm
  rstd = 1 / sqrt(var + eps)                     eps = 1e-5
  xhat = xc * rstd
  out  = xhat * gamma + beta                     i.e. ((x - mean) * rstd) * gamma + beta
A constant row has var 0 and gives xhat = 0, out = beta. d = 1 is such a row.
"""

import numpy as np

from .ops import sum_last

EPS = 1e-5


def layer_norm_forward(x, gamma, beta, eps=EPS):
    """Returns (out, cache): cache holds mean, rstd (...,), xhat (..., d) and gamma."""
    x = np.asarray(x, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64)
    d = x.shape[-1]
    if gamma.shape != (d,) or beta.shape != (d,):
        raise ValueError(f"layer_norm: gamma and beta must have shape ({d},), got {gamma.shape} and {beta.shape}")
    mean = sum_last(x) / d  # (...)
    xc = x - mean[..., None]  # (..., d)
    var = sum_last(xc * xc) / d  # (...)
    rstd = 1.0 / np.sqrt(var + eps)  # (...)
    xhat = xc * rstd[..., None]  # (..., d)
    out = xhat * gamma + beta  # (..., d)
    return out, {"mean": mean, "rstd": rstd, "xhat": xhat, "gamma": gamma}
