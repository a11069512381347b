"""The Vision Transformer, forward to class logits (twin: port_ts/src/models/vit.ts).

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

Backward: each *_backward sits below its forward, takes its cache and walks it in reverse. A
tensor used twice gets its gradients added in one fixed order, the same in both engines:
    block:  dX1 = dOut + dX1_ln2       the residual, then the MLP branch through LN2
            dN1 = dN1_query + dN1_kv   LN1's output is the queries and the keys/values
            dX  = dX1 + dX_ln1         the residual, then the attention branch through LN1
    model:  dcls = sum over b of dX0[b, 0], dpos = sum over b of dX0[b]   in batch order from +0
vit_backward returns every parameter's gradient under its name, in init order.
Traced (core/trace.py): the sub-layers embedding, blk{i}.attention, blk{i}.mlp and head, forward
and backward.
vit_loss / vit_loss_backward add the mean cross-entropy of the logits against integer labels.
"""

import numpy as np

from ..nn.dropout import dropout_backward, dropout_forward
from ..core.params import param, sub_params
from ..core.trace import backward, scope, sublayer
from ..nn.encoder_block import init_ffn_params, init_layer_norm_params, init_mha_params
from ..nn.gelu import gelu_backward, gelu_forward
from ..nn.init import linear_params, patch_embedding_params
from ..nn.layer_norm import layer_norm_backward, layer_norm_forward
from ..nn.linear import linear_backward, linear_forward
from ..nn.loss import cross_entropy_backward, cross_entropy_forward
from ..nn.multi_head_attention import multi_head_attention_backward, multi_head_attention_forward


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


def patchify_backward(dpatches, image_shape, p):
    """dpatches (B, N, C*p*p) -> (B, C, H, W): every patch value back to its pixel, the inverse
    permutation of patchify (patches do not overlap, so nothing is summed)."""
    B, C, H, W = image_shape
    G = H // p
    grid = dpatches.reshape(B, G, G, C, p, p).transpose(0, 3, 1, 4, 2, 5)  # (B, C, G, p, G, p)
    return np.ascontiguousarray(grid).reshape(B, C, H, W)


def patch_embedding_forward(images, W, b):
    """images (B, C, H, W), W (d, C, p, p), b (d,) -> (out (B, N, d), cache)."""
    images = np.asarray(images, dtype=np.float64)
    d, C, p, _ = W.shape
    patches = patchify(images, p)  # (B, N, C*p*p)
    out, lin = linear_forward(patches, W.reshape(d, C * p * p), b)  # (B, N, d)
    return out, {"patches": patches, "linear": lin, "image_shape": images.shape, "W_shape": W.shape}


def patch_embedding_backward(dout, cache):
    """dout (B, N, d) -> (dimages (B, C, H, W), dW (d, C, p, p), db (d,))."""
    d, C, p, _ = cache["W_shape"]
    dpatches, dW, db = linear_backward(dout, cache["linear"])  # inverts: E = P W_patch^T + b_patch
    dimages = patchify_backward(dpatches, cache["image_shape"], p)  # inverts: P = patches(img)
    return dimages, dW.reshape(d, C, p, p), db


def vit_mlp_forward(x, params, dropout_p=0.0, rng=None):
    """x (..., d) -> (out (..., d), cache): Linear -> GELU -> dropout -> Linear -> dropout."""
    h, lin1 = linear_forward(x, param(params, "W1"), param(params, "b1"))  # (..., M)
    g, gelu = gelu_forward(h)  # (..., M)
    g, drop1 = dropout_forward(g, dropout_p, rng)  # (..., M)
    y, lin2 = linear_forward(g, param(params, "W2"), param(params, "b2"))  # (..., d)
    out, drop2 = dropout_forward(y, dropout_p, rng)  # (..., d)
    return out, {"lin1": lin1, "gelu": gelu, "drop1": drop1, "lin2": lin2, "drop2": drop2}


def vit_mlp_backward(dout, cache):
    """dout (..., d) -> (dx (..., d), {"W1", "b1", "W2", "b2"})."""
    dy = dropout_backward(dout, cache["drop2"])  # inverts: out = dropout(y)
    dg, dW2, db2 = linear_backward(dy, cache["lin2"])  # inverts: y = g W2^T + b2
    dg = dropout_backward(dg, cache["drop1"])  # inverts: g = dropout(g)
    dh = gelu_backward(dg, cache["gelu"])  # inverts: g = GELU(h)
    dx, dW1, db1 = linear_backward(dh, cache["lin1"])  # inverts: h = x W1^T + b1
    return dx, {"W1": dW1, "b1": db1, "W2": dW2, "b2": db2}


def vit_attention_forward(x, params, num_heads, dropout_p=0.0, rng=None):
    """The block's first half, x + MHA(LN1(x)): x (B, T, d) -> (x1 (B, T, d), {"ln1", "attn"})."""
    n1, ln1 = layer_norm_forward(x, param(params, "ln1.gamma"), param(params, "ln1.beta"))  # (B, T, d)
    a, attn = multi_head_attention_forward(n1, n1, sub_params(params, "attn."), num_heads,
                                           None, dropout_p, rng)  # (B, T, d)
    x1 = x + a  # (B, T, d)
    return x1, {"ln1": ln1, "attn": attn}


