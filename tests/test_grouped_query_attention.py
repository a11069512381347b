"""Grouped-query attention of the reference against PyTorch float64: the forward against
F.scaled_dot_product_attention(..., enable_gqa=True) on our projections (the oracle of the head
grouping: query head i reads key/value head i // (H / G)), the weights against torch's softmax over
the repeated keys, the backward against autograd; every case of its catalogue file; G = H is
multi-head attention to the bit, and a bad grouping is refused. Rows of valid length 0 are uniform
in ours (the book's -1e6 fill) and NaN in torch's masking, so they are checked on our side only."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference.cases.cases import build
from reference.core.rng import Generator
from reference.nn.grouped_query_attention import (grouped_query_attention_backward, grouped_query_attention_forward,
                                                  repeat_heads, sum_groups)
from reference.nn.multi_head_attention import multi_head_attention_backward, multi_head_attention_forward
from toolkit import bundle, close, t, tolerance

OP = "grouped_query_attention"
TORCH, TORCH_BACKWARD = tolerance(OP, "torch"), tolerance(OP, "torch_backward")


def catalogue_cases():
    return bundle(OP)["cases"]  # ops/attention/grouped_query_attention.json


def keep_of(lens, B, Q, K):
    """Bool (B, Q, K): True where key j < the row's valid length (lens None, (B,) or (B, Q))."""
    if lens is None:
        return np.ones((B, Q, K), dtype=bool)
    lens = np.asarray(lens)
    per_row = np.broadcast_to(lens[:, None], (B, Q)) if lens.ndim == 1 else lens
    return np.arange(K)[None, None, :] < per_row[:, :, None]


