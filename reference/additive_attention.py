"""Additive (Bahdanau) attention, no biases (twin: port_ts/src/additiveAttention.ts).

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
"""

import numpy as np

from .dot_product_attention import attention_dropout
from .masked_softmax import masked_softmax_forward
from .ops import matmul, matmul_nt


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
    t = np.tanh(features)  # (B, Q, K, H)
    scores = matmul_nt(t, w_v)[..., 0]  # (B, Q, K)
    weights, softmax_cache = masked_softmax_forward(scores, valid_lens)  # (B, Q, K)
    dropped, keep = attention_dropout(weights, dropout_p, rng)  # (B, Q, K)
    out = matmul(dropped, v)  # (B, Q, V)
    cache = {"q": q, "k": k, "v": v, "params": params, "qp": qp, "kp": kp, "features": features,
             "tanh": t, "scores": scores, "weights": weights, "dropped": dropped, "mask": keep,
             "dropout_p": dropout_p, "softmax": softmax_cache}
    return out, cache
