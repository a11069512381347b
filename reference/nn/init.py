"""PyTorch-default initialisation, drawn from the shared generator (twin: init.ts).

Every draw goes through the generator passed in, in the order the calls are made, so a model
that calls these in its documented parameter order gets the same parameters in both engines.
  linear_params(rng, O, I, bias)  W (O, I) ~ U(-k, k), then b (O,) ~ U(-k, k), k = 1 / sqrt(I)
                                  (kaiming_uniform(a=sqrt(5)) reduces to this bound; we compute
                                  k = 1 / sqrt(I) directly, in both engines)
  embedding_params(rng, V, d)     E (V, d) ~ N(0, 1)
  layer_norm_params(d)            gamma = 1, beta = 0 (d,) each; no draws
  patch_embedding_params(rng, d, C, p)
                                  the stride-p conv as a linear layer on flattened patches:
                                  W (d, C*p*p) with the patch flattened (c, row, col) as torch's
                                  conv weight (d, C, p, p) reshaped; b (d,); fan_in = C*p*p
A uniform draw is low + (high - low) * u = -k + (2k) * u.
"""

import math

import numpy as np


def linear_params(rng, fan_out, fan_in, bias=True):
    """Returns (W (fan_out, fan_in), b (fan_out,) or None): W drawn first, then b."""
    if fan_in < 1 or fan_out < 1:
        raise ValueError(f"linear_params: fan_in and fan_out must be >= 1, got {fan_out} x {fan_in}")
    bound = 1.0 / math.sqrt(fan_in)
    W = rng.uniform((fan_out, fan_in), -bound, bound)  # (O, I)
    b = rng.uniform((fan_out,), -bound, bound) if bias else None  # (O,)
    return W, b


def embedding_params(rng, V, d):
    """E (V, d) ~ N(0, 1)."""
    return rng.normal((V, d), 0.0, 1.0)


def layer_norm_params(d):
    """(gamma, beta) = (ones (d,), zeros (d,)); draws nothing."""
    return np.ones(d), np.zeros(d)


def patch_embedding_params(rng, d, channels, patch):
    """The patch embedding's conv as a linear layer: (W (d, C*p*p), b (d,)), fan_in = C*p*p."""
    return linear_params(rng, d, channels * patch * patch)
