"""Position-wise feed-forward network, Linear -> ReLU -> Linear (twin: ffn.ts).

Shapes: x (..., d); params W1 (F, d), b1 (F,), W2 (d, F), b2 (d,) -> out (..., d).
  h_pre = x W1^T + b1          (..., F)
  h     = relu(h_pre)          (..., F)  h_pre where h_pre > 0, else +0
  out   = h W2^T + b2          (..., d)
No dropout inside, as the book's PositionWiseFFN.
Backward walks it in reverse: linear_backward through W2, b2; the ReLU passes dh where
h_pre > 0 and +0 elsewhere (h_pre == 0 gets 0, as PyTorch's threshold_backward); then
linear_backward through W1, b1.
"""

import numpy as np

from .linear import linear_backward, linear_forward


def relu(x):
    """x where x > 0, else +0.0 (so -0.0 gives +0.0): the same rule in both engines."""
    return np.where(x > 0.0, x, 0.0)


def relu_backward(dout, x):
    """dout where the forward's input x > 0, else +0.0."""
    return np.where(x > 0.0, dout, 0.0)


def ffn_forward(x, params):
    """Returns (out, cache): cache holds the two linear caches and h_pre, h for the backward."""
    h_pre, lin1 = linear_forward(x, params["W1"], params["b1"])  # (..., F)
    h = relu(h_pre)  # (..., F)
    out, lin2 = linear_forward(h, params["W2"], params["b2"])  # (..., d)
    return out, {"lin1": lin1, "h_pre": h_pre, "h": h, "lin2": lin2}


def ffn_backward(dout, cache):
    """Returns (dx (..., d), {"W1", "b1", "W2", "b2"})."""
    dh, dW2, db2 = linear_backward(dout, cache["lin2"])  # inverts: out = h W2^T + b2
    dh_pre = relu_backward(dh, cache["h_pre"])  # inverts: h = relu(h_pre)
    dx, dW1, db1 = linear_backward(dh_pre, cache["lin1"])  # inverts: h_pre = x W1^T + b1
    return dx, {"W1": dW1, "b1": db1, "W2": dW2, "b2": db2}
