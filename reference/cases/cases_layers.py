"""Forward cases of the building-block layers (twin: casesLayers.ts). Each builder draws in the
order written in its comment, identical in both engines, and returns (inputs, outputs) as dicts
of named arrays. Parameters come from init.py, so the cases also exercise the initialiser.
"""

import numpy as np

from ..core import case_config as cc
from ..nn.dropout import dropout_forward
from ..nn.embedding import embedding_forward
from ..nn.ffn import ffn_forward
from ..nn.gelu import erf, gelu_forward
from ..nn.init import embedding_params, linear_params
from ..nn.layer_norm import EPS, layer_norm_forward
from ..nn.linear import linear_forward


def linear_case(config, rng):
    # config: x_shape [..., I], out O, bias (default true)
    # draws: x ~ N(0, 1) (x_shape); W ~ U(+-1/sqrt(I)) (O, I); b likewise (O,) when bias
    x_shape = cc.shape(config, "x_shape")
    x = rng.normal(x_shape, 0.0, 1.0)
    W, b = linear_params(rng, cc.positive_int(config, "out"), x_shape[-1], cc.get(config, "bias", True))
    out, _ = linear_forward(x, W, b)
    inputs = {"x": x, "W": W} if b is None else {"x": x, "W": W, "b": b}
    return inputs, {"out": out}


def embedding_case(config, rng):
    # config: V, d; tokens (explicit ids) or tokens_shape
    # draws: E ~ N(0, 1) (V, d); then, without explicit tokens, ids ~ integers[0, V) (tokens_shape)
    V, d = cc.positive_int(config, "V"), cc.positive_int(config, "d")
    E = embedding_params(rng, V, d)
    if "tokens" in config:
        tokens = cc.int_array(config["tokens"], "tokens")
    else:
        tokens = rng.integers(cc.shape(config, "tokens_shape"), 0, V)
    out, _ = embedding_forward(tokens, E)
    return {"tokens": tokens, "E": E}, {"out": out}


def layer_norm_case(config, rng):
    # config: shape [..., d]; offset, spread (x ~ N(offset, spread^2), defaults 0, 1);
    # affine "random" | "default"; constant_rows: flat row indices set to their first value; eps
    # draws: x (shape); then, when affine is "random", gamma ~ U(0.5, 1.5) (d,), beta ~ N(0, 1) (d,)
    shape = cc.shape(config, "shape")
    d = shape[-1]
    x = rng.normal(shape, cc.get(config, "offset", 0.0), cc.get(config, "spread", 1.0))
    rows = x.reshape(-1, d)  # a view: editing rows edits x
    for r in cc.get(config, "constant_rows", []):
        rows[r, :] = rows[r, 0]
    if cc.get(config, "affine", "default") == "random":
        gamma = rng.uniform((d,), 0.5, 1.5)
        beta = rng.normal((d,), 0.0, 1.0)
    else:
        gamma, beta = np.ones(d), np.zeros(d)
    out, cache = layer_norm_forward(x, gamma, beta, cc.get(config, "eps", EPS))
    return {"x": x, "gamma": gamma, "beta": beta}, {"out": out, "mean": cache["mean"], "rstd": cache["rstd"]}


def ffn_case(config, rng):
    # config: x_shape [..., d], F
    # draws: x ~ N(0, 1); W1, b1 = linear_params(F, d); W2, b2 = linear_params(d, F)
    x_shape = cc.shape(config, "x_shape")
    d, F = x_shape[-1], cc.positive_int(config, "F")
    x = rng.normal(x_shape, 0.0, 1.0)
    W1, b1 = linear_params(rng, F, d)
    W2, b2 = linear_params(rng, d, F)
    params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}
    out, cache = ffn_forward(x, params)
    return {"x": x, **params}, {"out": out, "h": cache["h"]}


def gelu_case(config, rng):
    # config: grid [lo, hi, n] (x_i = lo + i * ((hi - lo) / (n - 1)), no draws)
    #         or shape + std (x ~ N(0, std^2), drawn)
    if "grid" in config:
        lo, hi, n = cc.get(config, "grid")
        x = lo + np.arange(n) * ((hi - lo) / (n - 1))
    else:
        x = rng.normal(cc.shape(config, "shape"), 0.0, cc.get(config, "std", 1.0))
    out, _ = gelu_forward(x)
    return {"x": x}, {"out": out, "erf": erf(x)}


def dropout_case(config, rng):
    # config: shape, p
    # draws: x ~ N(0, 1) (shape); then the keep mask (shape) when p > 0
    x = rng.normal(cc.shape(config, "shape"), 0.0, 1.0)
    out, cache = dropout_forward(x, cc.get(config, "p"), rng)
    outputs = {"out": out} if cache["mask"] is None else {"out": out, "mask": cache["mask"]}
    return {"x": x}, outputs


BUILDERS = {
    "linear": linear_case,
    "embedding": embedding_case,
    "layer_norm": layer_norm_case,
    "ffn": ffn_case,
    "gelu": gelu_case,
    "dropout": dropout_case,
}
