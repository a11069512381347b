"""The encoder-decoder Transformer's backward pass, proven three ways.

1. PyTorch float64 autograd (a third oracle written independently of both engines): the
   reference's gradient of every parameter tensor of the whole model equals torch's, for a model
   built from torch layers (nn.Embedding, nn.TransformerEncoderLayer / DecoderLayer, nn.Linear)
   holding copies of our parameters, with the loss written in torch (per-token cross-entropy,
   padding excluded, mean over the counted tokens). Also the block-level backward passes.
2. The two engines: the port's gradients for the same seed-drawn parameters and inputs equal the
   reference's. Each engine draws its own parameters and inputs from the shared generator; only
   the resulting gradients cross over, for the comparison.
3. Sanity of the oracle itself: a deliberately broken backward (a residual path dropped, a weight
   gradient transposed) fails the torch comparison; and a few central differences with dropout
   on (where torch is not used) agree with the analytic gradient.

Tolerances, declared in ops/attention/transformer.json (transformer; the blocks declare their own torch_backward),
each with its reason:
- TORCH, torch_backward = 1e-10 absolute: float64 on both sides, but torch sums in BLAS order and masks with
  -inf where we use -1e6 (equal weights once exp underflows); differences stay near 1e-15 for
  these sizes, so 1e-10 leaves room without hiding any wrong term (those are ~1e-2 and up).
- ENGINES, engines_backward = 1e-12 absolute: both engines sum in the same order; only exp, tanh, sqrt, log may
  differ in the last bit between libm and V8.
- FD, fd = 1e-6 relative: fourth-order central differences,
  (-L(x+2h) + 8 L(x+h) - 8 L(x-h) + L(x-2h)) / 12h with h = 1e-4, have truncation error ~h^4
  (1e-16 times a fifth derivative of modest size) and rounding error ~1.5 eps |L| / h ~ 1e-11
  for losses near 2.5; against gradients of at least 1e-4 (only such coordinates are picked)
  that is <= 1e-7 relative, while a wrong gradient term is off by order 1.
"""

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import reference.nn.decoder_block as decoder_block_module
import reference.nn.encoder_block as encoder_block_module
from reference.nn.decoder_block import decoder_block_backward, decoder_block_forward, init_decoder_block_params
from reference.core.params import sub_params
from reference.nn.encoder_block import encoder_block_backward, encoder_block_forward, init_encoder_block_params
from reference.core.rng import Generator
from reference.models.transformer import init_transformer_params, transformer_loss, transformer_loss_backward
from toolkit import central_difference, close, mismatch, run_port, t, tolerance

TORCH = tolerance("transformer", "torch_backward")
ENGINES = tolerance("transformer", "engines_backward")
FD = tolerance("transformer", "fd")  # with its step and min_grad


def mismatches(actual, expected, tol):
    """The messages of the names whose tensors differ by more than tol (toolkit.mismatch's shape)."""
    assert sorted(actual) == sorted(expected), f"gradient names differ: {sorted(actual)} vs {sorted(expected)}"
    return [m for m in (mismatch(actual[name], expected[name], name, tol) for name in expected) if m is not None]


def randomise_norms(rng, params):
    """Every gamma 1 + N(0, 0.1^2), every beta N(0, 0.1^2), in sorted name order (the port's test
    script does the same), so a swapped gamma/beta gradient cannot pass."""
    for name in sorted(params):
        if name.endswith(".gamma"):
            params[name] = 1.0 + 0.1 * rng.normal(params[name].shape)
        elif name.endswith(".beta"):
            params[name] = 0.1 * rng.normal(params[name].shape)
    return params


# ---- the torch model, from torch layers holding copies of our parameters ----

def torch_mha(p, d, h):
    """nn.MultiheadAttention without biases; W_q, W_k, W_v stacked in in_proj_weight."""
    mha = nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([t(p["W_q"]), t(p["W_k"]), t(p["W_v"])]))
        mha.out_proj.weight.copy_(t(p["W_o"]))
    return mha


def mha_grads(mha, prefix, d):
    g = mha.in_proj_weight.grad.numpy()
    return {prefix + "W_q": g[:d], prefix + "W_k": g[d:2 * d], prefix + "W_v": g[2 * d:],
            prefix + "W_o": mha.out_proj.weight.grad.numpy()}


def torch_linear(W, b):
    lin = nn.Linear(W.shape[1], W.shape[0], dtype=torch.float64)
    with torch.no_grad():
        lin.weight.copy_(t(W))
        lin.bias.copy_(t(b))
    return lin


