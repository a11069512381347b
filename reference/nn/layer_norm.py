"""Layer normalisation over the last axis, biased variance (twin: layerNorm.ts).

Shapes: x (..., d); gamma (d,); beta (d,) -> out (..., d). Per row of d features:
  mean = (in-order sum of x) / d
  xc   = x - mean
  var  = (in-order sum of xc * xc) / d          biased, as nn.LayerNorm
  rstd = 1 / sqrt(var + eps)                     eps = 1e-5
  xhat = xc * rstd
  out  = xhat * gamma + beta                     i.e. ((x - mean) * rstd) * gamma + beta
A constant row has var 0 and gives xhat = 0, out = beta. d = 1 is such a row.
Backward (dout (..., d)), rows r over the flattened leading axes, sums in index order from +0:
  dbeta[k]  = sum over r of dout[r, k]
  dgamma[k] = sum over r of dout[r, k] * xhat[r, k]
  dxhat     = dout * gamma
  dx        = ((dxhat - mean(dxhat)) - xhat * mean(dxhat * xhat)) * rstd
where mean() is the in-order sum over the row's d features divided by d. Derivation: xhat is
(x - mean) * rstd with rstd = (var + eps)^(-1/2); d xhat_j / d x_i = rstd (delta_ij - 1/d
- xhat_i xhat_j / d), contracted with dxhat. Exact for constant rows too (xhat = 0 there).
"""

import numpy as np

from ..core.ops import mean_last, sum_last

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


def layer_norm_backward(dout, cache):
    """Returns (dx (..., d), dgamma (d,), dbeta (d,))."""
    xhat, rstd, gamma = cache["xhat"], cache["rstd"], cache["gamma"]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != xhat.shape:
        raise ValueError(f"layer_norm_backward: dout must have the forward's shape {xhat.shape}, got {dout.shape}")
    d = xhat.shape[-1]
    # inverts: out = xhat * gamma + beta
    dbeta = sum_last(dout.reshape(-1, d).T)  # (d,)  in-order over rows
    dgamma = sum_last((dout * xhat).reshape(-1, d).T)  # (d,)  in-order over rows
    dxhat = dout * gamma  # (..., d)
    # inverts: xhat = xc * rstd, rstd = 1 / sqrt(var + eps), xc = x - mean
    dxhat_mean = mean_last(dxhat)  # (...)
    dxhat_xhat_mean = mean_last(dxhat * xhat)  # (...)
    dx = ((dxhat - dxhat_mean[..., None]) - xhat * dxhat_xhat_mean[..., None]) * rstd[..., None]  # (..., d)
    return dx, dgamma, dbeta
