"""Act 4's alignment scorer: additive attention learning which source word each target word
translates (twin: port_ts/src/models/alignment.ts).

The sentence pair and its gold alignment:
    source  the  red  car  <eos>          keys:    K = 4 source words
    target  la   voiture  rouge  <eos>    queries: Q = 4 target words
    gold    la -> the, voiture -> car, rouge -> red, <eos> -> <eos>   i.e. ALIGNMENT = (0, 2, 1, 3)
Every word is a fixed random embedding of E features (not trained); the scorer is additive
attention a(q, k) = w_v^T tanh(W_q q + W_k k) with W_q (H, E), W_k (H, E), w_v (1, H), no biases.

Forward, for a batch of B sentence pairs (N = B * Q target words):
    out     = additive_attention(q = target embeddings, k = source embeddings, v = I_K)   (B, Q, K)
              values are the K x K identity, so out[b, i, :] is exactly the weights row
              (each output sums w_j * 1 with w_k * 0 = +0 terms, no rounding)
    loss    = (sum over (b, i) in row-major order of -log(out[b, i, gold[b, i]])) / N
Backward (dloss = 1): the only nonzero entries of dout are at the gold source words,
    dout[b, i, gold] = -1 / (N * out[b, i, gold])
and additive_attention_backward turns dout into the gradients of W_q, W_k and w_v.

Draw order: init_alignment_params draws W_q (H, E) and W_k (H, E) from U(+-1/sqrt(E)), then
w_v (1, H) from U(+-1/sqrt(H)) (PyTorch's nn.Linear default, bias-free). alignment_data draws,
for each pair b = 0..B-1 in turn, the source embeddings (K, E) then the target embeddings (Q, E),
all N(0, 1). Pair b's draws do not depend on B, so pair 0 is the same sentence at every batch
size. Pairs after the first are the same sentences under other random embeddings: one set of
weights must align them all.
Shape legend: B sentence pairs, Q target words, K source words, E embedding dim, H scorer hidden.
"""

import numpy as np

from ..nn.additive_attention import additive_attention_backward, additive_attention_forward
from ..nn.init import linear_params
from ..core.mathlib import log
from ..core.ops import sum_last

SOURCE = ("the", "red", "car", "<eos>")
TARGET = ("la", "voiture", "rouge", "<eos>")
ALIGNMENT = (0, 2, 1, 3)  # target word i attends to source word ALIGNMENT[i]


def init_alignment_params(rng, E, H):
    """{"W_q" (H, E), "W_k" (H, E), "w_v" (1, H)}, drawn in that order."""
    W_q, _ = linear_params(rng, H, E, bias=False)  # (H, E)
    W_k, _ = linear_params(rng, H, E, bias=False)  # (H, E)
    w_v, _ = linear_params(rng, 1, H, bias=False)  # (1, H)
    return {"W_q": W_q, "W_k": W_k, "w_v": w_v}


def alignment_data(rng, E, pairs=1):
    """{"queries" (B, Q, E), "keys" (B, K, E), "gold" int (B, Q)}: pair by pair, source then target."""
    if not (isinstance(pairs, int) and pairs >= 1 and isinstance(E, int) and E >= 1):
        raise ValueError(f"alignment_data: E and pairs must be positive integers, got E={E!r}, pairs={pairs!r}")
    K, Q = len(SOURCE), len(TARGET)
    keys, queries = np.zeros((pairs, K, E)), np.zeros((pairs, Q, E))
    for b in range(pairs):
        keys[b] = rng.normal((K, E))  # (K, E) the, red, car, <eos>
        queries[b] = rng.normal((Q, E))  # (Q, E) la, voiture, rouge, <eos>
    gold = np.tile(np.array(ALIGNMENT, dtype=np.int64), (pairs, 1))  # (B, Q)
    return {"queries": queries, "keys": keys, "gold": gold}


def alignment_loss(params, data):
    """Mean over the target words of -log(attention weight on the gold source word).
    Returns (loss, cache): cache["weights"] (B, Q, K) the attention weights (the heatmap)."""
    q, k, gold = data["queries"], data["keys"], np.asarray(data["gold"])
    B, Q, K = q.shape[0], q.shape[1], k.shape[1]
    if gold.shape != (B, Q) or np.any((gold < 0) | (gold >= K)):
        raise ValueError(f"alignment_loss: gold must be source indices in [0, {K}) of shape {(B, Q)}, got {gold.tolist()}")
    identity = np.broadcast_to(np.eye(K), (B, K, K))  # (B, K, K) values: out = weights
    out, attn = additive_attention_forward(q, k, identity, params)  # (B, Q, K)
    picked = np.take_along_axis(out, gold[..., None], axis=-1)[..., 0]  # (B, Q)
    N = B * Q
    loss = float(sum_last((-log(picked)).reshape(N)) / N)  # in-order over (b, i)
    return loss, {"out": out, "gold": gold, "attn": attn, "weights": attn["weights"], "N": N}


def alignment_loss_backward(cache):
    """The gradient of alignment_loss's loss (dloss = 1) -> {"W_q", "W_k", "w_v"}."""
    out, gold, N = cache["out"], cache["gold"], cache["N"]
    B, Q, _ = out.shape
    dout = np.zeros(out.shape)  # (B, Q, K)
    for b in range(B):
        for i in range(Q):
            dout[b, i, gold[b, i]] = -1.0 / (N * out[b, i, gold[b, i]])  # inverts: loss_n = -log(out[gold]) / N
    _, _, _, grads = additive_attention_backward(dout, cache["attn"])  # inverts: out = attention(q, k, I)
    return {name: grads[name] for name in ("W_q", "W_k", "w_v")}
