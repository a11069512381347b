"""A decoder-only language model of the lesson's blocks (twin: port_ts/src/models/decoderLm.ts;
docs/decoder_lm.md).

    P[b, t] = t - pads[b]  (0 for a pad)         (B, T)       positions of a left-padded batch
    X = tok[tokens] + pos[P]                     (B, T, d)    learned token and position embeddings
    X = block_i(X, keep), i = 0..N-1             (B, T, d)    pre-norm lesson blocks, keep =
                                                              causal_keep(T, pads): pads[b] <= k <= q
    logits = LN_f(X) W_head^T + b_head           (B, T, V)

Shape legend: B batch, T steps, d model dim, V vocabulary, L max_len (rows of the position table).
Config: vocab, max_len, d, heads, ffn_hidden, blocks. A left-padded row (pads[b] leading pads)
computes bit for bit what the row computes alone: its pads are masked keys, whose softmax weights
are exactly +0, and its tokens sit at the positions they have alone (runs/kv_cache.py relies on it).

Parameters, in the order init_decoder_lm_params draws them (PyTorch's defaults):
    tok (V, d) N(0, 1); pos (L, d) N(0, 1);
    blk{i}.* (nn/lesson_block.py, NAMES order); ln_f.gamma, ln_f.beta (d,);
    head.W (V, d), head.b (V,) U(+-1/sqrt(d))
Backward: each block's backward in reverse; the two embeddings' gradients scatter the same dX
(embedding_backward: rows accumulated in row-major token order). decoder_lm_loss adds the
weighted cross-entropy (nn/loss.py: weight 1 for a counted position, 0 otherwise).
Traced (core/trace.py): the sub-layers embedding, blk{i}.attention, blk{i}.ffn and head, forward
and backward.
"""

import numpy as np

from ..core.params import param, prefixed_params, sub_params
from ..core.trace import backward, scope, sublayer
from ..nn.embedding import embedding_backward, embedding_forward
from ..nn.encoder_block import init_layer_norm_params
from ..nn.init import embedding_params, linear_params
from ..nn.layer_norm import layer_norm_backward, layer_norm_forward
from ..nn.lesson_attention import causal_keep
from ..nn.lesson_block import init_lesson_block_params, lesson_block_backward, lesson_block_forward
from ..nn.linear import linear_backward, linear_forward
from ..nn.loss import cross_entropy_backward, cross_entropy_forward


def init_decoder_lm_params(rng, config):
    """The flat parameter dict, keyed by dotted names, drawn in the order of the module doc."""
    V, L, d = config["vocab"], config["max_len"], config["d"]
    params = {"tok": embedding_params(rng, V, d), "pos": embedding_params(rng, L, d)}
    for i in range(config["blocks"]):
        params.update({f"blk{i}.{n}": p for n, p in init_lesson_block_params(rng, d, config["ffn_hidden"]).items()})
    params.update(init_layer_norm_params(d, "ln_f."))
    params["head.W"], params["head.b"] = linear_params(rng, V, d)
    return params


def decoder_lm_positions(T, pads=None):
    """int64 (B, T) (or (1, T) without pads): t - pads[b], and 0 where t < pads[b]."""
    t = np.arange(T, dtype=np.int64)[None, :]
    if pads is None:
        return t
    return np.maximum(t - np.asarray(pads, dtype=np.int64)[:, None], 0)


def decoder_lm_forward(tokens, params, config, pads=None):
    """tokens int (B, T), pads None | int (B,) -> (logits (B, T, V), cache); cache["blocks"][i]
    holds block i's cache (its attention's kh, vh (B, H, T, D) and weights (B, H, T, T))."""
    tokens = np.asarray(tokens)
    B, T = tokens.shape
    if T > config["max_len"]:
        raise ValueError(f"decoder_lm: {T} steps, but the position table has max_len = {config['max_len']} rows")
    positions = np.broadcast_to(decoder_lm_positions(T, pads), (B, T))  # (B, T)
    x, embed = sublayer("embedding", decoder_lm_embed, tokens, positions, params)  # (B, T, d)
    keep = causal_keep(T, pads)  # (B|1, T, T)
    blocks = []
    for i in range(config["blocks"]):
        scope(f"blk{i}.")  # names the block's traced sub-layers
        x, blk = lesson_block_forward(x, sub_params(params, f"blk{i}."), config["heads"], keep)  # (B, T, d)
        blocks.append(blk)
    scope("")
    logits, head = sublayer("head", decoder_lm_head, x, params)  # (B, T, V)
    return logits, {"tok": embed["tok"], "pos": embed["pos"], "blocks": blocks, "ln_f": head["ln_f"],
                    "head": head["head"], "weights": [blk["weights"] for blk in blocks]}