def vit_feedforward_forward(x1, params, dropout_p=0.0, rng=None):
    """The block's second half, x1 + MLP(LN2(x1)): x1 (B, T, d) -> (out (B, T, d), {"ln2", "mlp"})."""
    n2, ln2 = layer_norm_forward(x1, param(params, "ln2.gamma"), param(params, "ln2.beta"))  # (B, T, d)
    m, mlp = vit_mlp_forward(n2, sub_params(params, "mlp."), dropout_p, rng)  # (B, T, d)
    out = x1 + m  # (B, T, d)
    return out, {"ln2": ln2, "mlp": mlp}


def vit_block_forward(x, params, num_heads, dropout_p=0.0, rng=None):
    """Pre-norm block, params stripped of blk{i}.: x (B, T, d) -> (out (B, T, d), cache).
    Traced sub-layers (core/trace.py): attention (the first half), mlp (the second), forward and backward."""
    x1, first = sublayer("attention", vit_attention_forward, x, params, num_heads, dropout_p, rng)  # (B, T, d)
    out, second = sublayer("mlp", vit_feedforward_forward, x1, params, dropout_p, rng)  # (B, T, d)
    return out, {"x": x, "ln1": first["ln1"], "attn": first["attn"], "ln2": second["ln2"], "mlp": second["mlp"],
                 "weights": first["attn"]["weights"]}


# the labels a traced backward gives each returned gradient: the port's field names (core/trace.py)
HALF_GRADS = ("dx", "dgamma", "dbeta", "grads")  # either half of a block
HEAD_GRADS = ("dx", "dgamma", "dbeta", "dW", "db")
EMBED_GRADS = ("dW", "db", "dcls", "dpos")


def vit_feedforward_backward(dout, cache):
    """The block's second half: dout (B, T, d) -> (dx1 (B, T, d), dgamma2 (d,), dbeta2 (d,),
    {"W1", "b1", "W2", "b2"})."""
    # inverts: out = x1 + m; m = MLP(n2)
    dn2, mlp = vit_mlp_backward(dout, cache["mlp"])  # (B, T, d)
    # inverts: n2 = LN2(x1)
    dx1_ln, dgamma2, dbeta2 = layer_norm_backward(dn2, cache["ln2"])  # (B, T, d)
    dx1 = dout + dx1_ln  # x1 feeds the residual and LN2
    return dx1, dgamma2, dbeta2, mlp


def vit_attention_backward(dx1, cache):
    """The block's first half: dx1 (B, T, d) -> (dx (B, T, d), dgamma1 (d,), dbeta1 (d,),
    {"W_q", "W_k", "W_v", "W_o"})."""
    # inverts: x1 = x + a; a = MHA(n1, n1)
    dn1_q, dn1_kv, attn = multi_head_attention_backward(dx1, cache["attn"])  # (B, T, d) each
    dn1 = dn1_q + dn1_kv  # n1 is both the queries and the keys/values
    # inverts: n1 = LN1(x)
    dx_ln, dgamma1, dbeta1 = layer_norm_backward(dn1, cache["ln1"])  # (B, T, d)
    dx = dx1 + dx_ln  # x feeds the residual and LN1
    return dx, dgamma1, dbeta1, attn


def vit_block_backward(dout, cache):
    """dout (B, T, d) -> (dx (B, T, d), grads under the stripped names, in init order)."""
    dx1, dgamma2, dbeta2, mlp = backward("mlp", HALF_GRADS, vit_feedforward_backward, dout, cache)  # (B, T, d)
    dx, dgamma1, dbeta1, attn = backward("attention", HALF_GRADS, vit_attention_backward, dx1, cache)  # (B, T, d)
    grads = {"ln1.gamma": dgamma1, "ln1.beta": dbeta1}
    grads.update({f"attn.{name}": attn[name] for name in ("W_q", "W_k", "W_v", "W_o")})
    grads.update({"ln2.gamma": dgamma2, "ln2.beta": dbeta2})
    grads.update({f"mlp.{name}": mlp[name] for name in ("W1", "b1", "W2", "b2")})
    return dx, grads


def vit_forward(images, params, config, rng=None):
    """images (B, C, H, W) -> (logits (B, classes), cache); cache["weights"][i] (B, H, N+1, N+1)
    is block i's attention, row 0 the <cls> query."""
    p = config["dropout"]
    x, embed = sublayer("embedding", vit_embed_forward, images, params, p, rng)  # (B, N+1, d)
    blocks = []
    for i in range(config["blocks"]):
        scope(f"blk{i}.")  # names the block's traced sub-layers
        x, blk = vit_block_forward(x, sub_params(params, f"blk{i}."), config["heads"], p, rng)  # (B, N+1, d)
        blocks.append(blk)
    scope("")
    logits, head = sublayer("head", vit_head_forward, x, params)  # (B, classes)
    cache = {"patch": embed["patch"], "dropout": embed["dropout"], "blocks": blocks, "head_ln": head["head_ln"],
             "head": head["head"], "weights": [blk["weights"] for blk in blocks], "tokens": x.shape}
    return logits, cache


