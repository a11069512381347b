"""The models against PyTorch float64 (a third oracle, written independently of both engines):
the post-norm encoder and decoder blocks against nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer with copied weights, the encoder-decoder and the ViT against small
torch compositions; plus the masks' promises (the decoder is causal, padded source keys are
ignored), which hold exactly: a masked score becomes -1e6, whose exp underflows to +0.

Tolerance: each model's declared torch (its bundle, ops/attention/<op>.json), 1e-12 absolute. Both sides compute in float64 but sum in different orders (torch's
BLAS vs our index order) and use different exp/erf; a few layers of d <= 16 keep the differences
near 1e-15. Layer norm gammas and betas are randomised here (init would make them 1 and 0), so a
swapped gamma/beta or a missing affine step cannot pass.
"""

import math

import numpy as np
import pytest
import torch
from torch import nn

from reference.nn.decoder_block import decoder_block_forward, init_decoder_block_params
from reference.core.params import sub_params
from reference.nn.encoder_block import encoder_block_forward, init_encoder_block_params
from reference.core.rng import Generator
from reference.models.transformer import init_transformer_params, transformer_encode, transformer_forward
from reference.models.vit import init_vit_params, patch_embedding_forward, vit_forward
from toolkit import close, t, tolerance

TORCH = {op: tolerance(op, "torch") for op in ("encoder_block", "decoder_block", "transformer", "vit")}


def randomise_norms(rng, params):
    """Replace every gamma by 1 + N(0, 0.1^2) and every beta by N(0, 0.1^2), in name order."""
    for name in sorted(params):
        if name.endswith(".gamma"):
            params[name] = 1.0 + 0.1 * rng.normal(params[name].shape)
        elif name.endswith(".beta"):
            params[name] = 0.1 * rng.normal(params[name].shape)
    return params


def load_mha(mha, p):
    """Our bias-free W_q, W_k, W_v, W_o into a torch nn.MultiheadAttention (biases zeroed)."""
    mha.in_proj_weight.copy_(torch.cat([t(p["W_q"]), t(p["W_k"]), t(p["W_v"])]))
    if mha.in_proj_bias is not None:
        mha.in_proj_bias.zero_()
        mha.out_proj.bias.zero_()
    mha.out_proj.weight.copy_(t(p["W_o"]))


def load_linear(lin, W, b):
    lin.weight.copy_(t(W))
    lin.bias.copy_(t(b))


def load_norm(norm, p, prefix):
    norm.weight.copy_(t(p[prefix + "gamma"]))
    norm.bias.copy_(t(p[prefix + "beta"]))


