"""The Vision Transformer, forward to class logits (twin: port_ts/src/vit.ts).

    P = patches(img)                          (B, N, C*p*p)   patch (r, c) of the grid is row r*G + c;
                                                              its values flattened in (channel, i, j) order
    E = P W_patch^T + b_patch                 (B, N, d)       = Conv2d(C, d, p, stride=p) + flatten + transpose
    X = drop(concat(cls, E) + pos)            (B, N+1, d)     <cls> PREPENDED at position 0
    X = X + MHA(LN1(X))                       (B, N+1, d)     pre-norm blocks, no mask
    X = X + MLP(LN2(X))                       (B, N+1, d)     MLP: Linear -> GELU (erf) -> drop -> Linear -> drop
    logits = LN_head(X[:, 0]) W_head^T + b    (B, classes)

Shape legend: B batch, C channels, H = W image side, p patch side, G = H/p patches per side,
N = G*G patches, d model dim, M MLP hidden. Config: image, channels, patch, d, heads, mlp_hidden,
blocks, classes, dropout (embedding, attention weights and both MLP dropouts).

Parameters, in the order init_vit_params draws them (PyTorch's defaults):
    patch.W (d, C, p, p), patch.b (d,)  U(+-1/sqrt(C*p*p))
    cls (d,) zeros; pos (N+1, d) N(0, 1)
    blk{i}.ln1.*, blk{i}.attn.W_q..W_o (d, d), blk{i}.ln2.*, blk{i}.mlp.W1 (M, d)/b1/W2 (d, M)/b2
    head.ln.*, head.W (classes, d), head.b (classes,)
Dropout masks (p > 0) in forward order: embedding (B, N+1, d); per block: attention weights
(B, H, N+1, N+1), MLP hidden (B, N+1, M), MLP output (B, N+1, d).
"""

import numpy as np

from .dropout import dropout_forward
from .encoder_block import init_ffn_params, init_layer_norm_params, init_mha_params, param, sub_params
from .gelu import gelu_forward
from .init import linear_params, patch_embedding_params
from .layer_norm import layer_norm_forward
from .linear import linear_forward
from .multi_head_attention import multi_head_attention_forward


def init_vit_params(rng, config):
    """The flat parameter dict, keyed by dotted names, drawn in the order of the module doc."""
    C, p, d = config["channels"], config["patch"], config["d"]
    N = (config["image"] // p) ** 2
    W, b = patch_embedding_params(rng, d, C, p)  # W (d, C*p*p): a conv's fan_in is C*p*p
    params = {"patch.W": W.reshape(d, C, p, p), "patch.b": b,
              "cls": np.zeros(d), "pos": rng.normal((N + 1, d))}
    for i in range(config["blocks"]):
        params.update(init_layer_norm_params(d, f"blk{i}.ln1."))
        params.update(init_mha_params(rng, d, f"blk{i}.attn."))
        params.update(init_layer_norm_params(d, f"blk{i}.ln2."))
        params.update(init_ffn_params(rng, d, config["mlp_hidden"], f"blk{i}.mlp."))
    params.update(init_layer_norm_params(d, "head.ln."))
    params["head.W"], params["head.b"] = linear_params(rng, config["classes"], d)
    return params


def patchify(images, p):
    """(B, C, H, W) -> (B, N, C*p*p): patch n = r*G + c holds images[:, :, r*p:(r+1)*p, c*p:(c+1)*p]
    flattened in (channel, i, j) order."""
    B, C, H, W = images.shape
    if H != W or H % p != 0:
        raise ValueError(f"vit: images must be square with a side divisible by the patch {p}, got {H}x{W}")
    G = H // p
    grid = images.reshape(B, C, G, p, G, p).transpose(0, 2, 4, 1, 3, 5)  # (B, G, G, C, p, p)
    return np.ascontiguousarray(grid).reshape(B, G * G, C * p * p)


def patch_embedding_forward(images, W, b):
    """images (B, C, H, W), W (d, C, p, p), b (d,) -> (out (B, N, d), cache)."""
    images = np.asarray(images, dtype=np.float64)
    d, C, p, _ = W.shape
    patches = patchify(images, p)  # (B, N, C*p*p)
    out, lin = linear_forward(patches, W.reshape(d, C * p * p), b)  # (B, N, d)
    return out, {"patches": patches, "linear": lin}


def vit_mlp_forward(x, params, dropout_p=0.0, rng=None):
    """x (..., d) -> (out (..., d), cache): Linear -> GELU -> dropout -> Linear -> dropout."""
    h, lin1 = linear_forward(x, param(params, "W1"), param(params, "b1"))  # (..., M)
    g, gelu = gelu_forward(h)  # (..., M)
    g, drop1 = dropout_forward(g, dropout_p, rng)  # (..., M)
    y, lin2 = linear_forward(g, param(params, "W2"), param(params, "b2"))  # (..., d)
    out, drop2 = dropout_forward(y, dropout_p, rng)  # (..., d)
    return out, {"lin1": lin1, "gelu": gelu, "drop1": drop1, "lin2": lin2, "drop2": drop2}


def vit_block_forward(x, params, num_heads, dropout_p=0.0, rng=None):
    """Pre-norm block, params stripped of blk{i}.: x (B, T, d) -> (out (B, T, d), cache)."""
    n1, ln1 = layer_norm_forward(x, param(params, "ln1.gamma"), param(params, "ln1.beta"))  # (B, T, d)
    a, attn = multi_head_attention_forward(n1, n1, sub_params(params, "attn."), num_heads,
                                           None, dropout_p, rng)  # (B, T, d)
    x1 = x + a  # (B, T, d)
    n2, ln2 = layer_norm_forward(x1, param(params, "ln2.gamma"), param(params, "ln2.beta"))  # (B, T, d)
    m, mlp = vit_mlp_forward(n2, sub_params(params, "mlp."), dropout_p, rng)  # (B, T, d)
    out = x1 + m  # (B, T, d)
    return out, {"x": x, "ln1": ln1, "attn": attn, "ln2": ln2, "mlp": mlp, "weights": attn["weights"]}


def vit_forward(images, params, config, rng=None):
    """images (B, C, H, W) -> (logits (B, classes), cache); cache["weights"][i] (B, H, N+1, N+1)
    is block i's attention, row 0 the <cls> query."""
    p = config["dropout"]
    e, patch = patch_embedding_forward(images, param(params, "patch.W"), param(params, "patch.b"))  # (B, N, d)
    B, N, d = e.shape
    cls = np.broadcast_to(param(params, "cls"), (B, 1, d))  # (B, 1, d)
    x = np.concatenate([cls, e], axis=1) + param(params, "pos")  # (B, N+1, d)
    x, drop = dropout_forward(x, p, rng)  # (B, N+1, d)
    blocks = []
    for i in range(config["blocks"]):
        x, blk = vit_block_forward(x, sub_params(params, f"blk{i}."), config["heads"], p, rng)  # (B, N+1, d)
        blocks.append(blk)
    h, head_ln = layer_norm_forward(x[:, 0], param(params, "head.ln.gamma"), param(params, "head.ln.beta"))  # (B, d)
    logits, head = linear_forward(h, param(params, "head.W"), param(params, "head.b"))  # (B, classes)
    cache = {"patch": patch, "dropout": drop, "blocks": blocks, "head_ln": head_ln, "head": head,
             "weights": [blk["weights"] for blk in blocks]}
    return logits, cache