def decoder_lm_embed(tokens, positions, params):
    """tokens, positions int (B, T) -> (x (B, T, d), {"tok", "pos"}): E_tok[tokens] + E_pos[positions]."""
    e_tok, tok = embedding_forward(tokens, param(params, "tok"))  # (B, T, d)
    e_pos, pos = embedding_forward(positions, param(params, "pos"))  # (B, T, d)
    x = e_tok + e_pos  # (B, T, d)
    return x, {"tok": tok, "pos": pos}


def decoder_lm_head(x, params):
    """x (B, T, d) -> (logits (B, T, V), {"ln_f", "head"}): the final LN, then the head."""
    h, ln_f = layer_norm_forward(x, param(params, "ln_f.gamma"), param(params, "ln_f.beta"))  # (B, T, d)
    logits, head = linear_forward(h, param(params, "head.W"), param(params, "head.b"))  # (B, T, V)
    return logits, {"ln_f": ln_f, "head": head}


# the labels a traced backward gives each returned gradient: the port's field names (core/trace.py)
HEAD_GRADS = ("dx", "dgamma", "dbeta", "dW", "db")
EMBED_GRADS = ("dtok", "dpos")


def decoder_lm_head_backward(dlogits, cache):
    """dlogits (B, T, V) -> (dx (B, T, d), dgamma_f (d,), dbeta_f (d,), dW_head (V, d), db_head (V,));
    cache the model's."""
    # inverts: logits = LN_f(X) W_head^T + b_head
    dh, dW_head, db_head = linear_backward(dlogits, cache["head"])  # (B, T, d)
    dx, dgamma_f, dbeta_f = layer_norm_backward(dh, cache["ln_f"])  # (B, T, d)
    return dx, dgamma_f, dbeta_f, dW_head, db_head


def decoder_lm_embed_backward(dx, cache):
    """dx (B, T, d) -> (dtok (V, d), dpos (L, d)); cache the model's."""
    # inverts: X = tok[tokens] + pos[P]
    return embedding_backward(dx, cache["tok"]), embedding_backward(dx, cache["pos"])


def decoder_lm_backward(dlogits, cache):
    """dlogits (B, T, V) -> grads keyed by every parameter name, in init order."""
    dx, dgamma_f, dbeta_f, dW_head, db_head = backward("head", HEAD_GRADS, decoder_lm_head_backward, dlogits, cache)
    block_grads = [None] * len(cache["blocks"])
    for i in reversed(range(len(cache["blocks"]))):
        scope(f"blk{i}.")  # names the block's traced backwards
        dx, block_grads[i] = lesson_block_backward(dx, cache["blocks"][i])  # inverts: X = block_i(X, keep)
    scope("")
    dtok, dpos = backward("embedding", EMBED_GRADS, decoder_lm_embed_backward, dx, cache)
    return {"tok": dtok, "pos": dpos, **prefixed_params(block_grads, "blk"),
            "ln_f.gamma": dgamma_f, "ln_f.beta": dbeta_f, "head.W": dW_head, "head.b": db_head}


def decoder_lm_loss(params, config, tokens, targets, weights=None):
    """The weighted mean cross-entropy of next-token targets int (B, T) (weights (B, T): 1 counted,
    0 not). Returns (loss, cache): cache["logits"], cache["model"], cache["ce"]."""
    logits, model = decoder_lm_forward(tokens, params, config)  # (B, T, V)
    loss, ce = cross_entropy_forward(logits, np.asarray(targets), weights)
    return loss, {"logits": logits, "model": model, "ce": ce}


def decoder_lm_loss_backward(cache):
    """The gradient of decoder_lm_loss's loss (dloss = 1) -> grads keyed by the parameter names."""
    dlogits = cross_entropy_backward(cache["ce"])  # (B, T, V)  inverts: loss = CE(logits, targets, weights)
    return decoder_lm_backward(dlogits, cache["model"])
