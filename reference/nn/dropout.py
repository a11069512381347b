"""Inverted dropout with a keep mask from the shared generator (twin: dropout.ts).

Shapes: x (...) -> out (...), mask (...) of 0.0 / 1.0.
  p == 0      out = x (a copy, bit for bit, -0.0 included); no draw; mask None
  0 < p < 1   mask = rng.keep_mask(x.shape, p)   (1 where u >= p: one draw per element, row-major)
              out  = x * (mask / (1 - p))       the scale is rounded once, then one product,
                                                 as PyTorch's x * (bernoulli(1 - p) / (1 - p))
A dropped element of a negative x gives -0.0.
Backward: the same mask and the same scale expression, dx = dout * (mask / (1 - p));
p == 0 gives a copy of dout.
"""

import numpy as np


def check_p(p):
    if not (isinstance(p, (int, float, np.floating)) and 0.0 <= p < 1.0):
        raise ValueError(f"dropout: p must be a number in [0, 1), got {p!r}")


def dropout_forward(x, p, rng=None):
    """Returns (out, cache): cache["mask"] the keep mask (None when p = 0) and the scale."""
    check_p(p)
    x = np.asarray(x, dtype=np.float64)
    if p == 0:
        return x.copy(), {"mask": None, "p": p}
    if rng is None:
        raise ValueError(f"dropout: p = {p} needs a generator to draw its mask, got rng=None")
    mask = rng.keep_mask(x.shape, p)  # (...)
    out = x * (mask / (1.0 - p))  # (...)
    return out, {"mask": mask, "p": p}


def dropout_backward(dout, cache):
    """Returns dx (...): dout through the forward's keep mask, scaled as the forward."""
    mask, p = cache["mask"], cache["p"]
    dout = np.asarray(dout, dtype=np.float64)
    if mask is None:  # inverts: out = x (p = 0)
        return dout.copy()
    if dout.shape != mask.shape:
        raise ValueError(f"dropout_backward: dout must have the mask's shape {mask.shape}, got {dout.shape}")
    return dout * (mask / (1.0 - p))  # inverts: out = x * (mask / (1 - p))
