"""Gradient-check cases (kind "gradcheck") of the three models that train: the encoder-decoder
Transformer, the ViT and act 4's alignment scorer; and of RoPE attention's backward through the
rotations of its queries and keys (twin: casesGradcheck.ts). An op's own gradient check may live
beside its forward instead (grouped-query attention's: cases_attention.py).

Each draw function draws, in this order: the model's parameters (its init function), then the layer
norms jittered (for each parameter name in order: a gamma becomes 1 + 0.1 * N(0, 1), a beta
0.1 * N(0, 1); the ViT's <cls> then becomes N(0, 1)), so a backward that ignored gamma, beta or
<cls> cannot pass by the accident of init's 1, 0 and 0; then the data. The check then draws, from
that position of the stream (where an engine handed the inputs resumes it), when the config's
dropout > 0, one integer mask seed U{0..2^31-1}: every loss evaluation draws its dropout masks
from a fresh Generator(mask seed), so the finite differences see the masks the backward uses;
then gradcheck's own draws (coordinates, then directions: reference/runs/gradcheck.py).

Inputs: the data only; the parameters are handed to the other engines beside them, not written.
Outputs, with <name> every parameter name:
    loss                  () the loss at the parameters
    grad.<name>           the full analytic gradient, compared across engines
    check.<name>.index    int64 (n,) flat row-major indices of the checked coordinates
    check.<name>.analytic (n,), check.<name>.numeric (n,), check.<name>.rel_err (n,)
    direction.analytic    (R,), direction.numeric (R,), direction.rel_err (R,)
    kink_retries          int64 () how many checks were repeated with a halved step because a
                          ReLU pre-activation changed sign inside the stencil (Transformer only)
Config, besides the model's: full_max (default 32), samples (default 8), directions (default 3).
RoPE attention has no parameters: its "parameters" are q, k and v, its loss sum(out * dout) for a
drawn dout (an input), summed in index order.
"""

import numpy as np

from ..core import case_config as cc
from ..models.alignment import alignment_data, alignment_loss, alignment_loss_backward, init_alignment_params
from ..runs.gradcheck import run_check
from ..core.rng import Generator
from ..models.transformer import init_transformer_params, transformer_loss, transformer_loss_backward
from ..models.vit import init_vit_params, vit_loss, vit_loss_backward
from ..core.ops import sum_last
from ..nn.rope import rope_attention_backward, rope_attention_forward
from .cases_attention import _even, _positions, _valid_lens
from .cases_models import _transformer_config, _vit_config


def _lens(config, key, B, limit, low=1):
    # low 0 for the source: an empty source masks every key (uniform weights 1/K)
    value = cc.get(config, key, None)
    if value is None:
        return None
    lens = cc.int_array(value, key)
    if lens.shape != (B,) or np.any(lens < low) or np.any(lens > limit):
        raise cc.CaseError(f"config {key!r} must list {B} lengths in [{low}, {limit}], got {value!r}")
    return lens


def _jitter_norms(rng, params):
    """Layer norms away from init, in parameter order: gamma = 1 + 0.1 z, beta = 0.1 z."""
    for name in params:
        if name.endswith(".gamma"):
            params[name] = 1.0 + 0.1 * rng.normal(params[name].shape)
        elif name.endswith(".beta"):
            params[name] = 0.1 * rng.normal(params[name].shape)
    return params


def _mask_seed(config, rng):
    """The dropout masks' seed, drawn only when the config's dropout > 0."""
    if cc.get(config, "dropout", 0.0) > 0.0:
        return int(rng.integers((1,), 0, 2**31)[0])
    return None


def _masks(seed):
    return None if seed is None else Generator(seed)


def relu_pattern(blocks):
    """Where every FFN pre-activation of the blocks (their caches, in order) is > 0, block by block."""
    return np.concatenate([blk["ffn"]["h_pre"].reshape(-1) > 0.0 for blk in blocks])


def gradcheck_transformer_inputs(config, rng):
    # config: vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks, dec_blocks, dropout (default 0),
    #   B, T_src, T_tgt, src_valid_lens null | (B,), tgt_valid_lens null | (B,), gradcheck's
    # draws: init_transformer_params; norms jittered; src U{0..vocab_src-1} (B, T_src);
    #   tgt_out U{0..vocab_tgt-1} (B, T_tgt), tgt_in = tgt_out shifted right behind id 0 (<bos>);
    #   then, in the check, the mask seed (dropout > 0) and gradcheck's draws
    model = _transformer_config(config)
    B, S, T = (cc.positive_int(config, n) for n in ("B", "T_src", "T_tgt"))
    params = _jitter_norms(rng, init_transformer_params(rng, model))
    src = rng.integers((B, S), 0, model["vocab_src"])
    tgt_out = rng.integers((B, T), 0, model["vocab_tgt"])
    tgt_in = np.concatenate([np.zeros((B, 1), dtype=np.int64), tgt_out[:, :-1]], axis=1)  # (B, T)
    inputs = {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out}
    for key, limit, low in (("src_valid_lens", S, 0), ("tgt_valid_lens", T, 1)):
        lens = _lens(config, key, B, limit, low)
        if lens is not None:
            inputs[key] = lens
    return inputs, params


