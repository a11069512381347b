"""The ViT's whole-model backward against PyTorch float64 autograd (a third oracle): a torch
composition (Conv2d, cat <cls>, + pos, LayerNorm, bias-free MultiheadAttention, GELU, Linear)
with the reference's weights copied in, differentiated by torch.autograd; every parameter's
gradient must match the reference's vit_backward / vit_loss_backward.

Tolerance: the declared torch_backward of vit and vit_patch_embedding (their bundles, ops/attention/vit.json and vit_patch_embedding.json), 1e-10
absolute (the issue's bound). Both sides are float64 but sum in different orders
and use different exp/erf; gradients here are of size <= ~1, so the differences sit near 1e-15.
Layer-norm gammas/betas and <cls> are randomised (init makes them 1, 0 and 0), so a gradient that
ignored gamma, or a <cls> routed to the wrong row, cannot pass by accident.
"""

import numpy as np
import pytest
import torch
from torch import nn

from reference.core.params import sub_params
from reference.core.rng import Generator
from reference.models.vit import (init_vit_params, patch_embedding_backward, patch_embedding_forward, vit_backward,
                           vit_forward, vit_loss, vit_loss_backward)
from toolkit import close, t, tolerance

ATOL = tolerance("vit", "torch_backward")

CONFIGS = {
    "p2_d8_two_blocks": dict(image=4, channels=1, patch=2, d=8, heads=2, mlp_hidden=16, blocks=2, classes=3, dropout=0.0),
    "p4_d8_c3_one_head": dict(image=8, channels=3, patch=4, d=8, heads=1, mlp_hidden=12, blocks=1, classes=5, dropout=0.0),
    "p2_d12_h3": dict(image=6, channels=2, patch=2, d=12, heads=3, mlp_hidden=8, blocks=1, classes=4, dropout=0.0),
}


def randomised_params(rng, c):
    params = init_vit_params(rng, c)
    for name in params:  # in init order
        if name.endswith(".gamma"):
            params[name] = 1.0 + 0.1 * rng.normal(params[name].shape)
        elif name.endswith(".beta"):
            params[name] = 0.1 * rng.normal(params[name].shape)
    params["cls"] = rng.normal((c["d"],))
    return params


def torch_vit(params, c, images):
    """Logits from a torch composition whose leaves are copies of params; returns (logits, leaves)."""
    leaves = {name: t(value).requires_grad_() for name, value in params.items()}
    d, C, p, h = c["d"], c["channels"], c["patch"], c["heads"]
    conv = nn.Conv2d(C, d, p, stride=p, dtype=torch.float64)
    del conv.weight, conv.bias  # plain tensors in their place, so autograd reaches our leaves
    conv.weight, conv.bias = leaves["patch.W"], leaves["patch.b"]
    e = conv(t(images)).flatten(2).transpose(1, 2)  # (B, N, d)
    x = torch.cat([leaves["cls"].expand(e.shape[0], 1, d), e], dim=1) + leaves["pos"]  # (B, N+1, d)
    ln = lambda z, pre: nn.functional.layer_norm(z, (d,), leaves[pre + "gamma"], leaves[pre + "beta"], 1e-5)  # noqa: E731
    for i in range(c["blocks"]):
        b = f"blk{i}."
        n1 = ln(x, b + "ln1.")
        in_proj = torch.cat([leaves[b + "attn.W_q"], leaves[b + "attn.W_k"], leaves[b + "attn.W_v"]])
        a, _ = nn.functional.multi_head_attention_forward(
            n1.transpose(0, 1), n1.transpose(0, 1), n1.transpose(0, 1), d, h, in_proj, None, None, None,
            False, 0.0, leaves[b + "attn.W_o"], None, training=True, need_weights=False)
        x = x + a.transpose(0, 1)
        m = nn.functional.linear(ln(x, b + "ln2."), leaves[b + "mlp.W1"], leaves[b + "mlp.b1"])
        m = nn.functional.linear(nn.functional.gelu(m), leaves[b + "mlp.W2"], leaves[b + "mlp.b2"])
        x = x + m
    logits = nn.functional.linear(ln(x[:, 0], "head.ln."), leaves["head.W"], leaves["head.b"])
    return logits, leaves


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_vit_loss_gradients_match_autograd(name):
    c = CONFIGS[name]
    rng = Generator(5100 + len(name))
    params = randomised_params(rng, c)
    B = 3
    images = rng.uniform((B, c["channels"], c["image"], c["image"]))
    labels = rng.integers((B,), 0, c["classes"])
    loss, cache = vit_loss(params, c, images, labels)
    grads = vit_loss_backward(cache)
    assert list(grads) == list(params), "gradients must be keyed by every parameter name, in init order"
    logits, leaves = torch_vit(params, c, images)
    expected = nn.functional.cross_entropy(logits, torch.as_tensor(labels))
    expected.backward()
    assert abs(loss - expected.item()) <= ATOL, f"vit {name}: loss {loss!r}, torch {expected.item()!r}"
    for pname in params:
        close(grads[pname], leaves[pname].grad.numpy(), f"vit {name}: d{pname}", ATOL)


