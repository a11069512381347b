"""Reverse-the-digits data: vocabulary, sequences, the two sets and the batch of each step
(twin: port_ts/src/runs/digits.ts).

Vocabulary (one, shared by source and target; V = 13):
    0 <pad>   1 <bos>   2 <eos>   3..12 the digits 0..9 (digit k has id k + 3)
An input of L digits (1 <= L <= max_digits) becomes, with P = max_digits + 1 columns:
    src     = digits + <eos>, then <pad>                 src_len = L + 1 (<eos> counted)
    tgt_in  = <bos> + reversed digits, then <pad>        (the decoder's input, shifted right)
    tgt_out = reversed digits + <eos>, then <pad>        tgt_len = L + 1 (<eos> counted)

Drawing (docs/reversal.md), from the case's generator after the initial parameters:
    one candidate = 1 + max_digits consecutive doubles u: u[0] gives the length
        L = min_digits + floor(u[0] * (max_digits - min_digits + 1)), u[1..L] the digits
        floor(u[k] * 10); the other doubles are unused (every candidate costs the same
        1 + max_digits counters);
    the training set first, then the held-out set, each filled candidate by candidate; a
    candidate is rejected (and the next one drawn) when it is already in the set being filled,
    in the training set (held-out only), or in `reserved` (the lab's example, kept unseen).
Batch of step t (t = 1, 2, ...): rows (t - 1) * B + i modulo the training set's size, i = 0..B-1,
in the order the training set was drawn: a fixed cyclic order, a function of t alone.
"""

import numpy as np

from ..core.digest import float64_digest

PAD, BOS, EOS = 0, 1, 2
DIGIT0 = 3  # id of the digit 0
VOCAB = 13


def candidates(u, min_digits, max_digits):
    """Digit tuples from a block of doubles u (n, 1 + max_digits), one candidate per row:
    L = min_digits + floor(u[0] * (max_digits - min_digits + 1)), digits floor(u[k] * 10), k = 1..L."""
    L = min_digits + np.floor(u[:, 0] * (max_digits - min_digits + 1)).astype(np.int64)  # (n,)
    digits = np.floor(u[:, 1:] * 10).astype(np.int64)  # (n, max_digits)
    return [tuple(int(x) for x in digits[n, :L[n]]) for n in range(u.shape[0])]


def draw_digit_set(rng, n, min_digits, max_digits, exclude=()):
    """n distinct inputs (tuples of digits), in draw order; a candidate found in the set so far or
    in `exclude` is rejected. Candidates are drawn in rounds of as many as are still missing, so
    every candidate drawn is examined and the stream is the same as drawing one at a time."""
    if n > sum(10 ** L for L in range(min_digits, max_digits + 1)) - len(set(exclude)):
        raise ValueError(f"draw_digit_set: fewer than {n} distinct inputs of {min_digits}..{max_digits} digits")
    seen = set(exclude)
    out = []
    while len(out) < n:
        for cand in candidates(rng.uniform((n - len(out), 1 + max_digits)), min_digits, max_digits):
            if cand not in seen:
                seen.add(cand)
                out.append(cand)
    return out


def encode_inputs(inputs, max_digits):
    """Token arrays of a list of digit tuples: src, src_lens, tgt_in, tgt_out, tgt_lens
    ((N, P) and (N,), int64, P = max_digits + 1)."""
    N, P = len(inputs), max_digits + 1
    src = np.full((N, P), PAD, dtype=np.int64)
    tgt_in = np.full((N, P), PAD, dtype=np.int64)
    tgt_out = np.full((N, P), PAD, dtype=np.int64)
    lens = np.zeros(N, dtype=np.int64)
    for n, digits in enumerate(inputs):
        L = len(digits)
        ids = [DIGIT0 + k for k in digits]
        src[n, :L + 1] = ids + [EOS]
        tgt_in[n, :L + 1] = [BOS] + ids[::-1]
        tgt_out[n, :L + 1] = ids[::-1] + [EOS]
        lens[n] = L + 1
    return {"src": src, "src_lens": lens, "tgt_in": tgt_in, "tgt_out": tgt_out, "tgt_lens": lens.copy()}


def digits_data(rng, n_train, n_test, min_digits, max_digits, reserved=()):
    """The training set, then the held-out set (disjoint), drawn in that order. Returns
    {"train": arrays, "test": arrays, "train_inputs": [...], "test_inputs": [...]}."""
    reserved = [tuple(r) for r in reserved]
    train = draw_digit_set(rng, n_train, min_digits, max_digits, reserved)
    test = draw_digit_set(rng, n_test, min_digits, max_digits, reserved + train)
    return {"train": encode_inputs(train, max_digits), "test": encode_inputs(test, max_digits),
            "train_inputs": train, "test_inputs": test}


def batch_rows(n_train, batch, t):
    """Rows of the training set in the batch of step t >= 1: (t - 1) * batch + i mod n_train."""
    return (np.arange(batch, dtype=np.int64) + (t - 1) * batch) % n_train


def take_rows(arrays, rows):
    """The same rows of every array in a dict of encoded inputs."""
    return {k: v[rows] for k, v in arrays.items()}


def data_digest(arrays):
    """SHA-256 (hex) of the encoded arrays, each as little-endian float64 (ids are exact), in the
    order src, src_lens, tgt_in, tgt_out, tgt_lens: equal digests prove both engines drew the
    same data (digest.float64_digest)."""
    return float64_digest([arrays[k] for k in ("src", "src_lens", "tgt_in", "tgt_out", "tgt_lens")])
