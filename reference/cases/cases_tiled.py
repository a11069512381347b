"""Cases of tiled attention (the online softmax) and sliding-window attention, each computed
tiled and in the plain form of the same maths, forward and backward (twin: casesTiled.ts;
docs/tiled_attention.md).

Each op has a draw function (DRAWS) and a compute function (COMPUTE) (cases.py). Draws, in this
order: q ~ N(0, std^2) (B, H, T, D), k ~ N(0, std^2) (B, H, K, D), v ~ N(0, 1) (B, H, K, V),
dout ~ N(0, 1) (B, H, T, V). Outputs: the tiled form's out, lse, dq, dk, dv, and
the plain form's plain.out, plain.dq, plain.dk, plain.dv. The two forms round differently, so
their pairs are expected within the tolerance of each other, not bit-identical (the catalogue's
expect.agree); each engine's tiled form is bit-identical to the other engine's.
"""

import numpy as np

from ..core import case_config as cc
from ..nn.dot_product_attention import dot_product_attention_backward, dot_product_attention_forward
from ..nn.sliding_window import (sliding_window_backward, sliding_window_forward, sliding_window_plain_backward,
                                 sliding_window_plain_forward)
from ..nn.tiled_attention import tiled_attention_backward, tiled_attention_forward


def _draw(config, rng, keys):
    B, H, T, D, V = (cc.positive_int(config, n) for n in ("B", "H", "T", "D", "V"))
    std = cc.get(config, "std", 1.0)
    q = rng.normal((B, H, T, D), 0.0, std)
    k = rng.normal((B, H, keys, D), 0.0, std)
    v = rng.normal((B, H, keys, V))
    dout = rng.normal((B, H, T, V))
    return {"q": q, "k": k, "v": v, "dout": dout}


def _outputs(out, cache, grads, plain_out, plain_grads):
    outputs = {"out": out, "lse": cache["lse"]}
    for name, tiled, plain in zip(("dq", "dk", "dv"), grads, plain_grads):
        outputs[name] = tiled
        outputs[f"plain.{name}"] = plain
    outputs["plain.out"] = plain_out
    return outputs


def tiled_attention_inputs(config, rng):
    # config: B, H, T (queries), K (keys, default T), D, V, tile, causal (default false; needs K = T), std (default 1)
    # draws: the module doc's
    return _draw(config, rng, cc.positive_int(config, "K", cc.positive_int(config, "T")))


def tiled_attention(inputs, config, rng=None):
    q, k, v, dout = cc.need(inputs, "q", "k", "v", "dout")
    T, causal = q.shape[2], cc.get(config, "causal", False)
    out, cache = tiled_attention_forward(q, k, v, cc.positive_int(config, "tile"), causal)
    grads = tiled_attention_backward(dout, cache)
    lens = np.tile(np.arange(1, T + 1, dtype=np.int64), (q.shape[0], 1)) if causal else None  # (B, T): q + 1
    plain_out, plain_cache = dot_product_attention_forward(q, k, v, lens)
    plain_grads = dot_product_attention_backward(dout, plain_cache)
    return _outputs(out, cache, grads, plain_out, plain_grads)


def sliding_window_attention_inputs(config, rng):
    # config: B, H, T, D, V, window, tile, std (default 1)
    # draws: the module doc's (keys: T)
    return _draw(config, rng, cc.positive_int(config, "T"))


def sliding_window_attention(inputs, config, rng=None):
    q, k, v, dout = cc.need(inputs, "q", "k", "v", "dout")
    window, tile = cc.positive_int(config, "window"), cc.positive_int(config, "tile")
    out, cache = sliding_window_forward(q, k, v, window, tile)
    grads = sliding_window_backward(dout, cache)
    plain_out, plain_cache = sliding_window_plain_forward(q, k, v, window)
    plain_grads = sliding_window_plain_backward(dout, plain_cache)
    return _outputs(out, cache, grads, plain_out, plain_grads)


DRAWS = {"tiled_attention": tiled_attention_inputs, "sliding_window_attention": sliding_window_attention_inputs}
COMPUTE = {"tiled_attention": tiled_attention, "sliding_window_attention": sliding_window_attention}
