"""Cases of the lesson's block and the decoder-only model: forward cases of the biased attention,
the block, the model and KV-cache generation; gradient checks of the block and the model
(twin: casesLm.ts; docs/lesson_block.md, docs/decoder_lm.md, docs/kv_cache.md).

Each op has a draw function (DRAWS) and a compute function (COMPUTE) (cases.py). Every draw
first draws the parameters (the init function: PyTorch's defaults), then moves what init leaves
at a constant away from it, for each parameter name in order: a layer norm's gamma becomes
1 + 0.1 z, its beta 0.1 z, an attention bias (b_in, b_o) 0.1 z, z ~ N(0, 1) of the tensor's shape
(so a port that dropped a bias or a norm's affine cannot pass by init's 1 and 0); then the data.
Gradient checks then make gradcheck's own draws from that position on (reference/runs/gradcheck.py)
and write the same outputs as cases_gradcheck.py (loss, grad.*, check.*, direction.*, kink_retries).
"""

import numpy as np

from ..core import case_config as cc
from ..models.decoder_lm import decoder_lm_forward, decoder_lm_loss, decoder_lm_loss_backward, init_decoder_lm_params
from ..nn.lesson_attention import causal_keep, init_lesson_attention_params, lesson_attention_forward
from ..nn.lesson_block import (init_lesson_block_params, lesson_block_backward, lesson_block_forward,
                               lesson_block_param_count)
from ..nn.loss import sequence_weights
from ..core.ops import sum_last
from ..runs.kv_cache import generate_cached, generate_full, left_pad
from ..runs.gradcheck import run_check
from .cases_gradcheck import relu_pattern


def _jitter(rng, params):
    """Norms and attention biases away from init, in parameter order (the module doc)."""
    for name in params:
        if name.endswith(".gamma"):
            params[name] = 1.0 + 0.1 * rng.normal(params[name].shape)
        elif name.endswith((".beta", "b_in", "b_o")):
            params[name] = 0.1 * rng.normal(params[name].shape)
    return params


def _model(config):
    return {n: cc.positive_int(config, n) for n in ("vocab", "max_len", "d", "heads", "ffn_hidden", "blocks")}


def _params(inputs, *data):
    """The handed inputs but the data: the model's parameters, by name."""
    return {name: t for name, t in inputs.items() if name not in data}


def _keep(config, T):
    return causal_keep(T) if cc.get(config, "causal", False) else None


def lesson_attention_inputs(config, rng):
    # config: B, T, d, heads, causal (default false)
    # draws: init_lesson_attention_params (W_in, W_o); b_in, b_o jittered; x ~ N(0, 1) (B, T, d)
    B, T, d = (cc.positive_int(config, n) for n in ("B", "T", "d"))
    params = _jitter(rng, init_lesson_attention_params(rng, d))
    return {"x": rng.normal((B, T, d)), **params}


def lesson_attention(inputs, config, rng=None):
    (x,) = cc.need(inputs, "x")
    out, cache = lesson_attention_forward(x, _params(inputs, "x"), cc.positive_int(config, "heads"), _keep(config, x.shape[1]))
    return {"out": out, "weights": cache["weights"]}


def lesson_block_inputs(config, rng):
    # config: B, T, d, heads, ffn_hidden, causal (default false)
    # draws: init_lesson_block_params; norms and biases jittered; x ~ N(0, 1) (B, T, d)
    B, T, d, F = (cc.positive_int(config, n) for n in ("B", "T", "d", "ffn_hidden"))
    params = _jitter(rng, init_lesson_block_params(rng, d, F))
    return {"x": rng.normal((B, T, d)), **params}


def lesson_block(inputs, config, rng=None):
    (x,) = cc.need(inputs, "x")
    d, F = cc.positive_int(config, "d"), cc.positive_int(config, "ffn_hidden")
    out, cache = lesson_block_forward(x, _params(inputs, "x"), cc.positive_int(config, "heads"), _keep(config, x.shape[1]))
    count = np.array(lesson_block_param_count(d, F), dtype=np.int64)
    return {"out": out, "weights": cache["weights"], "param_count": count}


def decoder_lm_inputs(config, rng):
    # config: the model's (vocab, max_len, d, heads, ffn_hidden, blocks), B, T, pads null | (B,)
    # draws: init_decoder_lm_params; norms and biases jittered; tokens U{0..vocab-1} (B, T)
    model = _model(config)
    B, T = cc.positive_int(config, "B"), cc.positive_int(config, "T")
    params = _jitter(rng, init_decoder_lm_params(rng, model))
    inputs = {"tokens": rng.integers((B, T), 0, model["vocab"]), **params}
    pads = cc.get(config, "pads", None)
    if pads is not None:
        inputs["pads"] = cc.int_array(pads, "pads")
    return inputs


def decoder_lm(inputs, config, rng=None):
    (tokens,) = cc.need(inputs, "tokens")
    logits, cache = decoder_lm_forward(tokens, _params(inputs, "tokens", "pads"), _model(config), inputs.get("pads"))
    outputs = {"logits": logits}
    for i, w in enumerate(cache["weights"]):
        outputs[f"blk{i}.weights"] = w
    return outputs


