"""The attention primitives of the reference against PyTorch float64 as a third oracle, and the
lesson's facts about them.

Oracles: torch.softmax with the book's -1e6 fill (masked softmax); F.scaled_dot_product_attention
with a bool attn_mask, True = allowed (dot-product attention); nn.MultiheadAttention with no
biases and our weights copied in, key_padding_mask / attn_mask True = blocked (multi-head
attention); a direct torch formula (additive attention). Rows whose valid length is 0 are uniform
in ours (the -1e6 fill) but NaN or zero in torch's -inf masking, so they are checked on our side
only and never fed to torch.
"""

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference.nn.additive_attention import additive_attention_forward
from reference.cases.cases import build
from reference.nn.dot_product_attention import dot_product_attention_forward
from reference.nn.masked_softmax import masked_softmax_forward
from reference.nn.multi_head_attention import merge_heads, multi_head_attention_forward, split_heads
from reference.core.rng import Generator
from toolkit import close, t, tolerance
import toolkit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = ("masked_softmax", "dot_product_attention", "multi_head_attention", "additive_attention")  # their bundles' cases

# Tolerances: each op's declared ones (their bundles, ops/attention/<op>.json), with their reasons.
TORCH = {op: tolerance(op, "torch") for op in ("masked_softmax", "dot_product_attention", "additive_attention",
                                               "multi_head_attention")}
BROKEN = 1e-3  # not a tolerance: a causal mask must change the output by far more than rounding


def keep_of(lens, Q, K):
    """Bool (B, Q, K), True where key j < the row's length; lens (B,) or (B, Q)."""
    lens = np.asarray(lens)
    per_row = np.broadcast_to(lens[:, None], (lens.shape[0], Q)) if lens.ndim == 1 else lens
    return np.arange(K)[None, None, :] < per_row[:, :, None]


def nonempty_rows(lens, shape):
    """Bool of shape (B, ..., Q): True where the row's valid length is > 0."""
    per_row = keep_of(lens, shape[-1], 1)[..., 0]  # (B, Q)
    B, Q = per_row.shape
    return np.broadcast_to(per_row.reshape((B,) + (1,) * (len(shape) - 2) + (Q,)), shape)


def draw_params(g, shapes):
    """Linear weights U(+-1/sqrt(fan_in)) in the given order, as the case builders draw them."""
    return {name: g.uniform(shape, -1 / np.sqrt(shape[1]), 1 / np.sqrt(shape[1])) for name, shape in shapes}


# ---------------------------------------------------------------- masked softmax

@pytest.mark.parametrize("lens", [None, [0, 2, 5], [[0, 1], [5, 3], [2, 0]]])
def test_masked_softmax_matches_torch_with_the_books_fill(lens):
    x = Generator(200).normal((3, 2, 5), 0.0, 3.0)
    ours, _ = masked_softmax_forward(x, None if lens is None else np.array(lens))
    xt = t(x)
    if lens is not None:
        xt = xt.masked_fill(~torch.from_numpy(keep_of(lens, 2, 5)), -1e6)
    close(ours, torch.softmax(xt, dim=-1), f"masked softmax, lens {lens}", TORCH["masked_softmax"])


def test_masked_softmax_huge_scores_and_empty_rows():
    x = Generator(201).normal((2, 3, 6), 800.0, 1000.0)
    with np.errstate(over="ignore"):
        assert np.any(np.isinf(np.exp(x))), "the scores must overflow a softmax without the max shift"
    ours, _ = masked_softmax_forward(x, np.array([0, 4]))
    assert np.all(np.isfinite(ours))
    np.testing.assert_array_equal(ours[0], np.full((3, 6), 1 / 6))  # length 0: uniform over all keys
    assert np.all(ours[1, :, 4:] == 0.0)
    close(ours[1, :, :4], torch.softmax(t(x[1, :, :4]), dim=-1), "huge scores, kept keys", TORCH["masked_softmax"])


