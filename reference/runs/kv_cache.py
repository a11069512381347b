"""Greedy generation with the decoder-only model: by a key-value cache, and by full recomputation
(twin: port_ts/src/runs/kvCache.ts; docs/kv_cache.md).

A batch of prompts of different lengths is left-padded (left_pad): row n has pads[n] pad tokens,
then its prompt, so every row's next token is at the same slot. Slot c of row n holds position
c - pads[n], and the pads are masked keys.

    cached:  logits, cache = decoder_lm_forward(prompts, pads)     prefill, (N, P, V)
             K_i[:, :, 0:P], V_i[:, :, 0:P] = block i's keys, values  (N, H, S, D), S = P + G - 1 slots
             y_0 = argmax logits[:, P-1]
             step s = 1..G-1, slot c = P + s - 1, the new token y_{s-1} at position c - pads:
                 x = tok[y] + pos[c - pads]                          (N, 1, d)
                 per block: n1 = LN1(x); q, k, v = n1 W_in^T + b_in; K_i[:, :, c] = k; V_i[:, :, c] = v
                            attend from the new position to slots 0..c (pads masked); x += attn;
                            x += FFN(LN2(x))
                 y_s = argmax of LN_f(x) W_head^T + b_head
    full:    step s = 0..G-1: logits = decoder_lm_forward(prompts + y_0..y_{s-1}, pads)[:, -1]

Both give the same logits at every step, bit for bit in our engines: the cached step computes
each of the new position's sums over the same terms in the same order as the full forward's last
row (every product and layer norm is row-wise, in-order from +0), and a key the full forward
masks (a pad, or a later position for an earlier row) has weight exactly +0, which adds nothing
to any sum. For the same reason a left-padded row generates exactly what it generates alone
(tests/test_lm.py checks all three). A row stops after emitting eos, or after G tokens; finished
rows run on, unread; generation stops when every row has stopped.

The book's cached decoder adds position 0's code to every generated token, and a cache can be
read one slot off (the new token left out of its own keys): ops/attention/kv_generate.json has both.
Shape legend: N prompts, P padded prompt length, G generated tokens, S slots, H heads, D head dim,
d model dim, V vocabulary.
"""

import numpy as np

from .decode import top_two
from ..core.params import param, sub_params
from ..models.decoder_lm import decoder_lm_forward
from ..nn.embedding import embedding_forward
from ..nn.ffn import ffn_forward
from ..nn.layer_norm import layer_norm_forward
from ..nn.lesson_attention import masked_attention_forward, split_qkv
from ..nn.linear import linear_forward
from ..nn.multi_head_attention import merge_heads, split_heads


def left_pad(prompts, fill):
    """A list of token lists -> (prompts int64 (N, P), pads int64 (N,)): row n is pads[n] fills,
    then prompt n; P is the longest prompt's length."""
    P = max(len(p) for p in prompts)
    if min(len(p) for p in prompts) < 1:
        raise ValueError("left_pad: every prompt needs at least one token")
    out = np.full((len(prompts), P), fill, dtype=np.int64)
    pads = np.zeros(len(prompts), dtype=np.int64)
    for n, p in enumerate(prompts):
        pads[n] = P - len(p)
        out[n, pads[n]:] = p
    return out, pads


def kv_prefill(params, config, prompts, pads, slots):
    """The prompts' forward, and the cache: {"k", "v": per block (N, H, slots, D), "next": P,
    "pads"}. Returns (logits at the last prompt slot (N, V), cache)."""
    prompts = np.asarray(prompts)
    N, P = prompts.shape
    logits, model = decoder_lm_forward(prompts, params, config, pads)  # (N, P, V)
    cache = {"k": [], "v": [], "next": P, "pads": np.asarray(pads, dtype=np.int64)}
    for blk in model["blocks"]:
        kh, vh = blk["attn"]["kh"], blk["attn"]["vh"]  # (N, H, P, D)
        K = np.zeros(kh.shape[:2] + (slots, kh.shape[3]))
        V = np.zeros(K.shape)
        K[:, :, :P], V[:, :, :P] = kh, vh
        cache["k"].append(K)
        cache["v"].append(V)
    return logits[:, P - 1], cache