def torch_norm(p, prefix):
    norm = nn.LayerNorm(p[prefix + "gamma"].shape[0], eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        norm.weight.copy_(t(p[prefix + "gamma"]))
        norm.bias.copy_(t(p[prefix + "beta"]))
    return norm


class TorchEncoderBlock:
    """Post-norm: Y = LN1(X + MHA(X, X, X)), out = LN2(Y + FFN(Y)), padded keys ignored."""

    def __init__(self, p, d, h):
        self.d = d
        self.attn = torch_mha(sub_params(p, "attn."), d, h)
        self.ln1, self.ln2 = torch_norm(p, "ln1."), torch_norm(p, "ln2.")
        self.lin1, self.lin2 = torch_linear(p["ffn.W1"], p["ffn.b1"]), torch_linear(p["ffn.W2"], p["ffn.b2"])

    def __call__(self, x, key_padding_mask):
        a, _ = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
        y = self.ln1(x + a)
        return self.ln2(y + self.lin2(torch.relu(self.lin1(y))))

    def grads(self):
        g = mha_grads(self.attn, "attn.", self.d)
        for name, mod in (("ln1.", self.ln1), ("ln2.", self.ln2)):
            g[name + "gamma"], g[name + "beta"] = mod.weight.grad.numpy(), mod.bias.grad.numpy()
        for name, mod in (("1", self.lin1), ("2", self.lin2)):
            g["ffn.W" + name], g["ffn.b" + name] = mod.weight.grad.numpy(), mod.bias.grad.numpy()
        return g


class TorchDecoderBlock:
    """Y = LN1(X + MHA_self(X, causal)), Z = LN2(Y + MHA_cross(Y, E, E)), out = LN3(Z + FFN(Z))."""

    def __init__(self, p, d, h):
        self.d = d
        self.self_attn = torch_mha(sub_params(p, "self_attn."), d, h)
        self.cross_attn = torch_mha(sub_params(p, "cross_attn."), d, h)
        self.ln1, self.ln2, self.ln3 = torch_norm(p, "ln1."), torch_norm(p, "ln2."), torch_norm(p, "ln3.")
        self.lin1, self.lin2 = torch_linear(p["ffn.W1"], p["ffn.b1"]), torch_linear(p["ffn.W2"], p["ffn.b2"])

    def __call__(self, x, enc, key_padding_mask):
        T = x.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True = may NOT attend
        s, _ = self.self_attn(x, x, x, attn_mask=causal, need_weights=False)
        y = self.ln1(x + s)
        c, _ = self.cross_attn(y, enc, enc, key_padding_mask=key_padding_mask, need_weights=False)
        z = self.ln2(y + c)
        return self.ln3(z + self.lin2(torch.relu(self.lin1(z))))

    def grads(self):
        g = {**mha_grads(self.self_attn, "self_attn.", self.d), **mha_grads(self.cross_attn, "cross_attn.", self.d)}
        for name, mod in (("ln1.", self.ln1), ("ln2.", self.ln2), ("ln3.", self.ln3)):
            g[name + "gamma"], g[name + "beta"] = mod.weight.grad.numpy(), mod.bias.grad.numpy()
        for name, mod in (("1", self.lin1), ("2", self.lin2)):
            g["ffn.W" + name], g["ffn.b" + name] = mod.weight.grad.numpy(), mod.bias.grad.numpy()
        return g


def padding_mask(lens, S):
    """key_padding_mask from 1-D valid lengths: True = ignore that key."""
    return None if lens is None else torch.arange(S)[None, :] >= torch.as_tensor(np.asarray(lens))[:, None]


def sinusoids(T, d):
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    div = torch.pow(torch.tensor(10000.0, dtype=torch.float64), torch.arange(0, d, 2, dtype=torch.float64) / d)
    P = torch.zeros(T, d, dtype=torch.float64)
    P[:, 0::2] = torch.sin(pos / div)
    P[:, 1::2] = torch.cos(pos / div)
    return P


def torch_transformer_grads(params, config, src, src_lens, tgt_in, tgt_out, tgt_lens):
    """Loss and every parameter's gradient, by torch autograd, keyed by our names."""
    d, h = config["d"], config["heads"]
    S, T = src.shape[1], tgt_in.shape[1]
    enc_embed = nn.Embedding.from_pretrained(t(params["enc.embed"]), freeze=False)
    dec_embed = nn.Embedding.from_pretrained(t(params["dec.embed"]), freeze=False)
    enc_blocks = [TorchEncoderBlock(sub_params(params, f"enc.blk{i}."), d, h) for i in range(config["enc_blocks"])]
    dec_blocks = [TorchDecoderBlock(sub_params(params, f"dec.blk{j}."), d, h) for j in range(config["dec_blocks"])]
    out = torch_linear(params["dec.out.W"], params["dec.out.b"])
    kpm = padding_mask(src_lens, S)
    x = enc_embed(torch.as_tensor(src)) * math.sqrt(d) + sinusoids(S, d)
    for blk in enc_blocks:
        x = blk(x, kpm)
    y = dec_embed(torch.as_tensor(tgt_in)) * math.sqrt(d) + sinusoids(T, d)
    for blk in dec_blocks:
        y = blk(y, x, kpm)
    logits = out(y)  # (B, T, V)
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.as_tensor(tgt_out).reshape(-1), reduction="none")
    mask = (torch.arange(T)[None, :] < torch.as_tensor(np.asarray(tgt_lens))[:, None]).reshape(-1).to(torch.float64)
    loss = (ce * mask).sum() / mask.sum()
    loss.backward()
    grads = {"enc.embed": enc_embed.weight.grad.numpy()}
    for i, blk in enumerate(enc_blocks):
        grads.update({f"enc.blk{i}.{k}": v for k, v in blk.grads().items()})
    grads["dec.embed"] = dec_embed.weight.grad.numpy()
    for j, blk in enumerate(dec_blocks):
        grads.update({f"dec.blk{j}.{k}": v for k, v in blk.grads().items()})
    grads["dec.out.W"], grads["dec.out.b"] = out.weight.grad.numpy(), out.bias.grad.numpy()
    return float(loss.detach()), grads


