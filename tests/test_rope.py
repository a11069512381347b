"""Rotary position embeddings (reference/nn/rope.py) against PyTorch float64 (a third oracle written
here from the formula: rotate each (even, odd) pair of step t by positions[t] * 10000^(-2i/d)),
forward and backward, alone and inside dot-product attention; the lesson's facts about it (the
angles are the sinusoidal table's, position 0 is the identity, a rotation keeps each pair's length,
scores depend on the gap between positions alone); the catalogue's cases against torch. Each
tolerance is the op's declared one (its bundle, ops/attention/rope.json or rope_attention.json), with its reason there."""


import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reference.cases.cases import build
from reference.core.rng import Generator
from reference.nn.positional_encoding import sinusoidal_table
from reference.nn.rope import rope_angles, rope_attention_backward, rope_attention_forward, rope_backward, rope_forward
from toolkit import close, t, tolerance
import toolkit

ROPE, ATTENTION = "rope", "rope_attention"
WRONG = 1e-3  # not a tolerance: a wrong convention moves the output by far more than rounding


def torch_rope(x, positions, halves=False, exponent_step=2):
    """The rotation in torch float64, from the formula. halves: pair feature i with i + d/2 (another
    convention); exponent_step 1: w_i = 10000^(-i/d) (a wrong frequency); both only to show the
    oracle tells them apart."""
    x = x if isinstance(x, torch.Tensor) else t(x)
    d = x.shape[-1]
    div = torch.pow(torch.tensor(10000.0, dtype=torch.float64),
                    torch.arange(0, d // 2, dtype=torch.float64) * exponent_step / d)  # 10000^((2i) / d)
    angle = torch.as_tensor(np.asarray(positions), dtype=torch.float64)[:, None] / div  # (T, d/2)
    c, s = torch.cos(angle), torch.sin(angle)
    x0, x1 = (x[..., : d // 2], x[..., d // 2:]) if halves else (x[..., 0::2], x[..., 1::2])
    r0, r1 = x0 * c - x1 * s, x0 * s + x1 * c
    if halves:
        return torch.cat([r0, r1], dim=-1)
    return torch.stack([r0, r1], dim=-1).reshape(x.shape)


def keep_of(lens, Q, K):
    """Bool (B, Q, K), True where key j < the row's valid length; lens (B,) or (B, Q)."""
    lens = np.asarray(lens)
    per_row = np.broadcast_to(lens[:, None], (lens.shape[0], Q)) if lens.ndim == 1 else lens
    return np.arange(K)[None, None, :] < per_row[:, :, None]


def torch_rope_attention(q, k, v, lens, q_pos, k_pos):
    """RoPE on q and k in torch, then F.scaled_dot_product_attention (bool mask, True = allowed)."""
    Q, K = q.shape[-2], k.shape[-2]
    q_pos = np.arange(Q) if q_pos is None else q_pos
    k_pos = np.arange(K) if k_pos is None else k_pos
    mask = None
    if lens is not None:
        keep = keep_of(lens, Q, K)
        mask = torch.from_numpy(keep[:, None] if q.ndim == 4 else keep)
    return F.scaled_dot_product_attention(torch_rope(q, q_pos), torch_rope(k, k_pos), v, attn_mask=mask)


# ---------------------------------------------------------------- the rotation

@pytest.mark.parametrize("shape, positions", [
    ((2, 5, 8), None), ((2, 3, 4, 6), None), ((1, 6, 16), [0, 1, 2, 511, 4096, 8191]), ((3, 4, 2), None),
    ((2, 3, 32), [0, 7, 1000]),
])
def test_rotation_matches_torch(shape, positions):
    x = Generator(1800).normal(shape)
    out, _ = rope_forward(x, None if positions is None else np.array(positions))
    want = torch_rope(x, np.arange(shape[-2]) if positions is None else positions)
    close(out, want, f"rope {shape}, positions {positions}", tolerance(ROPE, "torch"))


def test_the_other_conventions_differ_far_beyond_the_tolerance():
    """The oracle tells our pairing and frequencies from the halves convention and from
    10000^(-i/d): what the faults port.rope.pair_split_half and port.rope.frequency_exponent do."""
    x = Generator(1801).normal((2, 5, 8))
    out, _ = rope_forward(x)
    for wrong in (torch_rope(x, np.arange(5), halves=True), torch_rope(x, np.arange(5), exponent_step=1)):
        assert np.max(np.abs(out - wrong.numpy())) > WRONG


def test_the_angles_are_the_sinusoidal_tables_bit_for_bit():
    for d in (2, 8, 64):
        c, s = rope_angles(np.arange(50), d)
        P = sinusoidal_table(50, d)
        assert np.array_equal(c, P[:, 1::2]) and np.array_equal(s, P[:, 0::2]), f"d {d}"


def test_position_zero_is_the_identity_and_every_pair_keeps_its_length():
    x = Generator(1802).normal((3, 7, 10), 0.0, 1.0)
    out, _ = rope_forward(x, np.array([0, 1, 2, 3, 100, 4096, 8191]))
    assert np.array_equal(out[:, 0], x[:, 0]), "position 0: cos 1, sin 0, the input unchanged"
    assert not np.array_equal(out[:, 1], x[:, 1])
    close(out[..., 0::2] ** 2 + out[..., 1::2] ** 2, x[..., 0::2] ** 2 + x[..., 1::2] ** 2, "pair lengths",
          tolerance(ROPE, "norm"))


@pytest.mark.parametrize("shift", [1, 37, 1000])
def test_scores_depend_on_the_gap_between_positions_alone(shift):
    g = Generator(1803)
    q, k = g.normal((1, 4, 8)), g.normal((1, 4, 8))
    base = np.arange(4)
    scores = [rope_forward(q, base + s)[0][0] @ rope_forward(k, base + s)[0][0].T for s in (0, shift)]
    close(scores[1], scores[0], f"q . k at positions shifted by {shift}", tolerance(ROPE, "relative_position"))
    unrotated = q[0] @ k[0].T
    assert np.max(np.abs(scores[0] - unrotated)) > WRONG, "RoPE must change the scores of different positions"


def test_backward_matches_torch_autograd():
    g = Generator(1804)
    x, dout = g.normal((2, 3, 5, 6)), g.normal((2, 3, 5, 6))
    positions = np.array([0, 3, 4, 90, 1000])
    _, cache = rope_forward(x, positions)
    xt = t(x, grad=True)
    (torch_rope(xt, positions) * t(dout)).sum().backward()
    close(rope_backward(dout, cache), xt.grad, "rope dx", tolerance(ROPE, "torch_backward"))


def test_wrong_shapes_and_positions_are_refused_saying_what_was_expected():
    with pytest.raises(ValueError, match=r"even, positive feature dim d .*got d = 5"):
        rope_forward(np.zeros((2, 3, 5)))
    with pytest.raises(ValueError, match=r"one position per step: x has T = 3 steps, positions \(2,\)"):
        rope_forward(np.zeros((2, 3, 4)), np.array([0, 1]))
    with pytest.raises(ValueError, match=r"positions as a 1-D array of integers"):
        rope_forward(np.zeros((2, 3, 4)), np.array([0.0, 1.0, 2.0]))
    _, cache = rope_forward(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=r"dout of shape \(\.\.\., 3, 4\), got \(2, 3, 6\)"):
        rope_backward(np.zeros((2, 3, 6)), cache)


# ---------------------------------------------------------------- inside dot-product attention

@pytest.mark.parametrize("lead, lens, q_pos, k_pos", [
    ((2,), [[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]], None, None),
    ((2, 2), [5, 3], [1000, 1001, 1002, 1003, 1004], [996, 997, 998, 999, 1000]),
])
def test_rope_attention_and_its_backward_match_torch(lead, lens, q_pos, k_pos):
    g = Generator(1805)
    q, k, v, dout = g.normal(lead + (5, 4)), g.normal(lead + (5, 4)), g.normal(lead + (5, 3)), g.normal(lead + (5, 3))
    lens, q_pos, k_pos = (None if a is None else np.array(a) for a in (lens, q_pos, k_pos))
    out, cache = rope_attention_forward(q, k, v, lens, q_pos, k_pos)
    leaves = [t(a, grad=True) for a in (q, k, v)]
    want = torch_rope_attention(*leaves, lens, q_pos, k_pos)
    close(out, want, f"rope attention {lead}", tolerance(ATTENTION, "torch"))
    (want * t(dout)).sum().backward()
    for name, ours, leaf in zip(("dq", "dk", "dv"), rope_attention_backward(dout, cache), leaves):
        close(ours, leaf.grad, f"rope attention {name} {lead}", tolerance(ATTENTION, "torch_backward"))


def test_shifting_every_position_leaves_rope_attention_unchanged():
    g = Generator(1806)
    q, k, v = g.normal((2, 3, 6)), g.normal((2, 4, 6)), g.normal((2, 4, 2))
    out, cache = rope_attention_forward(q, k, v, np.array([4, 2]))
    moved, moved_cache = rope_attention_forward(q, k, v, np.array([4, 2]), np.arange(3) + 1000, np.arange(4) + 1000)
    close(moved, out, "out at positions + 1000", tolerance(ATTENTION, "relative_position"))
    close(moved_cache["weights"], cache["weights"], "weights at positions + 1000", tolerance(ATTENTION, "relative_position"))


# ---------------------------------------------------------------- the catalogue against torch

def catalogue_cases(repo_root):
    """The forward cases of both ops (their bundles, ops/attention/rope.json and rope_attention.json)."""
    return toolkit.catalogue_cases(op=ROPE, kind="forward") + toolkit.catalogue_cases(op=ATTENTION, kind="forward")


def test_the_catalogue_holds_both_ops_and_the_edge_positions(repo_root):
    cases = catalogue_cases(repo_root)
    assert {c["op"] for c in cases} == {ROPE, ATTENTION}
    positions = [p for c in cases for p in c["config"].get("positions", [])]
    assert 0 in positions and max(positions) >= 8191, "position 0 and a large position are edge cases of their own"


@pytest.mark.parametrize("index", range(6))
def test_catalogue_case_matches_torch(repo_root, index):
    case = catalogue_cases(repo_root)[index]
    inputs, outputs = build(case["op"], case["config"], Generator(case["seed"]))
    if case["op"] == ROPE:
        T = inputs["x"].shape[-2]
        close(outputs["out"], torch_rope(inputs["x"], inputs.get("positions", np.arange(T))), case["id"],
              tolerance(ROPE, "torch"))
        return
    want = torch_rope_attention(t(inputs["q"]), t(inputs["k"]), t(inputs["v"]), inputs.get("valid_lens"),
                                inputs.get("q_positions"), inputs.get("k_positions"))
    close(outputs["out"], want, case["id"], tolerance(ATTENTION, "torch"))