# ---------------------------------------------------------------- dot-product attention

def sdpa(q, k, v, keep=None):
    mask = None if keep is None else torch.from_numpy(keep)
    return F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=mask)


def test_three_key_example_from_the_lesson():
    q = np.array([[[1.0, 0.0]]])
    k = np.array([[[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]])
    v = np.array([[[10.0, 0.0], [0.0, 10.0], [5.0, 5.0]]])
    out, cache = dot_product_attention_forward(q, k, v)
    np.testing.assert_array_equal(np.round(cache["weights"].ravel(), 3), [0.434, 0.214, 0.351])
    np.testing.assert_array_equal(np.round(out.ravel(), 1), [6.1, 3.9])
    close(out, sdpa(q, k, v), "three-key example", TORCH["dot_product_attention"])


def test_dot_product_matches_sdpa_and_mask_polarity_is_true_allowed():
    g = Generator(210)
    B, Q, K, D, V = 3, 4, 5, 6, 3
    q, k, v = g.normal((B, Q, D)), g.normal((B, K, D)), g.normal((B, K, V))
    lens = np.array([2, 5, 1])
    out, cache = dot_product_attention_forward(q, k, v, lens)
    keep = keep_of(lens, Q, K)
    close(out, sdpa(q, k, v, keep), "dot-product attention vs SDPA, 1-D lens", TORCH["dot_product_attention"])
    # weights through SDPA: attention to v = identity returns the weight rows themselves
    eye = np.broadcast_to(np.eye(K), (B, K, K))
    torch_weights = sdpa(q, k, eye, keep)
    close(cache["weights"], torch_weights, "weights vs SDPA", TORCH["dot_product_attention"])
    assert torch.all(torch_weights[torch.from_numpy(~keep)] == 0), "SDPA: False must mean blocked"
    # the opposite polarity (True = blocked) is a different computation: a real test of polarity
    flipped = sdpa(q, k, v, ~keep).numpy()
    assert np.max(np.abs(out - flipped)) > BROKEN


def test_dot_product_2d_lens_causal_equals_sdpa_is_causal():
    g = Generator(211)
    B, T, D = 2, 5, 4
    q, k, v = g.normal((B, T, D)), g.normal((B, T, D)), g.normal((B, T, D))
    causal = np.tile(np.arange(1, T + 1), (B, 1))  # (B, Q): query i sees keys 0..i
    out, _ = dot_product_attention_forward(q, k, v, causal)
    close(out, F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True), "causal via 2-D lens", TORCH["dot_product_attention"])


def test_dot_product_4d_heads_and_empty_rows_are_uniform():
    g = Generator(212)
    B, H, Q, K, D = 2, 3, 3, 4, 8
    q, k, v = g.normal((B, H, Q, D)), g.normal((B, H, K, D)), g.normal((B, H, K, D))
    lens = np.array([[1, 0, 4], [2, 3, 0]])  # (B, Q), rows with 0 included
    out, cache = dot_product_attention_forward(q, k, v, lens)
    empty = lens == 0  # (B, Q)
    w = cache["weights"].transpose(0, 2, 1, 3)  # (B, Q, H, K)
    np.testing.assert_array_equal(w[empty], np.full((int(empty.sum()), H, K), 1 / K))
    mean_v = np.broadcast_to(v.mean(axis=2, keepdims=True), out.shape).transpose(0, 2, 1, 3)
    close(out.transpose(0, 2, 1, 3)[empty], mean_v[empty], "length 0 averages all values", TORCH["dot_product_attention"])
    # the other rows against SDPA, never feeding it a fully blocked row
    keep = np.broadcast_to(keep_of(lens, Q, K)[:, None], (B, H, Q, K))
    fixed = keep | empty[:, None, :, None]  # fully blocked rows opened for torch, then ignored
    theirs = sdpa(q, k, v, np.ascontiguousarray(fixed)).numpy()
    rows = np.broadcast_to(~empty[:, None, :], (B, H, Q))
    close(out[rows], theirs[rows], "4-D with 2-D lens vs SDPA", TORCH["dot_product_attention"])