def torch_gqa(x_q, x_kv, params, H, G, keep):
    """(out, weights) in torch: projections, heads (B, H|G, T, D), sdpa with enable_gqa on the
    rows that have a key (others zero), and the weights as torch's softmax over the repeated keys."""
    B, Q, _ = x_q.shape
    K, d = x_kv.shape[1], params["W_q"].shape[0]
    D = d // H
    q = (x_q @ params["W_q"].T).reshape(B, Q, H, D).transpose(1, 2)
    k = (x_kv @ params["W_k"].T).reshape(B, K, G, D).transpose(1, 2)
    v = (x_kv @ params["W_v"].T).reshape(B, K, G, D).transpose(1, 2)
    mask = torch.as_tensor(keep)[:, None]  # (B, 1, Q, K), True = allowed
    some = mask.any(-1, keepdim=True)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~some, enable_gqa=True) * some
    out = heads.transpose(1, 2).reshape(B, Q, d) @ params["W_o"].T
    scores = q @ k.repeat_interleave(H // G, dim=1).transpose(-1, -2) / D ** 0.5
    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return out, weights


@pytest.mark.parametrize("case", [c for c in catalogue_cases() if c["kind"] == "forward"
                                  and not c["config"].get("dropout_p")], ids=lambda c: c["id"])
def test_catalogue_case_matches_torch(case):
    """Each dropout-free case, as the reference builds it: out against sdpa's enable_gqa, the
    weights against torch's softmax; rows with no key are uniform."""
    config = case["config"]
    inputs, outputs = build(OP, config, Generator(case["seed"]))
    x_q = inputs["x_q"]
    x_kv = inputs.get("x_kv", x_q)
    B, Q, K = x_q.shape[0], x_q.shape[1], x_kv.shape[1]
    keep = keep_of(inputs.get("valid_lens"), B, Q, K)
    params = {n: t(inputs[n]) for n in ("W_q", "W_k", "W_v", "W_o")}
    out, weights = torch_gqa(t(x_q), t(x_kv), params, config["heads"], config["kv_heads"], keep)
    rows = keep.any(-1)  # (B, Q)
    close(outputs["out"][rows], out.detach().numpy()[rows], f"{case['id']}: out", TORCH)
    ours = outputs["weights"].transpose(0, 2, 1, 3)  # (B, Q, H, K)
    close(ours[rows], weights.detach().numpy().transpose(0, 2, 1, 3)[rows], f"{case['id']}: weights", TORCH)
    assert np.all(ours[~rows] == 1.0 / K), "a row with no valid key must be uniform (the -1e6 fill)"


def test_the_grouping_is_pytorchs(monkeypatch):
    """A forward that paired query head i with key/value head i % G (the heads' rows tiled, the
    other natural reading) differs from the oracle: the check above fails on the grouping alone."""
    import reference.nn.grouped_query_attention as gqa

    g = Generator(7)
    x = g.normal((2, 4, 8))
    params = {"W_q": g.normal((8, 8)), "W_k": g.normal((4, 8)), "W_v": g.normal((4, 8)), "W_o": g.normal((8, 8))}
    expected, _ = torch_gqa(t(x), t(x), {n: t(p) for n, p in params.items()}, 4, 2, keep_of(None, 2, 4, 4))
    close(grouped_query_attention_forward(x, x, params, 4, 2)[0], expected.detach().numpy(), "grouped heads", TORCH)
    monkeypatch.setattr(gqa, "repeat_heads", lambda W, groups, r: np.tile(W, (r, 1)))
    assert np.abs(grouped_query_attention_forward(x, x, params, 4, 2)[0] - expected.detach().numpy()).max() > 1e-3


@pytest.mark.parametrize("H,G,lens", [(4, 2, [4, 2]), (3, 1, [[1, 2, 3], [3, 3, 3]]), (2, 2, None)])
def test_backward_matches_autograd(H, G, lens):
    """dx_q, dx_kv and the four weight gradients of L = sum(out * dout) against torch autograd
    (every row has a key: torch's masking gives no gradient through an empty row)."""
    g = Generator(11 + H + G)
    B, Q, K, D, dq_in, dkv_in = 2, 3, 4, 2, 5, 3
    x_q, x_kv = g.normal((B, Q, dq_in)), g.normal((B, K, dkv_in))
    params = {"W_q": g.normal((H * D, dq_in)), "W_k": g.normal((G * D, dkv_in)), "W_v": g.normal((G * D, dkv_in)),
              "W_o": g.normal((H * D, H * D))}
    dout = g.normal((B, Q, H * D))
    valid = None if lens is None else np.array(lens)
    out, cache = grouped_query_attention_forward(x_q, x_kv, params, H, G, valid)
    dx_q, dx_kv, grads = grouped_query_attention_backward(dout, cache)
    tq, tkv = t(x_q, grad=True), t(x_kv, grad=True)
    tp = {n: t(p, grad=True) for n, p in params.items()}
    tout, _ = torch_gqa(tq, tkv, tp, H, G, keep_of(valid, B, Q, K))
    close(out, tout.detach().numpy(), "out", TORCH)
    (tout * t(dout)).sum().backward()
    close(dx_q, tq.grad, "dx_q", TORCH_BACKWARD)
    close(dx_kv, tkv.grad, "dx_kv", TORCH_BACKWARD)
    for name, p in tp.items():
        close(grads[name], p.grad, f"d{name}", TORCH_BACKWARD)


def test_as_many_key_value_heads_as_query_heads_is_multi_head_attention_to_the_bit():
    g = Generator(3)
    x_q, x_kv = g.normal((2, 3, 6)), g.normal((2, 5, 4))
    params = {"W_q": g.normal((8, 6)), "W_k": g.normal((8, 4)), "W_v": g.normal((8, 4)), "W_o": g.normal((8, 8))}
    lens, dout = np.array([5, 2]), g.normal((2, 3, 8))
    out, cache = grouped_query_attention_forward(x_q, x_kv, params, 2, 2, lens)
    mha, mha_cache = multi_head_attention_forward(x_q, x_kv, params, 2, lens)
    assert np.array_equal(out, mha) and np.array_equal(cache["weights"], mha_cache["weights"])
    for ours, theirs in zip(grouped_query_attention_backward(dout, cache)[:2], multi_head_attention_backward(dout, mha_cache)[:2]):
        assert np.array_equal(ours, theirs)
    catalogue = {c["id"]: c for c in catalogue_cases()}
    assert catalogue[f"{OP}.as_mha"]["config"]["kv_heads"] == catalogue[f"{OP}.as_mha"]["config"]["heads"]


@pytest.mark.parametrize("engine", ["reference", "port"])
def test_the_as_mha_golden_is_the_multi_head_goldens_inputs_and_outputs(engine):
    """The catalogue's case with as many key/value heads as query heads, drawn like
    multi_head_attention.lens_1d (same seed, same config but kv_heads), holds the same tensors."""
    golden = Path(__file__).resolve().parents[1] / "golden" / "attention" / engine
    gqa, mha = (json.loads((golden / f"{name}.json").read_text())
                for name in (f"{OP}.as_mha", "multi_head_attention.lens_1d"))
    assert gqa["inputs"] == mha["inputs"] and gqa["outputs"] == mha["outputs"]


def test_the_group_sum_is_the_repeats_adjoint_in_head_order():
    """<repeat(W), Y> = <W, sum_groups(Y)>, and the sum runs from +0 in head order."""
    g = Generator(5)
    W, Y = g.normal((6, 4)), g.normal((12, 4))  # G = 3 heads of D = 2 rows, each repeated r = 2 times
    assert np.isclose(np.vdot(repeat_heads(W, 3, 2), Y), np.vdot(W, sum_groups(Y, 3, 2)), rtol=1e-14)
    assert np.array_equal(repeat_heads(W, 3, 2)[2:4], W[0:2]) and np.array_equal(repeat_heads(W, 3, 2)[4:6], W[2:4])
    assert np.array_equal(sum_groups(Y, 3, 2)[0:2], (0.0 + Y[0:2]) + Y[2:4])


@pytest.mark.parametrize("heads,kv_heads,says", [(3, 2, "num_heads by kv_heads = 2"), (5, 5, "divisible by num_heads = 5")])
def test_a_bad_grouping_is_refused_saying_what_divides_what(heads, kv_heads, says):
    g = Generator(1)
    x = g.normal((1, 2, 6))
    params = {"W_q": g.normal((6, 6)), "W_k": g.normal((4, 6)), "W_v": g.normal((4, 6)), "W_o": g.normal((6, 6))}
    with pytest.raises(ValueError, match=says):
        grouped_query_attention_forward(x, x, params, heads, kv_heads)


def test_a_key_value_weight_of_the_wrong_width_is_refused():
    g = Generator(2)
    x = g.normal((1, 2, 8))
    params = {"W_q": g.normal((8, 8)), "W_k": g.normal((8, 8)), "W_v": g.normal((4, 8)), "W_o": g.normal((8, 8))}
    with pytest.raises(ValueError, match=r"W_k must have shape \(4, 8\), got \(8, 8\)"):
        grouped_query_attention_forward(x, x, params, 4, 2)
