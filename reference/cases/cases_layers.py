"""Forward cases of the building-block layers (twin: casesLayers.ts). Each op has a draw function
(DRAWS: config, generator -> named inputs, in the order its comment gives; the runner hands what
it draws to the other engines) and a compute function (COMPUTE: named inputs, config, generator
-> named outputs). Dropout's keep mask is what its cases verify: every engine draws it, from the
position of the stream the inputs were handed with.
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


def linear_inputs(config, rng):
    # config: x_shape [..., I], out O, bias (default true)
    # draws: x ~ N(0, 1) (x_shape); W ~ U(+-1/sqrt(I)) (O, I); b likewise (O,) when bias
    x_shape = cc.shape(config, "x_shape")
    x = rng.normal(x_shape, 0.0, 1.0)
    W, b = linear_params(rng, cc.positive_int(config, "out"), x_shape[-1], cc.get(config, "bias", True))
    return {"x": x, "W": W} if b is None else {"x": x, "W": W, "b": b}


def linear(inputs, config, rng=None):
    x, W = cc.need(inputs, "x", "W")
    return {"out": linear_forward(x, W, inputs.get("b"))[0]}


def embedding_inputs(config, rng):
    # config: V, d; tokens (explicit ids) or tokens_shape
    # draws: E ~ N(0, 1) (V, d); then, without explicit tokens, ids ~ integers[0, V) (tokens_shape)
    V, d = cc.positive_int(config, "V"), cc.positive_int(config, "d")
    E = embedding_params(rng, V, d)
    if "tokens" in config:
        tokens = cc.int_array(config["tokens"], "tokens")
    else:
        tokens = rng.integers(cc.shape(config, "tokens_shape"), 0, V)
    return {"tokens": tokens, "E": E}


def embedding(inputs, config, rng=None):
    tokens, E = cc.need(inputs, "tokens", "E")
    return {"out": embedding_forward(tokens, E)[0]}


def layer_norm_inputs(config, rng):
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
    return {"x": x, "gamma": gamma, "beta": beta}


def layer_norm(inputs, config, rng=None):
    x, gamma, beta = cc.need(inputs, "x", "gamma", "beta")
    out, cache = layer_norm_forward(x, gamma, beta, cc.get(config, "eps", EPS))
    return {"out": out, "mean": cache["mean"], "rstd": cache["rstd"]}


def ffn_inputs(config, rng):
    # config: x_shape [..., d], F
    # draws: x ~ N(0, 1); W1, b1 = linear_params(F, d); W2, b2 = linear_params(d, F)
    x_shape = cc.shape(config, "x_shape")
    d, F = x_shape[-1], cc.positive_int(config, "F")
    x = rng.normal(x_shape, 0.0, 1.0)
    W1, b1 = linear_params(rng, F, d)
    W2, b2 = linear_params(rng, d, F)
    return {"x": x, "W1": W1, "b1": b1, "W2": W2, "b2": b2}


def ffn(inputs, config, rng=None):
    x, W1, b1, W2, b2 = cc.need(inputs, "x", "W1", "b1", "W2", "b2")
    out, cache = ffn_forward(x, {"W1": W1, "b1": b1, "W2": W2, "b2": b2})
    return {"out": out, "h": cache["h"]}


def gelu_inputs(config, rng):
    # config: grid [lo, hi, n] (x_i = lo + i * ((hi - lo) / (n - 1)), no draws)
    #         or shape + std (x ~ N(0, std^2), drawn)
    if "grid" in config:
        lo, hi, n = cc.get(config, "grid")
        x = lo + np.arange(n) * ((hi - lo) / (n - 1))
    else:
        x = rng.normal(cc.shape(config, "shape"), 0.0, cc.get(config, "std", 1.0))
    return {"x": x}


def gelu(inputs, config, rng=None):
    (x,) = cc.need(inputs, "x")
    return {"out": gelu_forward(x)[0], "erf": erf(x)}


def dropout_inputs(config, rng):
    # config: shape, p
    # draws: x ~ N(0, 1) (shape); then, in the forward, the keep mask (shape) when p > 0
    return {"x": rng.normal(cc.shape(config, "shape"), 0.0, 1.0)}


def dropout(inputs, config, rng):
    (x,) = cc.need(inputs, "x")
    out, cache = dropout_forward(x, cc.get(config, "p"), rng)
    return {"out": out} if cache["mask"] is None else {"out": out, "mask": cache["mask"]}


DRAWS = {
    "linear": linear_inputs,
    "embedding": embedding_inputs,
    "layer_norm": layer_norm_inputs,
    "ffn": ffn_inputs,
    "gelu": gelu_inputs,
    "dropout": dropout_inputs,
}
COMPUTE = {"linear": linear, "embedding": embedding, "layer_norm": layer_norm, "ffn": ffn, "gelu": gelu, "dropout": dropout}
