"""A linear (fully connected) layer, y = x W^T + b, W stored (out, in) as PyTorch (twin: linear.ts).

Shapes: x (..., I) any number of leading axes; W (O, I); b (O,) or None -> y (..., O).
The leading axes are flattened to M = prod(...) rows, so the product is one (M, I) x (I, O).
Order: each y[m, o] is the in-order sum over i = 0..I-1 of x[m, i] * W[o, i] from +0
(ops.matmul_nt); the bias is added after that sum, one rounded add.
Backward (dout (..., O)), every sum in index order from +0:
  dx[m, i] = sum over o of dout[m, o] * W[o, i]      ops.matmul(dout, W)
  dW[o, i] = sum over rows m of dout[m, o] * x[m, i]   ops.matmul(dout^T, x), rows row-major
  db[o]    = sum over rows m of dout[m, o]             ops.sum_last(dout^T)
"""

import numpy as np

from ..core.ops import matmul, matmul_nt, sum_last


def linear_forward(x, W, b=None):
    """Returns (out, cache): out (..., O); cache holds x and W (dW = dout^T x, dx = dout W)."""
    x = np.asarray(x, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or x.ndim < 1 or x.shape[-1] != W.shape[1]:
        raise ValueError(f"linear: x (..., {W.shape[-1] if W.ndim else '?'}) and W (out, in) needed, "
                         f"got x {x.shape} and W {W.shape}")
    O, I = W.shape
    if b is not None:
        b = np.asarray(b, dtype=np.float64)
        if b.shape != (O,):
            raise ValueError(f"linear: bias must have shape ({O},), got {b.shape}")
    x2 = x.reshape(-1, I)  # (M, I)
    y = matmul_nt(x2, W)  # (M, O)  in-order sum over i
    if b is not None:
        y = y + b  # (M, O)  bias after the sum
    out = y.reshape(x.shape[:-1] + (O,))  # (..., O)
    return out, {"x": x, "W": W, "has_bias": b is not None}


def linear_backward(dout, cache):
    """Returns (dx (..., I), dW (O, I), db (O,) or None when the forward had no bias)."""
    x, W = cache["x"], cache["W"]
    O, I = W.shape
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != x.shape[:-1] + (O,):
        raise ValueError(f"linear_backward: dout must have the forward's output shape "
                         f"{x.shape[:-1] + (O,)}, got {dout.shape}")
    dout2 = dout.reshape(-1, O)  # (M, O)
    x2 = x.reshape(-1, I)  # (M, I)
    # inverts: y = x W^T + b
    db = sum_last(dout2.T) if cache["has_bias"] else None  # (O,)   bias: one add per row
    dW = matmul(dout2.T, x2)  # (O, I)  in-order over rows m
    dx = matmul(dout2, W).reshape(x.shape)  # (..., I)  in-order over o
    return dx, dW, db
