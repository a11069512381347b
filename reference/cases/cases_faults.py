"""Cheap forward cases that reach what otherwise only the training runs reach (twin:
casesFaults.ts; docs/faults.md): the digits data, greedy decoding on a small untrained model,
a few steps of clipping and Adam on drawn gradients, the garment images, and the bits of erf
and GELU. Each exists so that a fault of the catalogue (each op's bundle, ops/attention/<op>.json) is caught in
seconds instead of by a 600-step run, or at all (erf_bits: a 1e-7-accurate erf moves GELU by
less than the tolerance; its digests are bit-exact)."""

import numpy as np

from ..core import case_config as cc
from ..runs.decode import greedy_decode
from ..runs.digits import BOS, EOS, batch_rows, digits_data, draw_digit_set, encode_inputs
from ..runs.garments import make_garments
from ..nn.loss import cross_entropy_backward, cross_entropy_forward, sequence_weights
from ..nn.gelu import erf, gelu_backward, gelu_forward
from ..runs.optim import adam_init, adam_step, clip_gradients
from ..nn.positional_encoding import sinusoidal_table
from ..runs.reversal import exact_rows, reversal_model_config
from ..runs.train import state_digest
from ..models.transformer import init_transformer_params


def _ids(x):
    return np.asarray(x, dtype=np.int64)


def digits_data_case(config, rng):
    # config: n_train, n_test, min_digits, max_digits, batch, steps
    # draws: digits_data (the training set, then the held-out set)
    n_train, n_test = cc.positive_int(config, "n_train"), cc.positive_int(config, "n_test")
    lo, hi = cc.positive_int(config, "min_digits"), cc.positive_int(config, "max_digits")
    data = digits_data(rng, n_train, n_test, lo, hi)
    outputs = {}
    for split in ("train", "test"):
        for name, value in data[split].items():
            outputs[f"{split}.{name}"] = _ids(value)
    batch, steps = cc.positive_int(config, "batch"), cc.positive_int(config, "steps")
    outputs["batch_rows"] = _ids([batch_rows(n_train, batch, t) for t in range(1, steps + 1)])
    return {}, outputs


def greedy_decode_case(config, rng):
    # config: the reversal model's sizes (d, heads, ffn_hidden, enc_blocks, dec_blocks), n,
    #   min_digits, max_digits, eos_bias (added to the output bias of <eos>, so rows end early)
    # draws: init_transformer_params; n distinct inputs (draw_digit_set)
    model = reversal_model_config(config)
    params = init_transformer_params(rng, model)
    params["dec.out.b"] = params["dec.out.b"].copy()
    params["dec.out.b"][EOS] = params["dec.out.b"][EOS] + cc.get(config, "eos_bias", 0.0)
    hi = cc.get(config, "max_digits")
    inputs = draw_digit_set(rng, cc.get(config, "n"), cc.get(config, "min_digits"), hi)
    arrays = encode_inputs(inputs, hi)
    dec = greedy_decode(params, model, arrays["src"], arrays["src_lens"], hi + 1, BOS, EOS)
    outputs = {
        "decode.tokens": dec["tokens"], "decode.margin": dec["margins"], "decode.lengths": dec["lengths"],
        "decode.exact": exact_rows(dec["tokens"], arrays), "cross_weights": dec["cross_weights"][0],
    }
    return {"src": arrays["src"], "src_lens": arrays["src_lens"], **params}, outputs


def optim_steps_case(config, rng):
    # config: shapes (a list of parameter shapes), steps, lr, clip (null: never), grad_scale (one per step)
    # draws: every parameter ~ N(0, 1) in order; then per step every gradient ~ N(0, 1) in order,
    #   multiplied by that step's grad_scale
    shapes = cc.get(config, "shapes")
    names = [f"p{i}" for i in range(len(shapes))]
    params = {name: rng.normal(tuple(s), 0.0, 1.0) for name, s in zip(names, shapes)}
    start = {name: params[name].copy() for name in names}
    state = adam_init(params, names)
    clip, lr, scales = cc.get(config, "clip"), cc.get(config, "lr"), cc.get(config, "grad_scale")
    norms = []
    for t in range(cc.get(config, "steps")):
        grads = {name: rng.normal(tuple(s), 0.0, 1.0) * scales[t] for name, s in zip(names, shapes)}
        norms.append(clip_gradients(grads, names, clip) if clip is not None else 0.0)
        adam_step(params, grads, names, state, lr)
    outputs = {"grad_norm": np.array(norms), "opt": np.array([state["t"], state["b1t"], state["b2t"]])}
    for name in names:
        outputs[f"param.{name}"] = params[name]
        outputs[f"m.{name}"] = state["m"][name]
        outputs[f"v.{name}"] = state["v"][name]
    return {f"init.{name}": start[name] for name in names}, outputs, {"state": state_digest(params, names, state)}, {}


def garments_data_case(config, rng):
    # config: n, classes; draws: make_garments (permutation, variants, shifts, scales, noise)
    images, labels = make_garments(rng, cc.positive_int(config, "n"), cc.positive_int(config, "classes"))
    return {}, {"images": images, "labels": _ids(labels)}


def erf_bits_case(config, rng):
    # config: grid [lo, hi, n] or points [x, ...] (no draws); table [L, d] (optional); outputs erf,
    # GELU and GELU's derivative at x, the sinusoidal table when asked, and the SHA-256 digest of
    # each (bit identity, where the tolerance would let a 1e-7 erf or a last-bit ln 10000 through)
    if "points" in config:
        x = np.array(cc.get(config, "points"), dtype=np.float64)
    else:
        lo, hi, n = cc.get(config, "grid")
        x = lo + np.arange(n) * ((hi - lo) / (n - 1))
    e = erf(x)
    out, cache = gelu_forward(x)
    dx = gelu_backward(np.ones_like(x), cache)
    outputs = {"erf": e, "gelu": out, "dgelu": dx}
    if "table" in config:
        L, d = cc.get(config, "table")
        outputs["table"] = sinusoidal_table(L, d)
    digests = {name: state_digest({name: value}, [name]) for name, value in outputs.items()}
    return {"x": x}, outputs, digests, {}


def cross_entropy_inputs(config, rng):
    # config: B, T, V, scale, valid_lens (B,) (weights: sequence_weights)
    # draws: logits ~ N(0, scale^2) (B, T, V); targets uniform in [0, V) (B, T)
    B, T, V = cc.get(config, "B"), cc.get(config, "T"), cc.get(config, "V")
    logits = rng.normal((B, T, V), 0.0, cc.get(config, "scale"))
    targets = rng.integers((B, T), 0, V)
    return {"logits": logits, "targets": _ids(targets), "valid_lens": cc.int_array(cc.get(config, "valid_lens"), "valid_lens")}


def cross_entropy(inputs, config, rng=None):
    logits, targets, lens = cc.need(inputs, "logits", "targets", "valid_lens")
    loss, cache = cross_entropy_forward(logits, targets, sequence_weights(lens, logits.shape[1]))
    return {"loss": np.array(loss), "dlogits": cross_entropy_backward(cache)}


DRAWS = {"cross_entropy": cross_entropy_inputs}
COMPUTE = {"cross_entropy": cross_entropy}
BUILDERS = {
    "digits_data": digits_data_case,
    "greedy_decode": greedy_decode_case,
    "optim_steps": optim_steps_case,
    "garments_data": garments_data_case,
    "erf_bits": erf_bits_case,
}
