"""Token embedding: a lookup of rows of the table E (twin: embedding.ts).

Shapes: tokens int (...) with ids in [0, V); E (V, d) -> out (..., d), out[..., :] = E[id, :].
No arithmetic, so both engines agree bit for bit. An id outside [0, V) is an error (NumPy would
wrap negative ids around silently; PyTorch raises, as here).
Backward: dE (V, d) starts at +0 and row id of dE gets dout[n, :] added for every token n in
row-major order of tokens, so a repeated id accumulates its rows in token order.
"""

import numpy as np


def embedding_forward(tokens, E):
    """Returns (out, cache): out (..., d); cache holds tokens and V (dE scatters dout by id)."""
    tokens = np.asarray(tokens)
    E = np.asarray(E, dtype=np.float64)
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"embedding: token ids must be integers, got dtype {tokens.dtype}")
    if E.ndim != 2:
        raise ValueError(f"embedding: table E must be (V, d), got shape {E.shape}")
    V = E.shape[0]
    bad = (tokens < 0) | (tokens >= V)
    if np.any(bad):
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise IndexError(f"embedding: token id {int(tokens[where])} at index {where} is outside "
                         f"[0, {V}); the vocabulary has {V} rows")
    out = E[tokens]  # (..., d)
    return out, {"tokens": tokens.astype(np.int64), "V": V}


def embedding_backward(dout, cache):
    """Returns dE (V, d): dout's rows scattered back to their ids, accumulated in token order."""
    tokens, V = cache["tokens"], cache["V"]
    dout = np.asarray(dout, dtype=np.float64)
    if dout.ndim != tokens.ndim + 1 or dout.shape[:-1] != tokens.shape:
        raise ValueError(f"embedding_backward: dout must have shape {tokens.shape + ('d',)}, got {dout.shape}")
    d = dout.shape[-1]
    dout2 = dout.reshape(-1, d)  # (N, d)
    dE = np.zeros((V, d))  # (V, d)
    # inverts: out = E[tokens]
    np.add.at(dE, tokens.reshape(-1), dout2)  # unbuffered, one row at a time in row-major token order
    return dE