# ---- the problems: padded sources, padded targets, 2 heads of dim d/2 ----

CONFIGS = {
    "one_plus_one": dict(vocab_src=11, vocab_tgt=9, d=8, ffn_hidden=16, heads=2, enc_blocks=1, dec_blocks=1, dropout=0.0),
    "two_plus_two": dict(vocab_src=10, vocab_tgt=12, d=8, ffn_hidden=12, heads=2, enc_blocks=2, dec_blocks=2, dropout=0.0),
}
B, S, T = 3, 6, 5
SRC_LENS = np.array([6, 3, 1])  # full, padded, a single real token
TGT_LENS = np.array([5, 2, 4])  # positions t >= len are padding, excluded from the loss


def problem(config, seed):
    """Parameters (norms randomised), then src, tgt_in, tgt_out, in this order from one generator.
    The port's script below draws the same things in the same order."""
    rng = Generator(seed)
    params = randomise_norms(rng, init_transformer_params(rng, config))
    src = rng.integers((B, S), 0, config["vocab_src"])
    tgt_in = rng.integers((B, T), 0, config["vocab_tgt"])
    tgt_out = rng.integers((B, T), 0, config["vocab_tgt"])
    return params, src, tgt_in, tgt_out


def reference_grads(params, config, src, tgt_in, tgt_out, rng=None):
    loss, cache = transformer_loss(params, config, src, SRC_LENS, tgt_in, tgt_out, TGT_LENS, rng)
    return loss, transformer_loss_backward(cache)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_transformer_gradients_match_torch(name):
    config = CONFIGS[name]
    params, src, tgt_in, tgt_out = problem(config, 5000 + config["enc_blocks"])
    loss, grads = reference_grads(params, config, src, tgt_in, tgt_out)
    torch_loss, expected = torch_transformer_grads(params, config, src, SRC_LENS, tgt_in, tgt_out, TGT_LENS)
    assert abs(loss - torch_loss) <= TORCH, f"{name} loss {loss!r}, torch {torch_loss!r}"
    assert list(grads) == list(params), "gradients must come keyed by the parameter names, in draw order"
    bad = mismatches(grads, expected, TORCH)
    assert not bad, f"transformer {name} gradients vs torch:\n  " + "\n  ".join(bad)


def test_padding_gets_no_gradient():
    """Padded source tokens and padded target positions contribute nothing: embedding rows used
    only there get exactly zero gradient, and changing a padded target changes no gradient."""
    config = CONFIGS["one_plus_one"]
    params, src, tgt_in, tgt_out = problem(config, 5100)
    real = np.arange(S)[None, :] < SRC_LENS[:, None]  # (B, S)
    src = np.where(real, np.where(src == 0, 1, src), 0)  # token 0 appears only in padding
    _, grads = reference_grads(params, config, src, tgt_in, tgt_out)
    assert np.all(grads["enc.embed"][0] == 0.0), "a padded source token got a gradient"
    assert np.any(grads["enc.embed"][1] != 0.0)
    tgt_out2 = tgt_out.copy()
    tgt_out2[1, 2:] = (tgt_out2[1, 2:] + 1) % config["vocab_tgt"]  # beyond TGT_LENS[1] = 2
    _, grads2 = reference_grads(params, config, src, tgt_in, tgt_out2)
    for k in grads:
        assert np.array_equal(grads[k], grads2[k]), f"{k}: a padded target position changed the gradient"