def kv_generate_inputs(config, rng):
    # config: the model's, prompt_lens (N lengths), steps (G), eos
    # draws: init_decoder_lm_params; norms and biases jittered; each prompt's ids U{0..vocab-1}
    #   (its length), prompt by prompt; the prompts are handed left-padded with eos, with their pads
    model = _model(config)
    lens = [int(n) for n in cc.int_array(cc.get(config, "prompt_lens"), "prompt_lens")]
    params = _jitter(rng, init_decoder_lm_params(rng, model))
    prompts = [[int(t) for t in rng.integers((n,), 0, model["vocab"])] for n in lens]
    padded, pads = left_pad(prompts, cc.get(config, "eos"))
    return {"prompts": padded, "pads": pads, **params}


def kv_generate(inputs, config, rng=None):
    padded, pads = cc.need(inputs, "prompts", "pads")
    model, params = _model(config), _params(inputs, "prompts", "pads")
    steps, eos = cc.positive_int(config, "steps"), cc.get(config, "eos")
    prompts = [[int(t) for t in row[pad:]] for row, pad in zip(padded, pads)]
    cached = generate_cached(params, model, padded, pads, steps, eos)
    full = generate_full(params, model, padded, pads, steps, eos)
    alone = [generate_full(params, model, np.array([p]), np.zeros(1, dtype=np.int64), steps, eos) for p in prompts]
    outputs = {}
    for name, gen in (("cached", cached), ("recomputed", full)):
        outputs.update({f"{name}.tokens": gen["tokens"], f"{name}.margin": gen["margins"], f"{name}.logits": gen["logits"]})
    outputs["alone.tokens"] = np.concatenate([a["tokens"] for a in alone])  # (N, G)
    outputs["alone.logits"] = np.concatenate([a["logits"] for a in alone])  # (N, G, V)
    return outputs


def gradcheck_lesson_block_inputs(config, rng):
    # config: B, T, d, heads, ffn_hidden, causal (default false), gradcheck's
    # draws: init_lesson_block_params; norms and biases jittered; x ~ N(0, 1) (B, T, d);
    #   R ~ N(0, 1) (B, T, d); then, in the check, gradcheck's draws. loss = sum of out * R (in order): dout = R
    B, T, d, F = (cc.positive_int(config, n) for n in ("B", "T", "d", "ffn_hidden"))
    params = _jitter(rng, init_lesson_block_params(rng, d, F))
    x = rng.normal((B, T, d))
    return {"x": x, "R": rng.normal((B, T, d))}, params


def gradcheck_lesson_block(inputs, config, rng, params):
    x, R = cc.need(inputs, "x", "R")
    heads, keep = cc.positive_int(config, "heads"), _keep(config, x.shape[1])

    def loss_of(p):
        out, cache = lesson_block_forward(x, p, heads, keep)
        return float(sum_last((out * R).reshape(-1))), cache

    def loss_fn(p):
        loss, cache = loss_of(p)
        return loss, relu_pattern([cache])

    loss, cache = loss_of(params)
    _, grads = lesson_block_backward(R, cache)
    return run_check(config, rng, params, loss_fn, grads, loss)


def gradcheck_decoder_lm_inputs(config, rng):
    # config: the model's, B, T, target_lens (B,) (default: every position counts), gradcheck's
    # draws: init_decoder_lm_params; norms and biases jittered; tokens U{0..vocab-1} (B, T);
    #   targets U{0..vocab-1} (B, T); then, in the check, gradcheck's draws
    model = _model(config)
    B, T = cc.positive_int(config, "B"), cc.positive_int(config, "T")
    params = _jitter(rng, init_decoder_lm_params(rng, model))
    tokens = rng.integers((B, T), 0, model["vocab"])
    inputs = {"tokens": tokens, "targets": rng.integers((B, T), 0, model["vocab"])}
    lens = cc.get(config, "target_lens", None)
    if lens is not None:
        inputs["weights"] = sequence_weights(cc.int_array(lens, "target_lens"), T)
    return inputs, params


def gradcheck_decoder_lm(inputs, config, rng, params):
    tokens, targets = cc.need(inputs, "tokens", "targets")
    model, weights = _model(config), inputs.get("weights")

    def loss_fn(p):
        loss, cache = decoder_lm_loss(p, model, tokens, targets, weights)
        return loss, relu_pattern(cache["model"]["blocks"])

    loss, cache = decoder_lm_loss(params, model, tokens, targets, weights)
    return run_check(config, rng, params, loss_fn, decoder_lm_loss_backward(cache), loss)


DRAWS = {"lesson_attention": lesson_attention_inputs, "lesson_block": lesson_block_inputs,
         "decoder_lm": decoder_lm_inputs, "kv_generate": kv_generate_inputs,
         "gradcheck_lesson_block": gradcheck_lesson_block_inputs, "gradcheck_decoder_lm": gradcheck_decoder_lm_inputs}
COMPUTE = {"lesson_attention": lesson_attention, "lesson_block": lesson_block, "decoder_lm": decoder_lm,
           "kv_generate": kv_generate, "gradcheck_lesson_block": gradcheck_lesson_block,
           "gradcheck_decoder_lm": gradcheck_decoder_lm}