def test_dot_product_dropout_uses_the_mask_on_the_weights():
    g = Generator(213)
    q, k, v = g.normal((2, 3, 4)), g.normal((2, 6, 4)), g.normal((2, 6, 5))
    counter = g.counter
    out, cache = dot_product_attention_forward(q, k, v, None, 0.5, g)
    assert g.counter - counter == 2 * 3 * 6
    mask = cache["mask"]
    assert 0 < mask.sum() < mask.size
    expected = (t(cache["weights"]) * t(mask) / 0.5) @ t(v)
    close(out, expected, "dropout on the weights", TORCH["dot_product_attention"])
    close(cache["weights"], torch.softmax(t(q) @ t(k).transpose(-1, -2) / 2.0, dim=-1), "weights before dropout", TORCH["dot_product_attention"])


# ---------------------------------------------------------------- additive attention

def additive_torch(q, k, v, p, lens=None):
    feats = (t(q) @ t(p["W_q"]).T)[:, :, None, :] + (t(k) @ t(p["W_k"]).T)[:, None, :, :]
    scores = (torch.tanh(feats) @ t(p["w_v"]).T).squeeze(-1)
    if lens is not None:
        scores = scores.masked_fill(~torch.from_numpy(keep_of(lens, q.shape[1], k.shape[1])), -1e6)
    w = torch.softmax(scores, dim=-1)
    return w @ t(v), w


@pytest.mark.parametrize("lens, std", [(None, 1.0), ([0, 2, 4], 1.0), ([[1, 4], [0, 3], [2, 2]], 1.0), (None, 50.0)])
def test_additive_matches_a_direct_torch_formula(lens, std):
    g = Generator(220)
    B, Q, K, Dq, Dk, H, V = 3, 2, 4, 5, 3, 6, 2
    q, k, v = g.normal((B, Q, Dq), 0.0, std), g.normal((B, K, Dk), 0.0, std), g.normal((B, K, V))
    p = draw_params(g, [("W_q", (H, Dq)), ("W_k", (H, Dk)), ("w_v", (1, H))])
    lens = None if lens is None else np.array(lens)
    out, cache = additive_attention_forward(q, k, v, p, lens)
    theirs, w = additive_torch(q, k, v, p, lens)
    close(out, theirs, f"additive out, lens {lens}, std {std}", TORCH["additive_attention"])
    close(cache["weights"], w, f"additive weights, lens {lens}, std {std}", TORCH["additive_attention"])


# ---------------------------------------------------------------- multi-head attention

def torch_mha(x_q, x_kv, p, h, lens=None):
    """nn.MultiheadAttention, no biases, our weights copied in; returns (out, per-head weights).
    torch needs query features = embed_dim: when dq_in != d the queries are projected by torch
    beforehand and the module's query projection is the identity."""
    d, dq = p["W_q"].shape
    dkv = p["W_k"].shape[1]
    query, W_q = t(x_q), t(p["W_q"])
    if dq != d:
        query, W_q = query @ W_q.T, torch.eye(d, dtype=torch.float64)
    mha = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, kdim=dkv, vdim=dkv).double().eval()
    with torch.no_grad():
        if mha.in_proj_weight is not None:  # same dims: one packed (3d, d) matrix
            mha.in_proj_weight.copy_(torch.cat([W_q, t(p["W_k"]), t(p["W_v"])]))
        else:
            mha.q_proj_weight.copy_(W_q)
            mha.k_proj_weight.copy_(t(p["W_k"]))
            mha.v_proj_weight.copy_(t(p["W_v"]))
        mha.out_proj.weight.copy_(t(p["W_o"]))
    kwargs = {}
    if lens is not None and np.ndim(lens) == 1:
        kwargs["key_padding_mask"] = torch.from_numpy(np.arange(x_kv.shape[1])[None, :] >= np.asarray(lens)[:, None])
    elif lens is not None:  # (B, Q): blocked = not kept, repeated per head in batch-major order
        blocked = ~keep_of(lens, x_q.shape[1], x_kv.shape[1])
        kwargs["attn_mask"] = torch.from_numpy(blocked).repeat_interleave(h, dim=0)
    with torch.no_grad():
        out, w = mha(query, t(x_kv), t(x_kv), need_weights=True, average_attn_weights=False, **kwargs)
    return out, w


