"""Greedy decoding with the encoder-decoder (twin: port_ts/src/runs/decode.ts).

    E = encode(src, src_lens)                         (N, S, d)    once
    prefix_0 = [<bos>]                                (N, 1)
    step t = 0, 1, ..., max_len - 1:
        logits = decode(prefix_t, E, src_lens)        (N, t+1, V)  the whole prefix, positions
                                                                   0..t, causal mask
        y_t = argmax_v logits[:, t, v]                (N,)         first index on ties
        margin_t = logits[y_t] - max_{v != y_t} logits[v]          >= 0; near 0 = near-tie
        prefix_{t+1} = prefix_t + [y_t]
    a row stops after emitting <eos>, or after max_len tokens.

This is decisions.md's decoder: every step re-runs the decoder over the whole prefix, so token t
sits at position t, as in training. The book's cached decoder feeds one token per step and adds
position 0's code to every one of them (docs/reversal.md); we do not copy that. Rows are decoded
together; a row's tokens and margins depend only on that row (every operation is row-wise and a
finished row's later tokens are never read), so a batch decodes exactly as its rows one by one.
Shape legend: N inputs, S source steps, d model dim, H heads, V vocabulary.
"""

import numpy as np

from ..models.transformer import transformer_decode, transformer_encode


def top_two(logits):
    """logits (N, V), V >= 2 -> (best (N,) int64, margin (N,)): per row the first index of the
    largest logit, and that logit minus the largest logit at any other index (0 on a tie).
    Maxima are exact in any order, so this is bit for bit the port's loop."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError(f"top_two: logits must be (N, V) with V >= 2, got {logits.shape}")
    best = np.argmax(logits, axis=1)  # (N,)  first maximal index
    others = logits.copy()
    others[np.arange(logits.shape[0]), best] = -np.inf
    return best.astype(np.int64), logits.max(axis=1) - others.max(axis=1)


def greedy_decode(params, config, src, src_lens, max_len, bos, eos):
    """src int (N, S), src_lens (N,) -> dict:
    tokens (N, max_len) int64, emitted ids (<eos> included), -1 after the end;
    margins (N, max_len) float64, top-1 minus top-2 logit at each step, 0 after the end;
    lengths (N,) int64, tokens emitted (<eos> included);
    cross_weights: per decoder block, the cross-attention weights (N, H, T, S) of the last
    decoder pass (T = the longest prefix run); row n's map is [n, :, :lengths[n], :]."""
    src = np.asarray(src)
    src_lens = np.asarray(src_lens)
    N = src.shape[0]
    enc_out, _ = transformer_encode(src, src_lens, params, config)  # (N, S, d)
    tokens = np.full((N, max_len), -1, dtype=np.int64)
    margins = np.zeros((N, max_len))
    lengths = np.zeros(N, dtype=np.int64)
    done = np.zeros(N, dtype=bool)
    prefix = np.full((N, 1), bos, dtype=np.int64)  # (N, t+1)
    cache = None
    for t in range(max_len):
        logits, cache = transformer_decode(prefix, enc_out, src_lens, params, config)  # (N, t+1, V)
        step, margin = top_two(logits[:, t, :])  # (N,), (N,)
        live = ~done
        tokens[live, t], margins[live, t], lengths[live] = step[live], margin[live], t + 1
        done = done | (step == eos)
        if done.all():
            break
        prefix = np.concatenate([prefix, step[:, None]], axis=1)  # finished rows run on, unread
    cross = [blk["cross_weights"] for blk in cache["blocks"]]
    return {"tokens": tokens, "margins": margins, "lengths": lengths, "cross_weights": cross}


def decode_outputs(tokens, margins, exact):
    """A baked run's held-out decodes as its outputs: decode.tokens (N, P), decode.margin (N, P),
    decode.exact (N,) and exact_match, the fraction of exact rows (a count over N)."""
    return {"decode.tokens": tokens, "decode.margin": margins, "decode.exact": exact,
            "exact_match": np.array(int(np.count_nonzero(exact)) / exact.shape[0])}
