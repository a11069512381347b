"""Masked softmax over the last axis, as the book's masked_softmax (twin: maskedSoftmax.ts).

Shapes: x (B, ..., Q, K); valid_lens None, (B,) (one length per batch row, shared by every query)
or (B, Q) (one length per query row). Key k of a row is kept when k < len; masked scores are
replaced by -1e6, not -inf, so a row with length 0 gets uniform weights 1/K over all keys.
"""

import numpy as np

from ..core.mathlib import exp
from ..core.ops import sum_last

MASK_VALUE = -1e6


def keep_mask(shape, valid_lens):
    """Bool (B, ..., Q, K): True where key k < the row's valid length; None when unmasked."""
    if valid_lens is None:
        return None
    lens = np.asarray(valid_lens)
    B, Q, K = shape[0], shape[-2], shape[-1]
    middle = len(shape) - 3  # axes between batch and query (heads)
    if lens.shape == (B,):
        lens = lens.reshape((B,) + (1,) * middle + (1, 1))
    elif lens.shape == (B, Q):
        lens = lens.reshape((B,) + (1,) * middle + (Q, 1))
    else:
        raise ValueError(f"valid_lens must have shape ({B},) or ({B}, {Q}), got {lens.shape}")
    return np.arange(K) < lens


def masked_softmax_forward(x, valid_lens=None):
    """Returns (out, cache): out has x's shape, rows sum to 1; cache holds out for the backward."""
    x = np.asarray(x, dtype=np.float64)
    keep = keep_mask(x.shape, valid_lens)
    if keep is not None:
        x = np.where(keep, x, MASK_VALUE)
    shifted = x - np.max(x, axis=-1, keepdims=True)  # the max is exact in any order
    e = exp(shifted)
    out = e / sum_last(e)[..., None]
    return out, {"out": out, "keep": keep}


def masked_softmax_backward(dout, cache):
    """dout (B, ..., Q, K) -> dx of x's shape. Per row, with y = out:
    dx = y * (dout - sum_k dout_k y_k), the sum in key order; 0 where the forward masked x."""
    out, keep = cache["out"], cache["keep"]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != out.shape:
        raise ValueError(f"masked_softmax_backward: dout must have the output's shape {out.shape}, got {dout.shape}")
    # out = e / sum_last(e)[..., None], e = exp(shifted): the shift by the row max cancels
    dot = sum_last(dout * out)  # (B, ..., Q)
    dx = out * (dout - dot[..., None])  # (B, ..., Q, K)
    if keep is not None:
        # x = np.where(keep, x, MASK_VALUE): a masked score is replaced by a constant
        dx = np.where(keep, dx, 0.0)
    return dx
