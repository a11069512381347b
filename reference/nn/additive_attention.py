"""Additive (Bahdanau) attention, no biases (twin: port_ts/src/nn/additiveAttention.ts).

    a(q, k) = w_v^T tanh(W_q q + W_k k)

    qp       = q W_q^T                        (B, Q, H)
    kp       = k W_k^T                        (B, K, H)
    features = qp[:, :, None] + kp[:, None]   (B, Q, K, H)   broadcast over queries and keys
    t        = tanh(features)                 (B, Q, K, H)
    scores   = t w_v^T                        (B, Q, K)
    weights  = masked_softmax(scores, lens)   (B, Q, K)
    out      = dropout(weights) v             (B, Q, V)

Shape legend: B batch, Q queries, K keys, Dq query dim, Dk key dim, H hidden units of the
scoring MLP, V value dim. Params: W_q (H, Dq), W_k (H, Dk), w_v (1, H).

The backward walks these lines from the bottom up. The broadcast in `features` becomes two sums:
each qp row met every key, each kp row every query, summed in index order. Parameter gradients
sum over every (batch, query[, key]) row in row-major order.
"""

import numpy as np

from .dot_product_attention import attention_dropout, attention_dropout_backward, transpose_last
from .masked_softmax import masked_softmax_backward, masked_softmax_forward
from ..core.mathlib import tanh
from ..core.ops import matmul, matmul_nt, sum_last, weight_grad



def additive_attention_forward(q, k, v, params, valid_lens=None, dropout_p=0.0, rng=None):
    """q (B, Q, Dq), k (B, K, Dk), v (B, K, V) -> (out (B, Q, V), cache)."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    W_q, W_k, w_v = params["W_q"], params["W_k"], params["w_v"]
    H = W_q.shape[0]
    if W_q.shape != (H, q.shape[-1]) or W_k.shape != (H, k.shape[-1]) or w_v.shape != (1, H):
        raise ValueError(f"additive_attention: params W_q {W_q.shape}, W_k {W_k.shape}, w_v {w_v.shape} "
                         f"do not fit q {q.shape}, k {k.shape} (need (H, Dq), (H, Dk), (1, H))")
    qp = matmul_nt(q, W_q)  # (B, Q, H)
    kp = matmul_nt(k, W_k)  # (B, K, H)
    features = qp[:, :, None, :] + kp[:, None, :, :]  # (B, Q, K, H)
    t = tanh(features)  # (B, Q, K, H)
    scores = matmul_nt(t, w_v)[..., 0]  # (B, Q, K)
    weights, softmax_cache = masked_softmax_forward(scores, valid_lens)  # (B, Q, K)
    dropped, keep = attention_dropout(weights, dropout_p, rng)  # (B, Q, K)
    out = matmul(dropped, v)  # (B, Q, V)
    cache = {"q": q, "k": k, "v": v, "params": params, "qp": qp, "kp": kp, "features": features,
             "tanh": t, "scores": scores, "weights": weights, "dropped": dropped, "mask": keep,
             "dropout_p": dropout_p, "softmax": softmax_cache}
    return out, cache


def additive_attention_backward(dout, cache):
    """dout (B, Q, V) -> (dq (B, Q, Dq), dk (B, K, Dk), dv (B, K, V), {"W_q", "W_k", "w_v"})."""
    q, k, v, t = cache["q"], cache["k"], cache["v"], cache["tanh"]
    W_q, W_k, w_v = cache["params"]["W_q"], cache["params"]["W_k"], cache["params"]["w_v"]
    B, Q, K, H = t.shape
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != (B, Q, v.shape[-1]):
        raise ValueError(f"additive_attention_backward: dout must have shape {(B, Q, v.shape[-1])}, got {dout.shape}")
    # out = matmul(dropped, v)
    ddropped = matmul_nt(dout, v)  # (B, Q, K): sum over V
    dv = matmul(transpose_last(cache["dropped"]), dout)  # (B, K, V): sum over queries
    # dropped, keep = attention_dropout(weights, dropout_p, rng)
    dweights = attention_dropout_backward(ddropped, cache["mask"], cache["dropout_p"])  # (B, Q, K)
    # weights, softmax_cache = masked_softmax_forward(scores, valid_lens)
    dscores = masked_softmax_backward(dweights, cache["softmax"])  # (B, Q, K)
    # scores = matmul_nt(t, w_v)[..., 0]
    dt = dscores[..., None] * w_v[0]  # (B, Q, K, H)
    dw_v = matmul(dscores.reshape(1, B * Q * K), t.reshape(B * Q * K, H))  # (1, H): rows (b, i, j) in order
    # t = tanh(features)
    dfeatures = dt * (1.0 - t * t)  # (B, Q, K, H)
    # features = qp[:, :, None, :] + kp[:, None, :, :]
    dqp = sum_last(np.moveaxis(dfeatures, 2, -1))  # (B, Q, H): sum over keys
    dkp = sum_last(np.moveaxis(dfeatures, 1, -1))  # (B, K, H): sum over queries
    # kp = matmul_nt(k, W_k)
    dk = matmul(dkp, W_k)  # (B, K, Dk): sum over H
    dW_k = weight_grad(dkp, k)  # (H, Dk)
    # qp = matmul_nt(q, W_q)
    dq = matmul(dqp, W_q)  # (B, Q, Dq): sum over H
    dW_q = weight_grad(dqp, q)  # (H, Dq)
    return dq, dk, dv, {"W_q": dW_q, "W_k": dW_k, "w_v": dw_v}
