"""Tiled attention with an online softmax and sliding-window attention against PyTorch float64
(F.scaled_dot_product_attention, autograd, torch.logsumexp), and against our plain forms
(docs/tiled_attention.md).

Tolerances, each with its reason:
- ATOL against torch, tiled_attention's declared `torch` tolerance (1e-12, ops/attention/tiled_attention.json): float64 on both sides, summed in other orders; for these sizes the
  differences stay near 1e-15.
- Tiled against plain: the same maths rounded differently, so within a few ULP of each other and,
  on these data, not bit-identical (which is why the catalogue's cases hold the pair to the rule,
  expect.agree, not to bit identity).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference.core.rng import Generator
from toolkit import close, t, tolerance
from reference.nn.dot_product_attention import dot_product_attention_forward
from reference.nn.sliding_window import sliding_window_forward, sliding_window_plain_forward, window_keep
from reference.nn.tiled_attention import band_keep, key_tiles, tiled_attention_backward, tiled_attention_forward

ATOL = tolerance("tiled_attention", "torch")  # ops/attention/tiled_attention.json; the same for every op of this file





def draw(seed, T, K=None, D=4, V=3):
    g = Generator(seed)
    K = K or T
    return (g.normal((2, 3, T, D), 0.0, 2.0), g.normal((2, 3, K, D), 0.0, 2.0), g.normal((2, 3, K, V)),
            g.normal((2, 3, T, V)))


def torch_attention(q, k, v, dout, mask=None, causal=False):
    qt, kt, vt = (t(a).requires_grad_() for a in (q, k, v))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=None if mask is None else torch.as_tensor(mask),
                                         is_causal=causal)
    (out * t(dout)).sum().backward()
    scores = qt.detach() @ kt.detach().transpose(-1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~torch.as_tensor(mask), -torch.inf)
    elif causal:
        scores = scores.masked_fill(torch.triu(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool), 1), -torch.inf)
    return out.detach().numpy(), torch.logsumexp(scores, -1).numpy(), (qt.grad.numpy(), kt.grad.numpy(), vt.grad.numpy())


@pytest.mark.parametrize("T, K, tile, causal", [(9, 11, 4, False), (13, None, 4, True), (8, None, 8, True),
                                               (7, None, 1, True), (5, 12, 16, False)])
def test_tiled_attention_matches_sdpa_forward_lse_and_backward(T, K, tile, causal):
    q, k, v, dout = draw(1, T, K)
    out, cache = tiled_attention_forward(q, k, v, tile, causal)
    grads = tiled_attention_backward(dout, cache)
    want_out, want_lse, want_grads = torch_attention(q, k, v, dout, causal=causal)
    close(out, want_out, "out", ATOL)
    close(cache["lse"], want_lse, "lse", ATOL)
    for name, got, want in zip(("dq", "dk", "dv"), grads, want_grads):
        close(got, want, name, ATOL)


@pytest.mark.parametrize("window, tile", [(1, 4), (3, 4), (5, 2), (13, 4), (40, 3)])
def test_sliding_window_matches_sdpa_with_the_band_mask(window, tile):
    q, k, v, dout = draw(2, 13)
    mask = window_keep(13, window)[0]  # (T, T) True = attend, as SDPA's bool mask
    want_out, want_lse, want_grads = torch_attention(q, k, v, dout, mask=mask)
    for form in ("tiled", "plain"):
        if form == "tiled":
            out, cache = sliding_window_forward(q, k, v, window, tile)
            close(cache["lse"], want_lse, "lse", ATOL)
            grads = tiled_attention_backward(dout, cache)
        else:
            out, _ = sliding_window_plain_forward(q, k, v, window)
            grads = None
        close(out, want_out, f"{form} out, window {window}", ATOL)
        if grads is not None:
            for name, got, want in zip(("dq", "dk", "dv"), grads, want_grads):
                close(got, want, f"{name}, window {window}", ATOL)


def test_tiled_is_the_plain_form_within_a_few_ulp_but_not_bit_identical():
    q, k, v, _ = draw(3, 13)
    tiled, _ = tiled_attention_forward(q, k, v, 4, causal=True)
    plain, _ = dot_product_attention_forward(q, k, v, np.tile(np.arange(1, 14), (2, 1)))
    rel = np.abs(tiled - plain) / np.maximum(np.abs(plain), 1e-300)
    assert not np.array_equal(tiled, plain), "tiled and plain agreed bit for bit: the case's premise changed"
    assert np.abs(tiled - plain).max() < 1e-14 and np.median(rel) < 1e-15


def test_one_tile_still_rounds_differently_from_the_plain_softmax():
    """With every key in one tile there is no rescale at all; the normalisation at the end (o / l)
    alone rounds otherwise than weights-then-products."""
    q, k, v, _ = draw(4, 6)
    tiled, _ = tiled_attention_forward(q, k, v, 64)
    plain, _ = dot_product_attention_forward(q, k, v)
    assert not np.array_equal(tiled, plain) and np.abs(tiled - plain).max() < 1e-14


def test_the_band_and_the_tiles_a_query_block_reaches():
    assert band_keep(range(3), range(3), False, None) is None
    assert band_keep([4], [1, 2, 3, 4, 5], True, 3).tolist() == [[False, True, True, True, False]]
    assert window_keep(5, 3)[0, 4].tolist() == [False, False, True, True, True]
    # queries 8..11 with a window of 3 reach keys 6..11: the tiles [4, 8) and [8, 12), not [0, 4)
    assert key_tiles(8, 12, 13, 4, True, 3) == [(4, 8), (8, 12)]
    assert key_tiles(8, 12, 13, 4, True, None) == [(0, 4), (4, 8), (8, 12)]
    assert key_tiles(0, 4, 13, 4, False, None) == [(0, 4), (4, 8), (8, 12), (12, 13)]


def test_a_missing_rescale_is_far_from_the_plain_form():
    """The bug of fault port.tiled.missing_rescale, written out: the running sum not rescaled when
    the maximum moves. On these data the maximum moves, and the result is off by O(1)."""
    q, k, v, _ = draw(5, 12)
    plain, _ = dot_product_attention_forward(q, k, v)
    s_all = np.einsum("bhqd,bhkd->bhqk", q, k) / 2.0  # D = 4: sqrt(D) = 2
    m, l, o = np.full(s_all.shape[:-1], -np.inf), 0.0, 0.0
    for j0 in range(0, 12, 4):  # tiles of 4 keys
        s = s_all[..., j0:j0 + 4]
        m_new = np.maximum(m, s.max(-1))
        p = np.exp(s - m_new[..., None])
        l = l + p.sum(-1)  # the bug: l * exp(m - m_new) + ...
        o = o * np.exp(m - m_new)[..., None] + p @ v[..., j0:j0 + 4, :]
        m = m_new
    out = o / l[..., None]
    assert np.abs(out - plain).max() > 0.05


def test_bad_arguments_say_what_to_do():
    q, k, v, _ = draw(6, 5, 7)
    with pytest.raises(ValueError, match="needs as many queries as keys"):
        tiled_attention_forward(q, k, v, 4, causal=True)
    with pytest.raises(ValueError, match="tile must be a positive integer"):
        tiled_attention_forward(q, k, v, 0)
    with pytest.raises(ValueError, match="window must be a positive integer on a causal mask"):
        tiled_attention_forward(q, q, q, 4, causal=False, window=2)
