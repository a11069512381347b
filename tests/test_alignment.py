"""Act 4's alignment scorer: its gradients against PyTorch float64 autograd (written here from the
formula a(q, k) = w_v^T tanh(W_q q + W_k k), softmax over the source words, -log of the gold
weight), the identity-values trick, the data's draw order, and that plain gradient steps learn
the alignment la->the, voiture->car, rouge->red, <eos>-><eos>.

Tolerance: 1e-10 absolute against torch (the issue's bound; declared in ops/attention/gradcheck_alignment.json); both sides are float64, the
differences are summation order and exp/tanh/log in the last bits.
"""

import numpy as np
import pytest
import torch

from reference.models.alignment import (ALIGNMENT, SOURCE, TARGET, alignment_data, alignment_loss, alignment_loss_backward,
                                 init_alignment_params)
from reference.core.rng import Generator
from toolkit import tolerance

ATOL = tolerance("gradcheck_alignment", "torch_backward")  # declared in ops/attention/gradcheck_alignment.json


def torch_loss(params, data):
    leaves = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True) for n, v in params.items()}
    q = torch.as_tensor(data["queries"])  # (B, Q, E)
    k = torch.as_tensor(data["keys"])  # (B, K, E)
    feats = torch.tanh((q @ leaves["W_q"].T)[:, :, None, :] + (k @ leaves["W_k"].T)[:, None, :, :])  # (B, Q, K, H)
    scores = (feats @ leaves["w_v"].T)[..., 0]  # (B, Q, K)
    logp = torch.log_softmax(scores, dim=-1)
    gold = torch.as_tensor(data["gold"])
    loss = -logp.gather(-1, gold[..., None]).mean()
    loss.backward()
    return loss.item(), {n: v.grad.numpy() for n, v in leaves.items()}


@pytest.mark.parametrize("E, H, pairs", [(4, 4, 1), (8, 6, 1), (6, 8, 3)])
def test_gradients_match_autograd(E, H, pairs):
    rng = Generator(5200 + E * 10 + H + pairs)
    params = init_alignment_params(rng, E, H)
    data = alignment_data(rng, E, pairs)
    loss, cache = alignment_loss(params, data)
    grads = alignment_loss_backward(cache)
    expected_loss, expected = torch_loss(params, data)
    assert abs(loss - expected_loss) <= ATOL, f"loss {loss!r}, torch {expected_loss!r}"
    assert list(grads) == ["W_q", "W_k", "w_v"]
    for name in grads:
        diff = np.abs(grads[name] - expected[name])
        assert grads[name].shape == expected[name].shape
        assert diff.max() <= ATOL, f"d{name}: greatest absolute difference {diff.max():.3e} (allowed {ATOL})"
        assert np.abs(expected[name]).max() > 1e-3, f"d{name} is too small to test anything"


def test_identity_values_give_the_weights_exactly():
    rng = Generator(5210)
    params = init_alignment_params(rng, 5, 7)
    data = alignment_data(rng, 5, 2)
    _, cache = alignment_loss(params, data)
    assert np.array_equal(cache["out"], cache["weights"]), "out = weights @ I must be exact"


def test_data_draw_order():
    """Pair 0 does not depend on the batch size; the gold alignment is (0, 2, 1, 3)."""
    one = alignment_data(Generator(5220), 4, 1)
    three = alignment_data(Generator(5220), 4, 3)
    assert np.array_equal(one["keys"][0], three["keys"][0])
    assert np.array_equal(one["queries"][0], three["queries"][0])
    assert not np.array_equal(three["keys"][0], three["keys"][1])
    g = Generator(5220)
    assert np.array_equal(one["keys"][0], g.normal((4, 4))), "source embeddings are drawn first"
    assert np.array_equal(one["queries"][0], g.normal((4, 4))), "then the target embeddings"
    assert three["gold"].tolist() == [[0, 2, 1, 3]] * 3
    assert [SOURCE[j] for j in ALIGNMENT] == ["the", "car", "red", "<eos>"]
    assert TARGET == ("la", "voiture", "rouge", "<eos>")


def test_plain_gradient_steps_learn_the_alignment():
    rng = Generator(5230)
    params = init_alignment_params(rng, 6, 6)
    data = alignment_data(rng, 6, 1)
    losses = []
    for _ in range(200):
        loss, cache = alignment_loss(params, data)
        losses.append(loss)
        grads = alignment_loss_backward(cache)
        params = {n: params[n] - 0.5 * grads[n] for n in params}
    loss, cache = alignment_loss(params, data)
    assert all(b < a for a, b in zip(losses[:5], losses[1:6])), f"the first steps must lower the loss: {losses[:6]}"
    assert loss < 0.5 * losses[0], f"loss {losses[0]:.4f} -> {loss:.4f}: not learning"
    assert cache["weights"][0].argmax(axis=-1).tolist() == list(ALIGNMENT), cache["weights"][0].round(3)


def test_gold_out_of_range_is_an_error():
    rng = Generator(5240)
    params = init_alignment_params(rng, 4, 4)
    data = alignment_data(rng, 4, 1)
    data["gold"] = np.array([[0, 2, 1, 4]])
    with pytest.raises(ValueError, match="gold must be source indices"):
        alignment_loss(params, data)