def kv_step(params, config, cache, tokens):
    """One new token per row, tokens int (N,), at slot c = cache["next"]: its keys and values go to
    slot c of every block's cache, its query attends to slots 0..c. Returns logits (N, V)."""
    c, pads = cache["next"], cache["pads"]
    tokens = np.asarray(tokens, dtype=np.int64)[:, None]  # (N, 1)
    positions = (c - pads)[:, None]  # (N, 1)
    e_tok, _ = embedding_forward(tokens, param(params, "tok"))  # (N, 1, d)
    e_pos, _ = embedding_forward(positions, param(params, "pos"))  # (N, 1, d)
    x = e_tok + e_pos  # (N, 1, d)
    keep = (np.arange(c + 1)[None, :] >= pads[:, None])[:, None, :]  # (N, 1, c + 1): the pads masked
    H = config["heads"]
    for i in range(config["blocks"]):
        p = sub_params(params, f"blk{i}.")
        n1, _ = layer_norm_forward(x, param(p, "ln1.gamma"), param(p, "ln1.beta"))  # (N, 1, d)
        qkv, _ = linear_forward(n1, param(p, "attn.W_in"), param(p, "attn.b_in"))  # (N, 1, 3d)
        q, k, v = split_qkv(qkv)  # (N, 1, d) each
        K, V = cache["k"][i], cache["v"][i]  # (N, H, S, D)
        K[:, :, c] = split_heads(k, H)[:, :, 0]
        V[:, :, c] = split_heads(v, H)[:, :, 0]
        heads, _ = masked_attention_forward(split_heads(q, H), K[:, :, :c + 1], V[:, :, :c + 1], keep)  # (N, H, 1, D)
        a, _ = linear_forward(merge_heads(heads), param(p, "attn.W_o"), param(p, "attn.b_o"))  # (N, 1, d)
        x = x + a  # (N, 1, d)
        n2, _ = layer_norm_forward(x, param(p, "ln2.gamma"), param(p, "ln2.beta"))  # (N, 1, d)
        g, _ = ffn_forward(n2, sub_params(p, "ffn."))  # (N, 1, d)
        x = x + g  # (N, 1, d)
    cache["next"] = c + 1
    h, _ = layer_norm_forward(x, param(params, "ln_f.gamma"), param(params, "ln_f.beta"))  # (N, 1, d)
    logits, _ = linear_forward(h, param(params, "head.W"), param(params, "head.b"))  # (N, 1, V)
    return logits[:, 0]


def _greedy(first, next_logits, N, steps, eos):
    """The greedy loop shared by both ways: first() -> logits (N, V) of step 0, next_logits(s, y)
    -> logits (N, V) of step s after the tokens y (N,) of step s - 1."""
    tokens = np.full((N, steps), -1, dtype=np.int64)
    margins = np.zeros((N, steps))
    lengths = np.zeros(N, dtype=np.int64)
    done = np.zeros(N, dtype=bool)
    all_logits = None
    y = None
    for s in range(steps):
        logits = first() if s == 0 else next_logits(s, y)  # (N, V)
        if all_logits is None:
            all_logits = np.zeros((N, steps, logits.shape[1]))
        y, margin = top_two(logits)  # (N,), (N,)
        live = ~done
        tokens[live, s], margins[live, s], lengths[live] = y[live], margin[live], s + 1
        all_logits[live, s] = logits[live]
        done = done | (y == eos)
        if done.all():
            break
    return {"tokens": tokens, "margins": margins, "lengths": lengths, "logits": all_logits}


def generate_cached(params, config, prompts, pads, steps, eos):
    """Greedy generation through the cache: {tokens (N, G) int64, -1 after the end; margins (N, G),
    0 after the end; lengths (N,) int64; logits (N, G, V), 0 after the end}."""
    prompts = np.asarray(prompts)
    N, P = prompts.shape
    box = {}

    def first():
        logits, box["cache"] = kv_prefill(params, config, prompts, pads, P + steps - 1)
        return logits

    return _greedy(first, lambda s, y: kv_step(params, config, box["cache"], y), N, steps, eos)


def generate_full(params, config, prompts, pads, steps, eos):
    """Greedy generation by full recomputation: every step runs the whole prefix again; the same
    dict as generate_cached."""
    prompts = np.asarray(prompts)
    N = prompts.shape[0]
    box = {"prefix": prompts}

    def logits_of(prefix):
        return decoder_lm_forward(prefix, params, config, pads)[0][:, -1]

    def next_logits(s, y):
        box["prefix"] = np.concatenate([box["prefix"], y[:, None]], axis=1)  # (N, P + s)
        return logits_of(box["prefix"])

    return _greedy(lambda: logits_of(prompts), next_logits, N, steps, eos)
