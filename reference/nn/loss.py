"""Softmax cross-entropy with padding excluded, and its gradient (twin: port_ts/src/nn/loss.ts).

Shapes: logits (..., V); targets int (...) with ids in [0, V); weights (...) or None, 1 for a
counted position and 0 for padding. The leading axes are flattened to N rows, row-major.
Per row n, with z = logits[n] and t = targets[n]:
  m       = max over v of z[v]                     (exact, any order)
  s       = sum over v of exp(z[v] - m)            in-order from +0
  loss_n  = log(s) - (z[t] - m)                    log-sum-exp minus the target's logit
  loss    = (sum over n of w[n] * loss_n) / (sum over n of w[n])   both in-order from +0
Without weights the loss is the plain mean, (sum over n of loss_n) / N, which is what weights
of all ones give too (1 * loss_n is exact). This is the book's Seq2Seq.loss: per-token
cross-entropy, masked where the target is <pad>, averaged over the counted tokens.
Backward, for dloss = 1:
  p          = exp(z - m) / s                      softmax of the row
  coef[n]    = w[n] / (sum of w)                   one rounded division (1 / N without weights)
  dlogits[n] = (p - onehot(t)) * coef[n]
"""

import numpy as np

from ..core.mathlib import exp, log
from ..core.ops import sum_last


def sequence_weights(valid_lens, T):
    """(B,) lengths -> (B, T) float weights, 1.0 where t < valid_lens[b], else 0.0."""
    valid_lens = np.asarray(valid_lens)
    if valid_lens.ndim != 1 or valid_lens.dtype.kind not in "iu":
        raise ValueError(f"sequence_weights: valid_lens must be integer lengths (B,), got "
                         f"dtype {valid_lens.dtype} shape {valid_lens.shape}")
    return (np.arange(T)[None, :] < valid_lens[:, None]).astype(np.float64)  # (B, T)


def cross_entropy_forward(logits, targets, weights=None):
    """Returns (loss, cache): loss a float; cache holds the softmax, targets and row coefficients."""
    logits = np.asarray(logits, dtype=np.float64)
    targets = np.asarray(targets)
    if logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError(f"cross_entropy: logits must be (..., V) with V >= 1, got {logits.shape}")
    V = logits.shape[-1]
    if targets.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer ids, got dtype {targets.dtype}")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets must have shape {logits.shape[:-1]}, got {targets.shape}")
    if np.any((targets < 0) | (targets >= V)):
        bad = int(targets[(targets < 0) | (targets >= V)][0])
        raise IndexError(f"cross_entropy: target id {bad} is outside [0, {V})")
    z = logits.reshape(-1, V)  # (N, V)
    t = targets.reshape(-1).astype(np.int64)  # (N,)
    N = z.shape[0]
    rows = np.arange(N)
    m = z.max(axis=-1)  # (N,)  a max is exact in any order
    shifted = z - m[:, None]  # (N, V)
    e = exp(shifted)  # (N, V)
    s = sum_last(e)  # (N,)  in-order over v
    losses = log(s) - shifted[rows, t]  # (N,)
    if weights is None:
        total = sum_last(losses)  # in-order over rows
        wsum = float(N)
        coef = np.full(N, 1.0 / N)  # (N,)
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != logits.shape[:-1]:
            raise ValueError(f"cross_entropy: weights must have shape {logits.shape[:-1]}, got {w.shape}")
        w = w.reshape(-1)  # (N,)
        total = sum_last(w * losses)  # in-order over rows
        wsum = sum_last(w)  # in-order over rows
        if not wsum > 0:
            raise ValueError(f"cross_entropy: the weights sum to {wsum}; at least one position must count")
        coef = w / wsum  # (N,)
    loss = float(total / wsum)
    probs = e / s[:, None]  # (N, V)
    return loss, {"probs": probs, "targets": t, "coef": coef, "shape": logits.shape}


def cross_entropy_backward(cache):
    """Returns dlogits (..., V) for dloss = 1: (softmax - onehot(target)) * w / sum(w)."""
    probs, t, coef = cache["probs"], cache["targets"], cache["coef"]
    # inverts: loss = sum(w * (log(s) - (z[t] - m))) / sum(w)
    d = probs.copy()  # (N, V)
    d[np.arange(d.shape[0]), t] -= 1.0  # p - onehot
    dlogits = d * coef[:, None]  # (N, V)
    return dlogits.reshape(cache["shape"])