def gradcheck_transformer(inputs, config, rng, params):
    src, tgt_in, tgt_out = cc.need(inputs, "src", "tgt_in", "tgt_out")
    src_lens, tgt_lens = inputs.get("src_valid_lens"), inputs.get("tgt_valid_lens")
    model, seed = _transformer_config(config), _mask_seed(config, rng)

    def loss_fn(p):
        loss, cache = transformer_loss(p, model, src, src_lens, tgt_in, tgt_out, tgt_lens, _masks(seed))
        return loss, relu_pattern(cache["model"]["enc"]["blocks"] + cache["model"]["dec"]["blocks"])

    loss, cache = transformer_loss(params, model, src, src_lens, tgt_in, tgt_out, tgt_lens, _masks(seed))
    grads = transformer_loss_backward(cache)
    return run_check(config, rng, params, loss_fn, grads, loss)


def gradcheck_vit_inputs(config, rng):
    # config: image, channels, patch, d, heads, mlp_hidden, blocks, classes, dropout (default 0), B,
    #   gradcheck's
    # draws: init_vit_params; norms jittered; cls N(0, 1) (d,); images U[0, 1) (B, C, H, H);
    #   labels U{0..classes-1} (B,); then, in the check, the mask seed (dropout > 0) and gradcheck's draws
    model, B = _vit_config(config), cc.positive_int(config, "B")
    params = _jitter_norms(rng, init_vit_params(rng, model))
    params["cls"] = rng.normal((model["d"],))
    images = rng.uniform((B, model["channels"], model["image"], model["image"]))
    return {"images": images, "labels": rng.integers((B,), 0, model["classes"])}, params


def gradcheck_vit(inputs, config, rng, params):
    images, labels = cc.need(inputs, "images", "labels")
    model, seed = _vit_config(config), _mask_seed(config, rng)

    def loss_fn(p):
        return vit_loss(p, model, images, labels, _masks(seed))[0], None

    loss, cache = vit_loss(params, model, images, labels, _masks(seed))
    return run_check(config, rng, params, loss_fn, vit_loss_backward(cache), loss)


def gradcheck_alignment_inputs(config, rng):
    # config: E, H, pairs (default 1), gradcheck's
    # draws: init_alignment_params; alignment_data (pair by pair: source then target embeddings);
    #   then, in the check, gradcheck's draws
    E, H, pairs = cc.positive_int(config, "E"), cc.positive_int(config, "H"), cc.positive_int(config, "pairs", 1)
    params = init_alignment_params(rng, E, H)
    data = alignment_data(rng, E, pairs)
    return {"queries": data["queries"], "keys": data["keys"], "gold": data["gold"]}, params


def gradcheck_alignment(inputs, config, rng, params):
    data = dict(zip(("queries", "keys", "gold"), cc.need(inputs, "queries", "keys", "gold")))

    def loss_fn(p):
        return alignment_loss(p, data)[0], None

    loss, cache = alignment_loss(params, data)
    grads = alignment_loss_backward(cache)
    return {"weights": cache["weights"], **run_check(config, rng, params, loss_fn, grads, loss)}


def gradcheck_rope_inputs(config, rng):
    # config: lead (e.g. [B]), Q, K, D (even), V; valid_lens null | (B,) | (B, Q); q_positions null | (Q,),
    #   k_positions null | (K,); gradcheck's
    # draws: q ~ N(0, 1) (lead, Q, D); k (lead, K, D); v (lead, K, V) (the parameters); dout (lead, Q, V);
    #   then, in the check, gradcheck's draws
    lead = cc.shape(config, "lead")
    Q, K, V = (cc.positive_int(config, n) for n in ("Q", "K", "V"))
    D = _even(config, "D")
    params = {"q": rng.normal(lead + (Q, D)), "k": rng.normal(lead + (K, D)), "v": rng.normal(lead + (K, V))}
    inputs = {"dout": rng.normal(lead + (Q, V))}
    lens = _valid_lens(config)
    inputs.update({} if lens is None else {"valid_lens": lens})
    for key, n in (("q_positions", Q), ("k_positions", K)):
        pos = _positions(config, key, n)
        inputs.update({} if pos is None else {key: pos})
    return inputs, params


def gradcheck_rope(inputs, config, rng, params):
    (dout,) = cc.need(inputs, "dout")
    lens, q_pos, k_pos = (inputs.get(n) for n in ("valid_lens", "q_positions", "k_positions"))

    def loss_fn(p):
        out, _ = rope_attention_forward(p["q"], p["k"], p["v"], lens, q_pos, k_pos)
        return float(sum_last((out * dout).reshape(1, -1))[0]), None  # L = sum(out * dout), in index order

    loss, _ = loss_fn(params)
    _, cache = rope_attention_forward(params["q"], params["k"], params["v"], lens, q_pos, k_pos)
    grads = dict(zip(("q", "k", "v"), rope_attention_backward(dout, cache)))
    return run_check(config, rng, params, loss_fn, grads, loss)

DRAWS = {"gradcheck_transformer": gradcheck_transformer_inputs, "gradcheck_vit": gradcheck_vit_inputs,
         "gradcheck_alignment": gradcheck_alignment_inputs, "gradcheck_rope": gradcheck_rope_inputs}
COMPUTE = {"gradcheck_transformer": gradcheck_transformer, "gradcheck_vit": gradcheck_vit,
           "gradcheck_alignment": gradcheck_alignment, "gradcheck_rope": gradcheck_rope}