def torch_encoder_layer(p, d, h, F):
    layer = nn.TransformerEncoderLayer(d, h, F, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=False, layer_norm_eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        load_mha(layer.self_attn, sub_params(p, "attn."))
        load_linear(layer.linear1, p["ffn.W1"], p["ffn.b1"])
        load_linear(layer.linear2, p["ffn.W2"], p["ffn.b2"])
        load_norm(layer.norm1, p, "ln1.")
        load_norm(layer.norm2, p, "ln2.")
    return layer.train()  # train mode (p = 0): the fused eval fast path is not taken


def torch_decoder_layer(p, d, h, F):
    layer = nn.TransformerDecoderLayer(d, h, F, dropout=0.0, activation="relu", batch_first=True,
                                       norm_first=False, layer_norm_eps=1e-5, dtype=torch.float64)
    with torch.no_grad():
        load_mha(layer.self_attn, sub_params(p, "self_attn."))
        load_mha(layer.multihead_attn, sub_params(p, "cross_attn."))
        load_linear(layer.linear1, p["ffn.W1"], p["ffn.b1"])
        load_linear(layer.linear2, p["ffn.W2"], p["ffn.b2"])
        for i in (1, 2, 3):
            load_norm(getattr(layer, f"norm{i}"), p, f"ln{i}.")
    return layer.train()


def padding_mask(lens, S):
    """nn.MultiheadAttention's key_padding_mask from 1-D valid lengths: True = ignore key."""
    return None if lens is None else torch.arange(S)[None, :] >= torch.as_tensor(lens)[:, None]


def causal_mask(T):
    """attn_mask with True = NOT allowed: strictly above the diagonal."""
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


@pytest.mark.parametrize("B, T, d, h, F, lens", [(2, 5, 8, 2, 16, [5, 2]), (2, 5, 16, 4, 32, None),
                                                 (3, 4, 8, 1, 8, [1, 4, 3])])
def test_encoder_block_matches_torch_layer(B, T, d, h, F, lens):
    rng = Generator(1000 + d + h)
    p = randomise_norms(rng, init_encoder_block_params(rng, d, F))
    x = rng.normal((B, T, d))
    lens = None if lens is None else np.array(lens)
    out, cache = encoder_block_forward(x, lens, p, h)
    layer = torch_encoder_layer(p, d, h, F)
    with torch.no_grad():
        expected = layer(t(x), src_key_padding_mask=padding_mask(lens, T))
        _, weights = layer.self_attn(t(x), t(x), t(x), key_padding_mask=padding_mask(lens, T),
                                     need_weights=True, average_attn_weights=False)
    close(out, expected.numpy(), "encoder block out (batch, step, feature)", TORCH["encoder_block"])
    close(cache["weights"], weights.numpy(), "encoder block weights (batch, head, query, key)", TORCH["encoder_block"])


@pytest.mark.parametrize("B, T, S, lens", [(2, 5, 5, [5, 3]), (1, 4, 6, [4]), (2, 3, 4, None)])
def test_decoder_block_matches_torch_layer(B, T, S, lens):
    d, h, F = 8, 2, 16
    rng = Generator(2000 + T + S)
    p = randomise_norms(rng, init_decoder_block_params(rng, d, F))
    x, enc = rng.normal((B, T, d)), rng.normal((B, S, d))
    lens = None if lens is None else np.array(lens)
    out, cache = decoder_block_forward(x, enc, lens, p, h)
    layer = torch_decoder_layer(p, d, h, F)
    with torch.no_grad():
        expected = layer(t(x), t(enc), tgt_mask=causal_mask(T), memory_key_padding_mask=padding_mask(lens, S))
        _, self_w = layer.self_attn(t(x), t(x), t(x), attn_mask=causal_mask(T), need_weights=True,
                                    average_attn_weights=False)
    close(out, expected.numpy(), "decoder block out (batch, step, feature)", TORCH["decoder_block"])
    close(cache["self_weights"], self_w.numpy(), "decoder self weights (batch, head, query, key)", TORCH["decoder_block"])
    assert np.all(np.triu(cache["self_weights"], k=1) == 0.0), "a query attends to a later step"


def sinusoids(T, d):
    """The sinusoidal table written independently in torch: sin on even, cos on odd features."""
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    div = torch.pow(torch.tensor(10000.0, dtype=torch.float64), torch.arange(0, d, 2, dtype=torch.float64) / d)
    P = torch.zeros(T, d, dtype=torch.float64)
    P[:, 0::2] = torch.sin(pos / div)
    P[:, 1::2] = torch.cos(pos / div)
    return P


CONFIGS = {
    "one_plus_one": dict(vocab_src=12, vocab_tgt=12, d=16, ffn_hidden=32, heads=2, enc_blocks=1, dec_blocks=1, dropout=0.0),
    "two_plus_two": dict(vocab_src=12, vocab_tgt=10, d=8, ffn_hidden=16, heads=4, enc_blocks=2, dec_blocks=2, dropout=0.0),
}


def transformer_inputs(config, seed, B=2, S=6, T=7):
    rng = Generator(seed)
    params = randomise_norms(rng, init_transformer_params(rng, config))
    src = rng.integers((B, S), 0, config["vocab_src"])
    tgt = rng.integers((B, T), 0, config["vocab_tgt"])
    return params, src, tgt


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_transformer_matches_torch_composition(name):
    config = CONFIGS[name]
    params, src, tgt = transformer_inputs(config, 3000 + len(name))
    lens = np.array([6, 4])
    logits, _ = transformer_forward(src, lens, tgt, params, config)
    d, h, F = config["d"], config["heads"], config["ffn_hidden"]
    with torch.no_grad():
        x = nn.Embedding.from_pretrained(t(params["enc.embed"]))(torch.as_tensor(src)) * math.sqrt(d)
        x = x + sinusoids(src.shape[1], d)
        for i in range(config["enc_blocks"]):
            layer = torch_encoder_layer(sub_params(params, f"enc.blk{i}."), d, h, F)
            x = layer(x, src_key_padding_mask=padding_mask(lens, src.shape[1]))
        y = nn.Embedding.from_pretrained(t(params["dec.embed"]))(torch.as_tensor(tgt)) * math.sqrt(d)
        y = y + sinusoids(tgt.shape[1], d)
        for j in range(config["dec_blocks"]):
            layer = torch_decoder_layer(sub_params(params, f"dec.blk{j}."), d, h, F)
            y = layer(y, x, tgt_mask=causal_mask(tgt.shape[1]), memory_key_padding_mask=padding_mask(lens, src.shape[1]))
        out = nn.Linear(d, config["vocab_tgt"], dtype=torch.float64)
        load_linear(out, params["dec.out.W"], params["dec.out.b"])
        expected = out(y)
    close(logits, expected.numpy(), f"transformer {name} logits (batch, step, vocab)", TORCH["transformer"])


def test_decoder_is_causal():
    """Changing the target token at step 4 leaves the logits at steps 0..3 bit for bit unchanged."""
    config = CONFIGS["two_plus_two"]
    params, src, tgt = transformer_inputs(config, 3100)
    lens = np.array([6, 3])
    before, _ = transformer_forward(src, lens, tgt, params, config)
    tgt2 = tgt.copy()
    tgt2[:, 4] = (tgt2[:, 4] + 1) % config["vocab_tgt"]
    after, _ = transformer_forward(src, lens, tgt2, params, config)
    assert np.array_equal(before[:, :4], after[:, :4]), "an earlier position saw a later target token"
    assert not np.array_equal(before[:, 4], after[:, 4]), "the changed token changed nothing"


def test_encoder_ignores_padded_source_tokens():
    """Changing a source token beyond the valid length leaves the encoder's valid rows and every
    logit unchanged (cross-attention masks the same keys)."""
    config = CONFIGS["one_plus_one"]
    params, src, tgt = transformer_inputs(config, 3200)
    lens = np.array([6, 3])
    enc_before, _ = transformer_encode(src, lens, params, config)
    logits_before, _ = transformer_forward(src, lens, tgt, params, config)
    src2 = src.copy()
    src2[1, 3:] = (src2[1, 3:] + 5) % config["vocab_src"]
    enc_after, _ = transformer_encode(src2, lens, params, config)
    logits_after, _ = transformer_forward(src2, lens, tgt, params, config)
    assert np.array_equal(enc_before[1, :3], enc_after[1, :3]), "a valid row saw a padded key"
    assert not np.array_equal(enc_before[1, 3:], enc_after[1, 3:]), "the padded tokens changed nothing"
    assert np.array_equal(logits_before, logits_after), "the decoder saw a padded source key"


VIT_CONFIGS = {
    "p2_d16_two_blocks": dict(image=8, channels=1, patch=2, d=16, heads=2, mlp_hidden=32, blocks=2, classes=5, dropout=0.0),
    "p4_d8_c3_one_head": dict(image=8, channels=3, patch=4, d=8, heads=1, mlp_hidden=16, blocks=1, classes=5, dropout=0.0),
}


@pytest.mark.parametrize("name", sorted(VIT_CONFIGS))
def test_vit_matches_torch_composition(name):
    c = VIT_CONFIGS[name]
    rng = Generator(4000 + len(name))
    params = randomise_norms(rng, init_vit_params(rng, c))
    params["cls"] = rng.normal((c["d"],))  # init makes it 0; a nonzero <cls> shows where it goes
    images = rng.uniform((3, c["channels"], c["image"], c["image"]))
    logits, cache = vit_forward(images, params, c)
    d, C, p = c["d"], c["channels"], c["patch"]
    with torch.no_grad():
        conv = nn.Conv2d(C, d, p, stride=p, dtype=torch.float64)
        load_linear(conv, params["patch.W"], params["patch.b"])
        e = conv(t(images)).flatten(2).transpose(1, 2)  # (B, N, d)
        x = torch.cat([t(params["cls"]).expand(e.shape[0], 1, d), e], dim=1) + t(params["pos"])
        for i in range(c["blocks"]):
            bp = sub_params(params, f"blk{i}.")
            ln1, ln2 = nn.LayerNorm(d, dtype=torch.float64), nn.LayerNorm(d, dtype=torch.float64)
            load_norm(ln1, bp, "ln1.")
            load_norm(ln2, bp, "ln2.")
            mha = nn.MultiheadAttention(d, c["heads"], bias=False, batch_first=True, dtype=torch.float64)
            load_mha(mha, sub_params(bp, "attn."))
            lin1 = nn.Linear(d, c["mlp_hidden"], dtype=torch.float64)
            lin2 = nn.Linear(c["mlp_hidden"], d, dtype=torch.float64)
            load_linear(lin1, bp["mlp.W1"], bp["mlp.b1"])
            load_linear(lin2, bp["mlp.W2"], bp["mlp.b2"])
            n1 = ln1(x)
            a, w = mha(n1, n1, n1, need_weights=True, average_attn_weights=False)
            close(cache["weights"][i], w.numpy(), f"vit {name} block {i} weights (batch, head, query, key)", TORCH["vit"])
            x = x + a
            x = x + lin2(nn.GELU()(lin1(ln2(x))))
        head_ln = nn.LayerNorm(d, dtype=torch.float64)
        load_norm(head_ln, params, "head.ln.")
        head = nn.Linear(d, c["classes"], dtype=torch.float64)
        load_linear(head, params["head.W"], params["head.b"])
        expected = head(head_ln(x[:, 0]))
    close(logits, expected.numpy(), f"vit {name} logits (batch, class)", TORCH["vit"])


def test_patch_embedding_order():
    """Patch n = r*G + c, values in (channel, i, j) order: a one-hot weight reads one pixel."""
    C, p, H = 2, 2, 4
    images = np.arange(1 * C * H * H, dtype=np.float64).reshape(1, C, H, H)
    W = np.zeros((1, C, p, p))
    W[0, 1, 0, 1] = 1.0  # channel 1, row 0, column 1 of each patch
    out, _ = patch_embedding_forward(images, W, np.zeros(1))
    expected = [images[0, 1, r * p, c * p + 1] for r in range(2) for c in range(2)]
    assert out[0, :, 0].tolist() == expected
