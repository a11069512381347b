"""The lesson's block, the decoder-only model and its KV cache against PyTorch float64 (a third
oracle), and the cache's bit identity inside the reference (docs/lesson_block.md,
docs/decoder_lm.md, docs/kv_cache.md).

The oracle is the lesson's class as the lesson writes it: nn.MultiheadAttention(batch_first=True)
(biases on the four projections), a ReLU FFN, two layer norms, pre-norm residuals; the weights are
copied from ours. Tolerances, each with its reason:
- ATOL, the ops' declared `torch` tolerance (1e-12, each op's bundle, ops/attention/<op>.json): both sides are float64, but torch sums in BLAS order, scales q before the product
  (ours divides the scores) and adds -inf, not -1e6, at masked scores (both give weight +0); for
  these sizes the differences stay near 1e-15.
- The KV cache against full recomputation, and a left-padded row against the row alone: 0, bit
  for bit (the module doc of reference/runs/kv_cache.py says why); a cache bug moves logits by O(1).
"""

import numpy as np
import pytest
import torch
from torch import nn

from reference.core.rng import Generator
from toolkit import close, t, tolerance
from reference.models.decoder_lm import (decoder_lm_forward, decoder_lm_loss, decoder_lm_loss_backward,
                                         init_decoder_lm_params)
from reference.nn.lesson_attention import causal_keep, lesson_attention_forward
from reference.nn.lesson_block import (NAMES, init_lesson_block_params, lesson_block_backward, lesson_block_forward,
                                       lesson_block_param_count)
from reference.runs.kv_cache import generate_cached, generate_full, left_pad

ATOL = tolerance("lesson_block", "torch")  # ops/attention/lesson_block.json; the same for every op of this file





class LessonBlock(nn.Module):
    """The lesson's block, as the lesson writes it (eval mode: no dropout)."""

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True, dtype=torch.float64)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff, dtype=torch.float64), nn.ReLU(),
                                nn.Linear(d_ff, d_model, dtype=torch.float64))
        self.ln1 = nn.LayerNorm(d_model, dtype=torch.float64)
        self.ln2 = nn.LayerNorm(d_model, dtype=torch.float64)

    def forward(self, x, mask=None, key_padding_mask=None):
        h = self.ln1(x)
        a, w = self.attn(h, h, h, attn_mask=mask, key_padding_mask=key_padding_mask, average_attn_weights=False)
        x = x + a
        return x + self.ff(self.ln2(x)), w


TORCH_NAMES = {"ln1.gamma": "ln1.weight", "ln1.beta": "ln1.bias", "attn.W_in": "attn.in_proj_weight",
               "attn.b_in": "attn.in_proj_bias", "attn.W_o": "attn.out_proj.weight", "attn.b_o": "attn.out_proj.bias",
               "ln2.gamma": "ln2.weight", "ln2.beta": "ln2.bias", "ffn.W1": "ff.0.weight", "ffn.b1": "ff.0.bias",
               "ffn.W2": "ff.2.weight", "ffn.b2": "ff.2.bias"}


def copied_block(params, d, heads, F):
    block = LessonBlock(d, heads, F)
    state = block.state_dict()
    with torch.no_grad():
        for ours, theirs in TORCH_NAMES.items():
            state[theirs].copy_(t(params[ours]))
    return block


def jittered_block(seed, d, F):
    """Our init, with the norms and the (zero-initialised) attention biases moved off their constants."""
    g = Generator(seed)
    params = init_lesson_block_params(g, d, F)
    for name in NAMES:
        if name.endswith(".gamma"):
            params[name] = 1.0 + 0.1 * g.normal((d,))
        elif name.endswith((".beta", "b_in", "b_o")):
            params[name] = 0.1 * g.normal(params[name].shape)
    return g, params


def causal_mask(T):
    return torch.triu(torch.ones(T, T, dtype=torch.bool), 1)  # True = not allowed (nn.MultiheadAttention)


# ---- the block --------------------------------------------------------------------------------

@pytest.mark.parametrize("d, heads, F, count", [(64, 4, 256, 49_984), (768, 12, 3072, 7_087_872)])
def test_parameter_counts_are_the_lessons(d, heads, F, count):
    assert sum(p.numel() for p in LessonBlock(d, heads, F).parameters()) == count
    assert lesson_block_param_count(d, F) == count
    assert sum(p.size for p in init_lesson_block_params(Generator(0), d, F).values()) == count
    assert set(TORCH_NAMES.values()) == set(LessonBlock(d, heads, F).state_dict()), "every torch tensor is mapped"