# ---- block level, against torch ----

def block_problem(seed, d=8, F_=16, decoder=False):
    rng = Generator(seed)
    p = (init_decoder_block_params if decoder else init_encoder_block_params)(rng, d, F_)
    p = randomise_norms(rng, p)
    x = rng.normal((2, 5, d))
    enc = rng.normal((2, 4, d)) if decoder else None
    dout = rng.normal((2, 5, d))
    return p, x, enc, dout


@pytest.mark.parametrize("lens", [None, [5, 2]])
def test_encoder_block_backward_matches_torch(lens):
    d, h = 8, 2
    p, x, _, dout = block_problem(5200, d)
    lens = None if lens is None else np.array(lens)
    out, cache = encoder_block_forward(x, lens, p, h)
    dx, grads = encoder_block_backward(dout, cache)
    assert list(grads) == list(p)
    blk = TorchEncoderBlock(p, d, h)
    xt = t(x, grad=True)
    out_t = blk(xt, padding_mask(lens, x.shape[1]))
    (out_t * t(dout)).sum().backward()
    tol = tolerance("encoder_block", "torch_backward")
    close(out, out_t, "block out", tol)
    bad = mismatches({"x": dx, **grads}, {"x": xt.grad.numpy(), **blk.grads()}, tol)
    assert not bad, "encoder block backward vs torch:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("lens", [None, [4, 1]])
def test_decoder_block_backward_matches_torch(lens):
    d, h = 8, 2
    p, x, enc, dout = block_problem(5300, d, decoder=True)
    lens = None if lens is None else np.array(lens)
    out, cache = decoder_block_forward(x, enc, lens, p, h)
    dx, denc, grads = decoder_block_backward(dout, cache)
    assert list(grads) == list(p)
    blk = TorchDecoderBlock(p, d, h)
    xt, et = t(x, grad=True), t(enc, grad=True)
    out_t = blk(xt, et, padding_mask(lens, enc.shape[1]))
    (out_t * t(dout)).sum().backward()
    tol = tolerance("decoder_block", "torch_backward")
    close(out, out_t, "block out", tol)
    bad = mismatches({"x": dx, "enc": denc, **grads}, {"x": xt.grad.numpy(), "enc": et.grad.numpy(), **blk.grads()}, tol)
    assert not bad, "decoder block backward vs torch:\n  " + "\n  ".join(bad)


# ---- a broken backward must fail the comparison ----

def torch_failures(config, seed):
    params, src, tgt_in, tgt_out = problem(config, seed)
    _, grads = reference_grads(params, config, src, tgt_in, tgt_out)
    _, expected = torch_transformer_grads(params, config, src, SRC_LENS, tgt_in, tgt_out, TGT_LENS)
    return mismatches(grads, expected, TORCH)


def test_dropped_residual_gradient_fails(monkeypatch):
    right = encoder_block_module.add_norm_backward

    def no_residual(dout, cache):
        dx, dy, dgamma, dbeta = right(dout, cache)
        return np.zeros_like(dx), dy, dgamma, dbeta  # forgets that x enters LN(x + y) directly

    monkeypatch.setattr(encoder_block_module, "add_norm_backward", no_residual)
    monkeypatch.setattr(decoder_block_module, "add_norm_backward", no_residual)
    bad = torch_failures(CONFIGS["one_plus_one"], 5400)
    assert any(b.startswith("enc.embed") for b in bad), f"a dropped residual path went unnoticed: {bad}"


def test_transposed_weight_gradient_fails(monkeypatch):
    right = encoder_block_module.multi_head_attention_backward

    def transposed(dout, cache):
        dx_q, dx_kv, grads = right(dout, cache)
        return dx_q, dx_kv, {**grads, "W_v": grads["W_v"].T.copy()}  # (d, d): the shape still fits

    monkeypatch.setattr(encoder_block_module, "multi_head_attention_backward", transposed)
    bad = torch_failures(CONFIGS["one_plus_one"], 5401)
    assert [b.split(":")[0] for b in bad] == ["enc.blk0.attn.W_v"], f"expected exactly W_v to fail: {bad}"


# ---- with dropout on: central differences in the reference ----