def mha_inputs(seed, B, Tq, d, dq, Tk=None, dkv=None):
    g = Generator(seed)
    x_q = g.normal((B, Tq, dq))
    x_kv = x_q if Tk is None else g.normal((B, Tk, dkv))
    dkv = dq if Tk is None else dkv
    p = draw_params(g, [("W_q", (d, dq)), ("W_k", (d, dkv)), ("W_v", (d, dkv)), ("W_o", (d, d))])
    return x_q, x_kv, p


@pytest.mark.parametrize("h, lens", [(2, None), (2, [3, 5, 1]), (4, [[1, 2, 3, 4, 5]] * 3), (1, None), (8, [2, 4, 5])])
def test_self_attention_matches_torch_multihead(h, lens):
    x, _, p = mha_inputs(230, 3, 5, 8, 8)
    lens = None if lens is None else np.array(lens)
    out, cache = multi_head_attention_forward(x, x, p, h, lens)
    theirs, w = torch_mha(x, x, p, h, lens)
    close(out, theirs, f"MHA out, h {h}, lens {lens}", TORCH["multi_head_attention"])
    close(cache["weights"], w, f"MHA per-head weights, h {h}, lens {lens}", TORCH["multi_head_attention"])


def test_cross_attention_matches_torch_with_kdim_vdim():
    x_q, x_kv, p = mha_inputs(231, 2, 3, 12, 7, Tk=5, dkv=5)
    lens = np.array([5, 2])
    out, cache = multi_head_attention_forward(x_q, x_kv, p, 3, lens)
    theirs, w = torch_mha(x_q, x_kv, p, 3, lens)
    close(out, theirs, "cross-attention out", TORCH["multi_head_attention"])
    close(cache["weights"], w, "cross-attention weights (B, H, Q, K)", TORCH["multi_head_attention"])


def test_mha_empty_rows_uniform_and_heads_split_in_feature_blocks():
    x, _, p = mha_inputs(232, 2, 4, 6, 6)
    out, cache = multi_head_attention_forward(x, x, p, 3, np.array([0, 4]))
    np.testing.assert_array_equal(cache["weights"][0], np.full((3, 4, 4), 0.25))
    # head i holds features [2i, 2i+2) of the projections, and merging undoes the split
    np.testing.assert_array_equal(cache["qh"][:, 1], cache["q"][:, :, 2:4])
    np.testing.assert_array_equal(merge_heads(split_heads(cache["q"], 3)), cache["q"])
    with pytest.raises(ValueError, match="divisible"):
        multi_head_attention_forward(x, x, p, 4)


def test_mha_dropout_is_one_mask_on_the_whole_weights_tensor():
    x, _, p = mha_inputs(233, 2, 5, 16, 16)
    g = Generator(234)
    out, cache = multi_head_attention_forward(x, x, p, 4, np.array([3, 5]), 0.1, g)
    mask = Generator(234).keep_mask((2, 4, 5, 5), 0.1)
    np.testing.assert_array_equal(cache["attn"]["mask"], mask)
    heads = (t(cache["weights"]) * (t(mask) / 0.9)) @ t(cache["vh"])  # (B, H, Q, D)
    close(out, t(merge_heads(heads.numpy())) @ t(p["W_o"]).T, "MHA with dropout on the weights", TORCH["multi_head_attention"])