def test_init_is_pytorchs_default():
    """W_in Xavier-uniform over (3d, d), W_o U(+-1/sqrt(d)), biases 0, norms 1 and 0."""
    d = 64
    p = init_lesson_block_params(Generator(1), d, 256)
    xavier, bound = np.sqrt(6 / (4 * d)), 1 / np.sqrt(d)
    assert np.abs(p["attn.W_in"]).max() <= xavier and np.abs(p["attn.W_in"]).max() > 0.99 * xavier
    assert np.abs(p["attn.W_o"]).max() <= bound and np.abs(p["attn.W_o"]).max() > 0.99 * bound
    assert not p["attn.b_in"].any() and not p["attn.b_o"].any()
    fresh = nn.MultiheadAttention(d, 4, batch_first=True)
    assert fresh.in_proj_weight.shape == p["attn.W_in"].shape and not fresh.in_proj_bias.detach().any()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d, heads, F", [(8, 2, 32), (64, 4, 256)])
def test_block_matches_the_lessons_class(causal, d, heads, F):
    g, params = jittered_block(20 + d, d, F)
    x = g.normal((3, 7, d))
    block = copied_block(params, d, heads, F)
    xt = t(x).requires_grad_()
    expected, weights = block(xt, causal_mask(7) if causal else None)
    out, cache = lesson_block_forward(x, params, heads, causal_keep(7) if causal else None)
    close(out, expected.detach().numpy(), f"block d {d} causal {causal}", ATOL)
    close(cache["weights"], weights.detach().numpy(), "attention weights (per head)", ATOL)
    dout = g.normal(out.shape)
    (expected * t(dout)).sum().backward()
    dx, grads = lesson_block_backward(dout, cache)
    close(dx, xt.grad.numpy(), "dx", ATOL)
    named = dict(block.named_parameters())
    for ours, theirs in TORCH_NAMES.items():
        close(grads[ours], named[theirs].grad.numpy(), f"d {ours}", ATOL)