def test_transformer_gradients_with_dropout_match_central_differences():
    """p = 0.2 everywhere (torch is not used here: its masks would differ); each loss evaluation
    reseeds the generator, so every evaluation draws the same masks. One coordinate per tensor."""
    config = {**CONFIGS["two_plus_two"], "dropout": 0.2}
    params, src, tgt_in, tgt_out = problem(config, 5500)
    _, grads = reference_grads(params, config, src, tgt_in, tgt_out, Generator(77))
    pick = Generator(5501)
    checked = 0
    for name in params:
        flat = params[name].reshape(-1)
        g = grads[name].reshape(-1)
        candidates = np.flatnonzero(np.abs(g) >= FD.min_grad)
        if candidates.size == 0:
            continue
        i = int(candidates[int(pick.integers((1,), 0, candidates.size)[0])])
        loss = lambda: transformer_loss(params, config, src, SRC_LENS, tgt_in, tgt_out, TGT_LENS, Generator(77))[0]  # noqa: E731
        numeric = central_difference(loss, flat, i, FD.step, order=4)
        rel = abs(numeric - g[i]) / max(abs(numeric), abs(g[i]))
        assert rel <= FD, f"{name}[{i}]: analytic {g[i]!r}, numeric {numeric!r}, relative error {rel:.2e}"
        checked += 1
    assert checked >= len(params) - 4, f"only {checked} of {len(params)} tensors had a usable coordinate"


# ---- the port against the reference ----

PORT_SCRIPT = """
import { Generator } from './port_ts/src/core/rng.ts';
import { intTensor } from './port_ts/src/core/ops.ts';
import { initTransformerParams, transformerLoss, transformerLossBackward } from './port_ts/src/models/transformer.ts';
const { config, seed, dropoutSeed, B, S, T, srcLens, tgtLens } = JSON.parse(process.argv[1]);
const rng = new Generator(seed);
const params = initTransformerParams(rng, config);
for (const name of Object.keys(params).sort()) {  // as the test's randomise_norms
  const p = params[name], n = p.data.length;
  if (name.endsWith('.gamma')) { const z = rng.normal([n]); for (let i = 0; i < n; i++) p.data[i] = 1 + 0.1 * z.data[i]; }
  else if (name.endsWith('.beta')) { const z = rng.normal([n]); for (let i = 0; i < n; i++) p.data[i] = 0.1 * z.data[i]; }
}
const src = rng.integers([B, S], 0, config.vocab_src);
const tgtIn = rng.integers([B, T], 0, config.vocab_tgt);
const tgtOut = rng.integers([B, T], 0, config.vocab_tgt);
const drop = dropoutSeed === null ? null : new Generator(dropoutSeed);
const { loss, cache } = transformerLoss(params, config, src, intTensor([B], srcLens), tgtIn, tgtOut, intTensor([B], tgtLens), drop);
const grads = transformerLossBackward(cache);
const out = { loss, names: Object.keys(grads), grads: {} };
for (const [k, g] of Object.entries(grads)) out.grads[k] = { shape: g.shape, data: Array.from(g.data) };
console.log(JSON.stringify(out));
"""


def port_grads(node, repo_root, config, seed, dropout_seed):
    arg = json.dumps({"config": config, "seed": seed, "dropoutSeed": dropout_seed, "B": B, "S": S, "T": T,
                      "srcLens": SRC_LENS.tolist(), "tgtLens": TGT_LENS.tolist()})
    out = run_port(node, repo_root, PORT_SCRIPT, arg, timeout=120)
    grads = {k: np.array(v["data"], dtype=np.float64).reshape(v["shape"]) for k, v in out["grads"].items()}
    return out["loss"], out["names"], grads


@pytest.mark.parametrize("name, dropout", [("one_plus_one", 0.0), ("two_plus_two", 0.0), ("two_plus_two", 0.1)])
def test_port_gradients_equal_reference(node, repo_root, name, dropout):
    config = {**CONFIGS[name], "dropout": dropout}
    seed, dropout_seed = 5600 + config["enc_blocks"], (88 if dropout > 0 else None)
    params, src, tgt_in, tgt_out = problem(config, seed)
    rng = None if dropout_seed is None else Generator(dropout_seed)
    loss, grads = reference_grads(params, config, src, tgt_in, tgt_out, rng)
    port_loss, port_names, port = port_grads(node, repo_root, config, seed, dropout_seed)
    assert port_names == list(grads), "the port's gradients must come in the reference's (draw) order"
    assert abs(port_loss - loss) <= ENGINES, f"loss: port {port_loss!r}, reference {loss!r}"
    bad = mismatches(port, grads, ENGINES)
    assert not bad, f"port vs reference, {name} p={dropout}:\n  " + "\n  ".join(bad)
