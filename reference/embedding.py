"""Token embedding: a lookup of rows of the table E (twin: embedding.ts).

Shapes: tokens int (...) with ids in [0, V); E (V, d) -> out (..., d), out[..., :] = E[id, :].
No arithmetic, so both engines agree bit for bit. An id outside [0, V) is an error (NumPy would
wrap negative ids around silently; PyTorch raises, as here).
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
