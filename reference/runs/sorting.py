"""Sort-the-digits data for the decoder-only model: vocabulary, sequences, the two sets
(twin: port_ts/src/runs/sorting.ts; docs/decoder_lm.md).

Vocabulary for an alphabet of A digits (V = A + 2):
    0..A-1 the digits   A '>' (the prompt's end)   A + 1 <eos>
An input of L digits (min_len <= L <= max_len) x_1..x_L is the sequence
    x_1 .. x_L  >  y_1 .. y_L  <eos>           y = the digits sorted, ascending      (2L + 2 tokens)
and its prompt is x_1 .. x_L > (L + 1 tokens): the model writes the rest. Training rows, with
T = 2 max_len + 1 columns (the sequence shifted by one, right-padded with <eos>):
    tokens[t]  = s[t]      targets[t] = s[t + 1]      weights[t] = 1 for L <= t <= 2L, else 0
so the loss counts only the tokens the model writes (the sorted digits and <eos>), and a
row's positions are 0..T-1 (no left padding in training).

Drawing, from the case's generator after the initial parameters:
    one candidate = 1 + max_len consecutive doubles u: L = min_len + floor(u[0] * (max_len -
        min_len + 1)), digits floor(u[k] * A), k = 1..L; the others unused
    the training set first, then the held-out set, each filled candidate by candidate; a
    candidate is rejected when it is already in the set being filled, in the training set
    (held-out only), or in `reserved` (the lab's example, kept unseen)
in rounds of as many candidates as are still missing (the same stream as one at a time).
Batch of step t: runs/digits.py's batch_rows, a fixed cyclic order over the training set.
"""

import numpy as np

from ..core.digest import float64_digest


def sep_id(A):
    """The prompt's end '>'."""
    return A


def eos_id(A):
    """<eos>."""
    return A + 1


def candidates(u, min_len, max_len, A):
    """Digit tuples from a block of doubles u (n, 1 + max_len), one candidate per row."""
    L = min_len + np.floor(u[:, 0] * (max_len - min_len + 1)).astype(np.int64)  # (n,)
    digits = np.floor(u[:, 1:] * A).astype(np.int64)  # (n, max_len)
    return [tuple(int(x) for x in digits[n, :L[n]]) for n in range(u.shape[0])]


def draw_sort_set(rng, n, min_len, max_len, A, exclude=()):
    """n distinct inputs (tuples of digits), in draw order."""
    if n > sum(A ** L for L in range(min_len, max_len + 1)) - len(set(exclude)):
        raise ValueError(f"draw_sort_set: fewer than {n} distinct inputs of {min_len}..{max_len} digits below {A}")
    seen = set(exclude)
    out = []
    while len(out) < n:
        for cand in candidates(rng.uniform((n - len(out), 1 + max_len)), min_len, max_len, A):
            if cand not in seen:
                seen.add(cand)
                out.append(cand)
    return out


def sequence_of(digits, A):
    """The full sequence of an input: digits, '>', sorted digits, <eos>."""
    return list(digits) + [sep_id(A)] + sorted(digits) + [eos_id(A)]


def encode_sequences(inputs, max_len, A):
    """Training arrays of a list of inputs: tokens, targets int64 (N, T), weights (N, T), T = 2 max_len + 1."""
    N, T = len(inputs), 2 * max_len + 1
    tokens = np.full((N, T), eos_id(A), dtype=np.int64)
    targets = np.full((N, T), eos_id(A), dtype=np.int64)
    weights = np.zeros((N, T))
    for n, digits in enumerate(inputs):
        s, L = sequence_of(digits, A), len(digits)
        tokens[n, :2 * L + 1] = s[:-1]
        targets[n, :2 * L + 1] = s[1:]
        weights[n, L:2 * L + 1] = 1.0
    return {"tokens": tokens, "targets": targets, "weights": weights}


def prompt_of(digits, A):
    """The prompt of an input: its digits, then '>'."""
    return list(digits) + [sep_id(A)]


def sorting_data(rng, n_train, n_test, min_len, max_len, A, reserved=()):
    """The training set, then the held-out set (disjoint): {"train", "test": arrays,
    "train_inputs", "test_inputs": [...]}."""
    reserved = [tuple(r) for r in reserved]
    train = draw_sort_set(rng, n_train, min_len, max_len, A, reserved)
    test = draw_sort_set(rng, n_test, min_len, max_len, A, reserved + train)
    return {"train": encode_sequences(train, max_len, A), "test": encode_sequences(test, max_len, A),
            "train_inputs": train, "test_inputs": test}


def take_sort_rows(arrays, rows):
    """The same rows of tokens, targets and weights."""
    return {k: arrays[k][rows] for k in ("tokens", "targets", "weights")}


def sorting_digest(arrays):
    """SHA-256 (hex) of tokens, targets, weights as little-endian float64 (ids are exact)."""
    return float64_digest([arrays[k] for k in ("tokens", "targets", "weights")])