def test_self_attention_is_permutation_equivariant_and_a_causal_mask_breaks_it():
    x, _, p = mha_inputs(235, 2, 6, 8, 8)
    perm = Generator(236).permutation(6)
    out, _ = multi_head_attention_forward(x, x, p, 2)
    out_perm, _ = multi_head_attention_forward(x[:, perm], x[:, perm], p, 2)
    close(out_perm, out[:, perm], "permuting tokens permutes the output", tolerance("multi_head_attention", "equivariance"))
    causal = np.tile(np.arange(1, 7), (2, 1))
    c_out, _ = multi_head_attention_forward(x, x, p, 2, causal)
    c_perm, _ = multi_head_attention_forward(x[:, perm], x[:, perm], p, 2, causal)
    assert np.max(np.abs(c_perm - c_out[:, perm])) > BROKEN


# ---------------------------------------------------------------- the catalogue against torch

def catalogue_cases():
    return [c for op in OPS for c in toolkit.catalogue_cases(op=op) if c["config"].get("dropout_p", 0.0) == 0.0]


@pytest.mark.parametrize("case", catalogue_cases(), ids=lambda c: c["id"])
def test_catalogue_case_matches_torch(case):
    """Every dropout-free case of the catalogue, as the reference builds it, against torch;
    rows of length 0 are left to the unit tests above."""
    inputs, outputs = build(case["op"], case["config"], Generator(case["seed"]))
    arr = {**inputs, **outputs}
    lens = arr.get("valid_lens")
    op = case["op"]
    if op == "masked_softmax":
        x = t(arr["x"])
        if lens is not None:
            Q, K = x.shape[-2:]
            keep = torch.from_numpy(keep_of(lens, Q, K))
            keep = keep[:, None] if x.ndim == 4 else keep
            x = x.masked_fill(~keep, -1e6)
        close(arr["out"], torch.softmax(x, dim=-1), case["id"], TORCH[op])
        return
    if op == "additive_attention":
        p = {n: arr[n] for n in ("W_q", "W_k", "w_v")}
        out, w = additive_torch(arr["q"], arr["k"], arr["v"], p, lens)
        close(arr["out"], out, case["id"], TORCH[op])
        close(arr["weights"], w, case["id"], TORCH[op])
        return
    if op == "dot_product_attention":
        q, k, v = arr["q"], arr["k"], arr["v"]
        keep = None if lens is None else keep_of(lens, q.shape[-2], k.shape[-2])
        if keep is not None and q.ndim == 4:
            keep = np.ascontiguousarray(np.broadcast_to(keep[:, None], q.shape[:2] + keep.shape[1:]))
        if keep is not None:
            keep = keep | ~keep.any(axis=-1, keepdims=True)  # never feed torch a fully blocked row
        theirs = sdpa(q, k, v, keep).numpy()
        rows = np.ones(q.shape[:-1], bool) if lens is None else nonempty_rows(lens, q.shape[:-1])
        close(arr["out"][rows], theirs[rows], case["id"], TORCH[op])
        return
    if op == "multi_head_attention":
        x_q = arr["x_q"]
        x_kv = arr.get("x_kv", x_q)
        h = case["config"]["heads"]
        p = {n: arr[n] for n in ("W_q", "W_k", "W_v", "W_o")}
        batch = np.ones(x_q.shape[0], bool) if lens is None else np.all(np.reshape(lens, (lens.shape[0], -1)) > 0, axis=1)
        sub = None if lens is None else lens[batch]
        out, w = torch_mha(x_q[batch], x_kv[batch], p, h, sub)
        close(arr["out"][batch], out, case["id"], TORCH[op])
        close(arr["weights"][batch], w, case["id"], TORCH[op])
        return
    raise AssertionError(f"no torch oracle for op {op!r}")
