"""Multi-head attention, no biases (twin: port_ts/src/nn/multiHeadAttention.ts).

    q = x_q W_q^T, k = x_kv W_k^T, v = x_kv W_v^T        (B, Q|K, d)
    qh, kh, vh = split_heads(q), ...                      (B, H, Q|K, D)   head i: features [i*D, (i+1)*D)
    heads = dot_product_attention(qh, kh, vh, lens)       (B, H, Q, D)     scale 1/sqrt(D), D = d / H
    concat = merge_heads(heads)                           (B, Q, d)
    out = concat W_o^T                                    (B, Q, d)

Shape legend: B batch, Q queries, K keys, H heads, D head dim, d model dim (d = H * D),
dq_in / dkv_in the input feature dims. Params: W_q (d, dq_in), W_k (d, dkv_in), W_v (d, dkv_in),
W_o (d, d). valid_lens None | (B,) | (B, Q) applies to every head; the dropout keep mask is drawn
once for the whole (B, H, Q, K) weights tensor.

The backward walks these lines from the bottom up: through W_o, the merge (undone by a split),
each head's attention, the split (undone by a merge) and the three projections. It returns
dx_q and dx_kv apart; for self-attention (x_q is x_kv) the caller adds them. Parameter gradients
sum over every (batch, step) row in row-major order.
"""

import numpy as np

from .dot_product_attention import dot_product_attention_backward, dot_product_attention_forward
from ..core.ops import matmul, matmul_nt, weight_grad



def split_heads(x, num_heads):
    """(B, T, d) -> (B, H, T, D): head i takes features [i*D, (i+1)*D)."""
    B, T, d = x.shape
    return np.ascontiguousarray(x.reshape(B, T, num_heads, d // num_heads).transpose(0, 2, 1, 3))


def merge_heads(x):
    """(B, H, T, D) -> (B, T, H*D), the inverse of split_heads."""
    B, H, T, D = x.shape
    return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(B, T, H * D)


def multi_head_attention_forward(x_q, x_kv, params, num_heads, valid_lens=None, dropout_p=0.0, rng=None):
    """x_q (B, Q, dq_in), x_kv (B, K, dkv_in) -> (out (B, Q, d), cache)."""
    x_q = np.asarray(x_q, dtype=np.float64)
    x_kv = np.asarray(x_kv, dtype=np.float64)
    W_q, W_k, W_v, W_o = params["W_q"], params["W_k"], params["W_v"], params["W_o"]
    d = W_q.shape[0]
    if num_heads < 1 or d % num_heads != 0:
        raise ValueError(f"multi_head_attention: model dim d = {d} must be divisible by num_heads = "
                         f"{num_heads}; choose h dividing d")
    expected = {"W_q": (d, x_q.shape[-1]), "W_k": (d, x_kv.shape[-1]), "W_v": (d, x_kv.shape[-1]), "W_o": (d, d)}
    for name, shape in expected.items():
        if params[name].shape != shape:
            raise ValueError(f"multi_head_attention: {name} must have shape {shape}, got {params[name].shape}")
    q = matmul_nt(x_q, W_q)  # (B, Q, d)
    k = matmul_nt(x_kv, W_k)  # (B, K, d)
    v = matmul_nt(x_kv, W_v)  # (B, K, d)
    qh, kh, vh = split_heads(q, num_heads), split_heads(k, num_heads), split_heads(v, num_heads)  # (B, H, T, D)
    heads, attn = dot_product_attention_forward(qh, kh, vh, valid_lens, dropout_p, rng)  # (B, H, Q, D)
    concat = merge_heads(heads)  # (B, Q, d)
    out = matmul_nt(concat, W_o)  # (B, Q, d)
    cache = {"x_q": x_q, "x_kv": x_kv, "params": params, "num_heads": num_heads,
             "q": q, "k": k, "v": v, "qh": qh, "kh": kh, "vh": vh, "heads": heads,
             "weights": attn["weights"], "attn": attn, "concat": concat}
    return out, cache


def multi_head_attention_backward(dout, cache):
    """dout (B, Q, d) -> (dx_q (B, Q, dq_in), dx_kv (B, K, dkv_in), {"W_q", "W_k", "W_v", "W_o"}).
    Self-attention: the input's gradient is dx_q + dx_kv, added by the caller."""
    x_q, x_kv, num_heads = cache["x_q"], cache["x_kv"], cache["num_heads"]
    W_q, W_k, W_v, W_o = (cache["params"][n] for n in ("W_q", "W_k", "W_v", "W_o"))
    dout = np.asarray(dout, dtype=np.float64)
    if dout.shape != cache["concat"].shape:
        raise ValueError(f"multi_head_attention_backward: dout must have shape {cache['concat'].shape}, "
                         f"got {dout.shape}")
    # out = matmul_nt(concat, W_o)
    dconcat = matmul(dout, W_o)  # (B, Q, d): sum over output features
    dW_o = weight_grad(dout, cache["concat"])  # (d, d)
    # concat = merge_heads(heads)
    dheads = split_heads(dconcat, num_heads)  # (B, H, Q, D)
    # heads, attn = dot_product_attention_forward(qh, kh, vh, valid_lens, dropout_p, rng)
    dqh, dkh, dvh = dot_product_attention_backward(dheads, cache["attn"])  # (B, H, Q|K, D)
    # qh, kh, vh = split_heads(q, num_heads), ...
    dq, dk, dv = merge_heads(dqh), merge_heads(dkh), merge_heads(dvh)  # (B, Q|K, d)
    # v = matmul_nt(x_kv, W_v); k = matmul_nt(x_kv, W_k): x_kv feeds both, one add
    dx_kv = matmul(dk, W_k) + matmul(dv, W_v)  # (B, K, dkv_in): each product sums over d
    dW_v = weight_grad(dv, x_kv)  # (d, dkv_in)
    dW_k = weight_grad(dk, x_kv)  # (d, dkv_in)
    # q = matmul_nt(x_q, W_q)
    dx_q = matmul(dq, W_q)  # (B, Q, dq_in)
    dW_q = weight_grad(dq, x_q)  # (d, dq_in)
    return dx_q, dx_kv, {"W_q": dW_q, "W_k": dW_k, "W_v": dW_v, "W_o": dW_o}