def test_vit_backward_with_any_upstream_gradient():
    """The (logits * dlogits).sum() trick: a random upstream gradient, not only the loss's."""
    c = CONFIGS["p2_d8_two_blocks"]
    rng = Generator(5150)
    params = randomised_params(rng, c)
    images = rng.uniform((2, c["channels"], c["image"], c["image"]))
    dlogits = rng.normal((2, c["classes"]))
    logits, cache = vit_forward(images, params, c)
    grads = vit_backward(dlogits, cache)
    tlogits, leaves = torch_vit(params, c, images)
    close(logits, tlogits.detach().numpy(), "vit logits", ATOL)
    (tlogits * t(dlogits)).sum().backward()
    for pname in params:
        close(grads[pname], leaves[pname].grad.numpy(), f"vit (random upstream): d{pname}", ATOL)


def test_patch_embedding_backward_matches_conv_autograd():
    rng = Generator(5160)
    B, C, H, p, d = 2, 3, 8, 4, 5
    images, W, b = rng.uniform((B, C, H, H)), rng.normal((d, C, p, p)), rng.normal((d,))
    dout = rng.normal((B, (H // p) ** 2, d))
    _, cache = patch_embedding_forward(images, W, b)
    dimages, dW, db = patch_embedding_backward(dout, cache)
    ti, tW, tb = t(images).requires_grad_(), t(W).requires_grad_(), t(b).requires_grad_()
    out = nn.functional.conv2d(ti, tW, tb, stride=p).flatten(2).transpose(1, 2)
    (out * t(dout)).sum().backward()
    close(dimages, ti.grad.numpy(), "patch embedding dimages (batch, channel, row, col)", tolerance("vit_patch_embedding", "torch_backward"))
    close(dW, tW.grad.numpy(), "patch embedding dW (out, channel, i, j)", tolerance("vit_patch_embedding", "torch_backward"))
    close(db, tb.grad.numpy(), "patch embedding db", tolerance("vit_patch_embedding", "torch_backward"))


def test_dropout_masks_are_reused_by_the_backward():
    """With p > 0 the backward must use the forward's masks: a gradient from a second forward with
    the same generator seed equals the first, and differs from the p = 0 gradient."""
    c = dict(CONFIGS["p2_d8_two_blocks"], dropout=0.3)
    rng = Generator(5170)
    params = randomised_params(rng, c)
    images = rng.uniform((2, c["channels"], c["image"], c["image"]))
    labels = np.array([0, 2])
    _, cache = vit_loss(params, c, images, labels, Generator(77))
    g1 = vit_loss_backward(cache)
    _, cache = vit_loss(params, c, images, labels, Generator(77))
    g2 = vit_loss_backward(cache)
    _, cache = vit_loss(params, dict(c, dropout=0.0), images, labels)
    g0 = vit_loss_backward(cache)
    for name in params:
        assert np.array_equal(g1[name], g2[name]), f"d{name} differs between two runs with the same masks"
    assert any(not np.array_equal(g1[n], g0[n]) for n in params), "dropout changed no gradient"