def vit_embed_forward(images, params, dropout_p=0.0, rng=None):
    """images (B, C, H, W) -> (x (B, N+1, d), {"patch", "dropout"}): the patches embedded, <cls>
    put first, the positions added, dropout."""
    e, patch = patch_embedding_forward(images, param(params, "patch.W"), param(params, "patch.b"))  # (B, N, d)
    B, N, d = e.shape
    cls = np.broadcast_to(param(params, "cls"), (B, 1, d))  # (B, 1, d)
    x = np.concatenate([cls, e], axis=1) + param(params, "pos")  # (B, N+1, d)
    x, drop = dropout_forward(x, dropout_p, rng)  # (B, N+1, d)
    return x, {"patch": patch, "dropout": drop}


def vit_head_forward(x, params):
    """x (B, N+1, d) -> (logits (B, classes), {"head_ln", "head"}): LN then Linear of the <cls> row."""
    h, head_ln = layer_norm_forward(x[:, 0], param(params, "head.ln.gamma"), param(params, "head.ln.beta"))  # (B, d)
    logits, head = linear_forward(h, param(params, "head.W"), param(params, "head.b"))  # (B, classes)
    return logits, {"head_ln": head_ln, "head": head}


def vit_head_backward(dlogits, cache):
    """dlogits (B, classes) -> (dx (B, N+1, d), dgamma (d,), dbeta (d,), dW (classes, d), db (classes,))
    of the head's LN and Linear; cache the model's."""
    B, T, d = cache["tokens"]
    # inverts: logits = LN_head(X[:, 0]) W_head^T + b
    dh, dW_head, db_head = linear_backward(dlogits, cache["head"])  # (B, d)
    dfirst, dgamma_head, dbeta_head = layer_norm_backward(dh, cache["head_ln"])  # (B, d)
    dx = np.zeros((B, T, d))  # (B, N+1, d): only the <cls> row reaches the head
    dx[:, 0] = dfirst
    return dx, dgamma_head, dbeta_head, dW_head, db_head


def vit_embed_backward(dx, cache):
    """dx (B, N+1, d) -> (dW_patch (d, C, p, p), db_patch (d,), dcls (d,), dpos (N+1, d)); cache the model's."""
    B, T, d = cache["tokens"]
    # inverts: X = drop(concat(cls, E) + pos)
    dx0 = dropout_backward(dx, cache["dropout"])  # (B, N+1, d)
    dpos = np.zeros((T, d))  # (N+1, d)
    for b in range(B):
        dpos = dpos + dx0[b]  # pos is added to every image: in batch order from +0
    dcls = np.zeros(d)  # (d,)
    for b in range(B):
        dcls = dcls + dx0[b, 0]  # <cls> is row 0 of every image
    _, dW_patch, db_patch = patch_embedding_backward(dx0[:, 1:], cache["patch"])  # inverts: E = patch_embed(img)
    return dW_patch, db_patch, dcls, dpos


def vit_backward(dlogits, cache):
    """dlogits (B, classes) -> grads keyed by every parameter name, in init order."""
    dlogits = np.asarray(dlogits, dtype=np.float64)
    dx, dgamma_head, dbeta_head, dW_head, db_head = backward("head", HEAD_GRADS, vit_head_backward, dlogits, cache)
    block_grads = [None] * len(cache["blocks"])
    for i in reversed(range(len(cache["blocks"]))):
        scope(f"blk{i}.")  # names the block's traced backwards
        dx, block_grads[i] = vit_block_backward(dx, cache["blocks"][i])  # inverts: X = block_i(X)
    scope("")
    dW_patch, db_patch, dcls, dpos = backward("embedding", EMBED_GRADS, vit_embed_backward, dx, cache)
    grads = {"patch.W": dW_patch, "patch.b": db_patch, "cls": dcls, "pos": dpos}
    for i, bg in enumerate(block_grads):
        grads.update({f"blk{i}.{name}": g for name, g in bg.items()})
    grads.update({"head.ln.gamma": dgamma_head, "head.ln.beta": dbeta_head, "head.W": dW_head, "head.b": db_head})
    return grads


def vit_loss(params, config, images, labels, rng=None):
    """Mean cross-entropy of the logits against labels int (B,) in [0, classes).
    Returns (loss, cache): cache["logits"] (B, classes), cache["model"] the forward's cache,
    cache["ce"] the loss's cache. Dropout p > 0 needs rng (masks drawn in forward order)."""
    logits, model = vit_forward(images, params, config, rng)  # (B, classes)
    loss, ce = cross_entropy_forward(logits, np.asarray(labels))
    return loss, {"logits": logits, "model": model, "ce": ce}


def vit_loss_backward(cache):
    """The gradient of vit_loss's loss (dloss = 1) -> grads keyed by the parameter names."""
    dlogits = cross_entropy_backward(cache["ce"])  # (B, classes)  inverts: loss = CE(logits, labels)
    return vit_backward(dlogits, cache["model"])