def test_lesson_attention_is_nn_multihead_attention():
    g, params = jittered_block(30, 16, 32)
    attn = {k[len("attn."):]: v for k, v in params.items() if k.startswith("attn.")}
    x = g.normal((2, 5, 16))
    mha = nn.MultiheadAttention(16, 4, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(t(attn["W_in"]))
        mha.in_proj_bias.copy_(t(attn["b_in"]))
        mha.out_proj.weight.copy_(t(attn["W_o"]))
        mha.out_proj.bias.copy_(t(attn["b_o"]))
        expected, _ = mha(t(x), t(x), t(x), attn_mask=causal_mask(5))
    close(lesson_attention_forward(x, attn, 4, causal_keep(5))[0], expected.numpy(), "lesson attention, causal", ATOL)


# ---- the decoder-only model -------------------------------------------------------------------

MODEL = {"vocab": 7, "max_len": 16, "d": 8, "heads": 2, "ffn_hidden": 16, "blocks": 2}


class TorchLM(nn.Module):
    def __init__(self, params, config):
        super().__init__()
        d = config["d"]
        self.tok = nn.Embedding(config["vocab"], d, dtype=torch.float64)
        self.pos = nn.Embedding(config["max_len"], d, dtype=torch.float64)
        self.blocks = nn.ModuleList(copied_block({n: params[f"blk{i}.{n}"] for n in NAMES}, d, config["heads"],
                                                 config["ffn_hidden"]) for i in range(config["blocks"]))
        self.ln = nn.LayerNorm(d, dtype=torch.float64)
        self.head = nn.Linear(d, config["vocab"], dtype=torch.float64)
        with torch.no_grad():
            for module, w, b in ((self.ln, "ln_f.gamma", "ln_f.beta"), (self.head, "head.W", "head.b")):
                module.weight.copy_(t(params[w]))
                module.bias.copy_(t(params[b]))
            self.tok.weight.copy_(t(params["tok"]))
            self.pos.weight.copy_(t(params["pos"]))

    def forward(self, tokens, pads=None):
        B, T = tokens.shape
        pads = torch.zeros(B, dtype=torch.long) if pads is None else torch.as_tensor(pads)
        positions = (torch.arange(T)[None] - pads[:, None]).clamp(min=0)
        x = self.tok(tokens) + self.pos(positions)
        # pads as key padding, with the causal mask; a row of pads only gets -inf everywhere in
        # torch (NaN), so pads are masked by a float -1e6 as ours: the same weights elsewhere
        allowed = (torch.arange(T)[None, None] >= pads[:, None, None]) & ~causal_mask(T)[None]
        mask = torch.where(allowed, 0.0, -1e6).to(torch.float64)
        mask = mask.repeat_interleave(self.blocks[0].attn.num_heads, dim=0)  # (B * H, T, T), batch-major
        for blk in self.blocks:
            x, _ = blk(x, mask)
        return self.head(self.ln(x))


def lm(seed):
    g = Generator(seed)
    params = init_decoder_lm_params(g, MODEL)
    for name in params:  # the attention biases start at 0: move them
        if name.endswith(("b_in", "b_o")):
            params[name] = 0.3 * g.normal(params[name].shape)
    return g, params


@pytest.mark.parametrize("pads", [None, [0, 3, 5]])
def test_decoder_lm_matches_torch(pads):
    g, params = lm(40)
    tokens = g.integers((3, 6), 0, MODEL["vocab"])
    expected = TorchLM(params, MODEL)(torch.as_tensor(tokens), pads).detach().numpy()
    logits, _ = decoder_lm_forward(tokens, params, MODEL, None if pads is None else np.array(pads))
    for b in range(3):  # a row's pad slots are never read: compare its real positions
        start = 0 if pads is None else pads[b]
        close(logits[b, start:], expected[b, start:], f"row {b}", ATOL)


def test_decoder_lm_backward_matches_autograd():
    g, params = lm(41)
    tokens = g.integers((2, 6), 0, MODEL["vocab"])
    targets = g.integers((2, 6), 0, MODEL["vocab"])
    weights = np.array([[1.0] * 6, [0.0, 0.0, 1.0, 1.0, 1.0, 0.0]])
    loss, cache = decoder_lm_loss(params, MODEL, tokens, targets, weights)
    grads = decoder_lm_loss_backward(cache)
    model = TorchLM(params, MODEL)
    logits = model(torch.as_tensor(tokens))
    per = nn.functional.cross_entropy(logits.reshape(-1, MODEL["vocab"]), torch.as_tensor(targets).reshape(-1), reduction="none")
    torch_loss = (per * t(weights).reshape(-1)).sum() / t(weights).sum()
    torch_loss.backward()
    assert abs(loss - float(torch_loss.detach())) <= ATOL
    close(grads["tok"], model.tok.weight.grad.numpy(), "d tok", ATOL)
    close(grads["pos"], model.pos.weight.grad.numpy(), "d pos", ATOL)
    close(grads["head.W"], model.head.weight.grad.numpy(), "d head.W", ATOL)
    close(grads["blk0.attn.W_in"], model.blocks[0].attn.in_proj_weight.grad.numpy(), "d blk0.attn.W_in", ATOL)
    close(grads["blk1.attn.b_o"], model.blocks[1].attn.out_proj.bias.grad.numpy(), "d blk1.attn.b_o", ATOL)


# ---- the KV cache -----------------------------------------------------------------------------

PROMPTS = [[1, 2, 3, 4, 5], [3], [2, 2, 6], [0, 4, 4, 1]]


def test_cached_generation_is_full_recomputation_bit_for_bit():
    _, params = lm(42)
    prompts, pads = left_pad(PROMPTS, 6)
    cached = generate_cached(params, MODEL, prompts, pads, 7, 6)
    full = generate_full(params, MODEL, prompts, pads, 7, 6)
    for key in ("tokens", "margins", "lengths", "logits"):
        assert np.array_equal(cached[key], full[key]), f"cached {key} differs from full recomputation"
    assert np.unique(cached["lengths"]).size > 1, "the rows should stop at different steps"


def test_a_left_padded_row_generates_what_it_generates_alone_bit_for_bit():
    _, params = lm(42)
    prompts, pads = left_pad(PROMPTS, 6)
    batch = generate_cached(params, MODEL, prompts, pads, 7, 6)
    for n, p in enumerate(PROMPTS):
        alone = generate_cached(params, MODEL, np.array([p]), np.zeros(1, dtype=np.int64), 7, 6)
        assert np.array_equal(alone["logits"][0], batch["logits"][n]), f"prompt {n}: padded batch differs from alone"
        assert np.array_equal(alone["tokens"][0], batch["tokens"][n])


def test_cached_logits_match_torchs_full_recomputation():
    _, params = lm(43)
    prompts, pads = left_pad(PROMPTS, 6)
    cached = generate_cached(params, MODEL, prompts, pads, 7, 6)
    model = TorchLM(params, MODEL)
    for n, p in enumerate(PROMPTS):
        seq = list(p)
        for s in range(int(cached["lengths"][n])):
            expected = model(torch.as_tensor([seq])).detach().numpy()[0, -1]
            close(cached["logits"][n, s], expected, f"prompt {n}, step {s}", ATOL)
            seq.append(int(cached["tokens"][n, s]))

