"""The optimiser of the baked runs: the book's global-norm clipping and PyTorch's Adam
(twin: port_ts/src/runs/optim.ts; the contract is docs/training.md).

Parameters, gradients and Adam's moments are dicts of float64 arrays keyed by parameter name;
`names` fixes the order every loop walks them in (the model's parameter order).

Clipping (d2l's clip_gradients, not torch.nn.utils.clip_grad_norm_):
    n = sqrt(sum over names, then over row-major elements, of g * g)    one in-order sum from +0
    if n > theta:  s = theta / n (computed once);  g <- g * s  for every gradient
    otherwise nothing changes; n (before clipping) is returned
Adam, PyTorch's update (beta1 = 0.9, beta2 = 0.999, eps = 1e-8, no weight decay), step t:
    t <- t + 1;  b1t <- b1t * beta1;  b2t <- b2t * beta2        running products, never pow
    m <- beta1 * m + (1 - beta1) * g
    v <- beta2 * v + (1 - beta2) * (g * g)
    bc1 = 1 - b1t;  bc2 = 1 - b2t;  step_size = lr / bc1
    denom = sqrt(v) / sqrt(bc2) + eps
    theta <- theta + (-step_size) * (m / denom)                 addcdiv_'s order
The state is {"t", "b1t", "b2t", "m": {name: array}, "v": {name: array}}.
"""

import math

import numpy as np

BETA1 = 0.9
BETA2 = 0.999
EPS = 1e-8


def _sum_in_order(x):
    """x[0] + x[1] + ... from +0, one rounded add per term: np.add.accumulate is a left fold
    (each partial sum is the previous one plus the next term), unlike np.sum's pairwise blocks."""
    if x.size == 0:
        return 0.0
    return float(0.0 + np.add.accumulate(x)[-1])


def global_norm(grads, names):
    """sqrt of the sum of every squared gradient entry, parameters in `names` order, each
    row-major; one running sum from +0 across all of them."""
    squares = [np.asarray(grads[name], dtype=np.float64).ravel() for name in names]
    flat = np.concatenate(squares) if squares else np.zeros(0)
    return math.sqrt(_sum_in_order(flat * flat))


def clip_gradients(grads, names, theta):
    """The book's rule, in place on the dict: when n > theta every gradient becomes g * (theta / n).
    Returns n, the norm before clipping."""
    n = global_norm(grads, names)
    if n > theta:
        s = theta / n
        for name in names:
            grads[name] = grads[name] * s
    return n


def adam_init(params, names):
    """Step 0: zero moments shaped as the parameters, b1t = b2t = 1."""
    return {
        "t": 0,
        "b1t": 1.0,
        "b2t": 1.0,
        "m": {name: np.zeros(np.shape(params[name])) for name in names},
        "v": {name: np.zeros(np.shape(params[name])) for name in names},
    }


def adam_step(params, grads, names, state, lr):
    """One Adam update of every parameter, in place on the params and state dicts."""
    state["t"] += 1
    state["b1t"] = state["b1t"] * BETA1
    state["b2t"] = state["b2t"] * BETA2
    bc1 = 1.0 - state["b1t"]
    bc2 = 1.0 - state["b2t"]
    step_size = lr / bc1
    sqrt_bc2 = math.sqrt(bc2)
    for name in names:
        g = np.asarray(grads[name], dtype=np.float64)
        if g.shape != np.shape(params[name]):
            raise ValueError(f"adam_step: gradient of {name!r} has shape {g.shape}, the parameter {np.shape(params[name])}")
        m = BETA1 * state["m"][name] + (1.0 - BETA1) * g
        v = BETA2 * state["v"][name] + (1.0 - BETA2) * (g * g)
        denom = np.sqrt(v) / sqrt_bc2 + EPS
        params[name] = params[name] + (-step_size) * (m / denom)
        state["m"][name] = m
        state["v"][name] = v
