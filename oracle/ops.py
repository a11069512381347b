"""PyTorch float64 twins of the reference's forward ops (reference/cases/*.py COMPUTE): per op one
function (inputs, config) -> {output name: tensor}, the outputs named as the reference's documents
name them. Each is written from the op's definition with PyTorch's own functions (softmax,
layer_norm, gelu, erf, linear ...), never from the reference's code, so a fault in the reference
is not copied here. A tensor the reference computes and a twin does not is not arbitrated.

inputs are torch tensors (float64, or int64 for ids and lengths) by the reference's input names;
config is the case's config. A twin draws nothing: an op whose case draws after its inputs (a
dropout mask, dropout_p > 0) is refused by `refusal` before its twin runs."""

import math

import torch
import torch.nn.functional as F

MASK_VALUE = -1e6  # the d2l book's fill of a masked score, as both engines fill it
LN_EPS = 1e-5  # layer norm's default eps
BASE = 10000.0  # the sinusoidal table's and RoPE's base


def _keep(shape, lens):
    """Bool of shape (B, 1.., Q, K) for scores of `shape` (B, ..., Q, K): True where key k < the
    row's valid length; lens (B,) or (B, Q); None without lengths."""
    if lens is None:
        return None
    B, Q, K = shape[0], shape[-2], shape[-1]
    per_row = lens[:, None].expand(B, Q) if lens.ndim == 1 else lens
    keep = torch.arange(K)[None, None, :] < per_row[:, :, None]  # (B, Q, K)
    return keep.reshape((B,) + (1,) * (len(shape) - 3) + (Q, K))


def _masked_softmax(scores, keep):
    """Softmax over the last axis, a score where keep is False replaced by MASK_VALUE."""
    return torch.softmax(scores if keep is None else scores.masked_fill(~keep, MASK_VALUE), dim=-1)


def _softmax(scores, lens):
    return _masked_softmax(scores, _keep(scores.shape, lens))


def _attention(q, k, v, lens):
    """(out, weights) of scaled dot-product attention, masked by valid lengths."""
    weights = _softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), lens)
    return weights @ v, weights


def masked_softmax(a, config):
    return {"out": _softmax(a["x"], a.get("valid_lens"))}


def dot_product_attention(a, config):
    out, weights = _attention(a["q"], a["k"], a["v"], a.get("valid_lens"))
    return {"out": out, "weights": weights}


def additive_attention(a, config):
    features = F.linear(a["q"], a["W_q"])[:, :, None, :] + F.linear(a["k"], a["W_k"])[:, None, :, :]  # (B, Q, K, H)
    weights = _softmax(F.linear(torch.tanh(features), a["w_v"])[..., 0], a.get("valid_lens"))
    return {"out": weights @ a["v"], "weights": weights}


def _heads(x, W, heads):
    """(B, T, in) projected by W (heads * D, in), split into (B, heads, T, D): head h holds
    features [h D, (h + 1) D)."""
    B, T = x.shape[:2]
    return F.linear(x, W).reshape(B, T, heads, -1).transpose(1, 2)


def grouped_query_attention(a, config):
    """Multi-head attention whose G = kv_heads key/value heads each serve heads / G query heads
    (PyTorch's enable_gqa pairing: repeat_interleave on the head axis); no biases."""
    heads, groups = config["heads"], config.get("kv_heads", config["heads"])
    x_q = a["x_q"]
    x_kv = a.get("x_kv", x_q)
    q = _heads(x_q, a["W_q"], heads)
    k = _heads(x_kv, a["W_k"], groups).repeat_interleave(heads // groups, dim=1)
    v = _heads(x_kv, a["W_v"], groups).repeat_interleave(heads // groups, dim=1)
    out, weights = _attention(q, k, v, a.get("valid_lens"))  # (B, H, Q, D), (B, H, Q, K)
    B, Q = x_q.shape[:2]
    return {"out": F.linear(out.transpose(1, 2).reshape(B, Q, -1), a["W_o"]), "weights": weights}


def multi_head_attention(a, config):
    return grouped_query_attention(a, {"heads": config["heads"]})


def _angles(positions, d):
    """(T, d/2) angles p / 10000^(2i/d) at integer positions (T,)."""
    return positions.to(torch.float64)[:, None] / BASE ** (torch.arange(0, d, 2, dtype=torch.float64) / d)


def _positions(a, name, T):
    return a[name] if name in a else torch.arange(T)


def _rotate(x, positions):
    """RoPE: pair (2i, 2i+1) of step t rotated by the angle positions[t] / 10000^(2i/d), as a
    complex product (x_2i + i x_2i+1) * e^(i angle)."""
    angle = _angles(positions, x.shape[-1])
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angle), angle)).reshape(x.shape), angle


def rope(a, config):
    out, angle = _rotate(a["x"], _positions(a, "positions", a["x"].shape[-2]))
    return {"out": out, "cos": torch.cos(angle), "sin": torch.sin(angle)}


def rope_attention(a, config):
    q, _ = _rotate(a["q"], _positions(a, "q_positions", a["q"].shape[-2]))
    k, _ = _rotate(a["k"], _positions(a, "k_positions", a["k"].shape[-2]))
    out, weights = _attention(q, k, a["v"], a.get("valid_lens"))
    return {"out": out, "weights": weights}


def positional_encoding(a, config):
    """x (B, T, d) plus the sinusoidal table: sin of the angles on even features, cos on odd."""
    T, d = a["x"].shape[-2:]
    angle = _angles(torch.arange(T), d)
    table = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(T, d)
    return {"out": a["x"] + table}


def linear(a, config):
    return {"out": F.linear(a["x"], a["W"], a.get("b"))}


def embedding(a, config):
    return {"out": F.embedding(a["tokens"], a["E"])}


def layer_norm(a, config):
    x, eps = a["x"], config.get("eps", LN_EPS)
    var, mean = torch.var_mean(x, dim=-1, correction=0)
    return {"out": F.layer_norm(x, x.shape[-1:], a["gamma"], a["beta"], eps), "mean": mean,
            "rstd": torch.rsqrt(var + eps)}


def ffn(a, config):
    h = torch.relu(F.linear(a["x"], a["W1"], a["b1"]))
    return {"out": F.linear(h, a["W2"], a["b2"]), "h": h}


def gelu(a, config):
    return {"out": F.gelu(a["x"], approximate="none"), "erf": torch.erf(a["x"])}


def dropout(a, config):
    return {"out": a["x"].clone()}  # p = 0 only (refusal): the identity


def _block(a, pre):
    """The tensors of a model's sub-layer `pre` ("attn.", "ffn.", "ln1." ...) under their own names."""
    return {name[len(pre):]: t for name, t in a.items() if name.startswith(pre)}


def _norm(x, a, pre):
    """Layer norm with the gamma and beta of `pre`."""
    return F.layer_norm(x, x.shape[-1:], a[pre + "gamma"], a[pre + "beta"], LN_EPS)


def _add_norm(x, y, a, pre):
    """Post-norm residual: LN(x + y)."""
    return _norm(x + y, a, pre)


def _given(inputs, **optional):
    """inputs with those of the optional tensors that are not None."""
    return dict(inputs, **{name: t for name, t in optional.items() if t is not None})


def _mha(a, pre, x_q, x_kv, heads, lens):
    return grouped_query_attention(_given(_block(a, pre), x_q=x_q, x_kv=x_kv, valid_lens=lens), {"heads": heads})


def encoder_block(a, config):
    """The d2l encoder block: y = LN(x + MHA(x)), out = LN(y + FFN(y))."""
    heads, x = config["heads"], a["x"]
    attn = _mha(a, "attn.", x, x, heads, a.get("valid_lens"))
    y = _add_norm(x, attn["out"], a, "ln1.")
    return {"out": _add_norm(y, ffn(dict(_block(a, "ffn."), x=y), config)["out"], a, "ln2."), "weights": attn["weights"]}


def decoder_block(a, config):
    """The d2l decoder block in training: causal self-attention, cross-attention on the encoder's
    output (its valid lengths), FFN, each followed by add & norm."""
    heads, x = config["heads"], a["x"]
    B, T = x.shape[:2]
    causal = torch.arange(1, T + 1).expand(B, T)  # query t sees keys 0..t
    own = _mha(a, "self_attn.", x, x, heads, causal)
    y = _add_norm(x, own["out"], a, "ln1.")
    cross = _mha(a, "cross_attn.", y, a["enc_out"], heads, a.get("enc_valid_lens"))
    z = _add_norm(y, cross["out"], a, "ln2.")
    out = _add_norm(z, ffn(dict(_block(a, "ffn."), x=z), config)["out"], a, "ln3.")
    return {"out": out, "self_weights": own["weights"], "cross_weights": cross["weights"]}


def _embed(tokens, E):
    """PE(E[tokens] * sqrt(d)): scaled before the positions are added."""
    return positional_encoding({"x": F.embedding(tokens, E) * math.sqrt(E.shape[1])}, {})["out"]


def transformer(a, config):
    """The encoder-decoder: embedded source through the encoder blocks, embedded target through
    the decoder blocks (each reading the encoder's output), then the output linear."""
    heads, lens = config["heads"], a.get("src_valid_lens")
    x, outputs = _embed(a["src"], a["enc.embed"]), {}
    for i in range(config["enc_blocks"]):
        found = encoder_block(_given(_block(a, f"enc.blk{i}."), x=x, valid_lens=lens), {"heads": heads})
        x, outputs[f"enc.blk{i}.weights"] = found["out"], found["weights"]
    y = _embed(a["tgt_in"], a["dec.embed"])
    for j in range(config["dec_blocks"]):
        found = decoder_block(_given(_block(a, f"dec.blk{j}."), x=y, enc_out=x, enc_valid_lens=lens), {"heads": heads})
        y = found["out"]
        outputs[f"dec.blk{j}.self_weights"] = found["self_weights"]
        outputs[f"dec.blk{j}.cross_weights"] = found["cross_weights"]
    return {"logits": F.linear(y, a["dec.out.W"], a["dec.out.b"]), **outputs}


def vit_patch_embedding(a, config):
    """Non-overlapping p x p patches, each projected: a convolution of stride p, flattened (B, N, d)."""
    W = a["patch.W"]
    return {"out": F.conv2d(a["images"], W, a["patch.b"], stride=W.shape[-1]).flatten(2).transpose(1, 2)}


def vit(a, config):
    """The Vision Transformer: <cls> prepended to the patch embeddings, learned positions added,
    pre-norm blocks (x + MHA(LN1 x), then x + MLP(LN2 x), the MLP with exact GELU), and the head
    on the normalised <cls> row."""
    e = vit_patch_embedding(a, config)["out"]  # (B, N, d)
    x = torch.cat([a["cls"].expand(e.shape[0], 1, -1), e], dim=1) + a["pos"]
    outputs = {}
    for i in range(config["blocks"]):
        n1 = _norm(x, a, f"blk{i}.ln1.")
        attn = _mha(a, f"blk{i}.attn.", n1, n1, config["heads"], None)
        x = x + attn["out"]
        mlp = _block(a, f"blk{i}.mlp.")
        x = x + F.linear(F.gelu(F.linear(_norm(x, a, f"blk{i}.ln2."), mlp["W1"], mlp["b1"])), mlp["W2"], mlp["b2"])
        outputs[f"blk{i}.weights"] = attn["weights"]
    return {"logits": F.linear(_norm(x[:, 0], a, "head.ln."), a["head.W"], a["head.b"]), **outputs}


def _causal(T, pads=None):
    """Bool (1|B, 1, T, T): key k kept for query q when pads[b] <= k <= q."""
    t = torch.arange(T)
    keep = (t[None, :] <= t[:, None])[None, None]
    return keep if pads is None else keep & (t[None, None, None, :] >= pads[:, None, None, None])


def _lesson_attention(a, x, heads, keep):
    """PyTorch's nn.MultiheadAttention maths: the packed input projection W_in (3d, d) with its
    bias, split into q, k, v and into heads, masked softmax, the output projection with its bias."""
    B, T, d = x.shape
    q, k, v = (t.reshape(B, T, heads, -1).transpose(1, 2) for t in F.linear(x, a["W_in"], a["b_in"]).chunk(3, dim=-1))
    weights = _masked_softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), keep)
    return {"out": F.linear((weights @ v).transpose(1, 2).reshape(B, T, d), a["W_o"], a["b_o"]), "weights": weights}


def lesson_attention(a, config):
    keep = _causal(a["x"].shape[1]) if config.get("causal", False) else None
    return _lesson_attention(a, a["x"], config["heads"], keep)


def _lesson_block(a, x, heads, keep):
    """The lesson's pre-norm block: x1 = x + attention(LN1 x), out = x1 + FFN(LN2 x1)."""
    attn = _lesson_attention(_block(a, "attn."), _norm(x, a, "ln1."), heads, keep)
    x1 = x + attn["out"]
    return {"out": x1 + ffn(dict(_block(a, "ffn."), x=_norm(x1, a, "ln2.")), {})["out"], "weights": attn["weights"]}


def lesson_block(a, config):
    keep = _causal(a["x"].shape[1]) if config.get("causal", False) else None
    count = sum(t.numel() for name, t in a.items() if name != "x")  # every handed tensor but x is a parameter
    return {**_lesson_block(a, a["x"], config["heads"], keep), "param_count": torch.tensor(count)}


def decoder_lm(a, config):
    """The decoder-only model of lesson blocks on a left-padded batch: token and position
    embeddings (position t - pads[b], 0 on a pad), causal blocks that mask the pads, the final
    norm and the head."""
    tokens, pads = a["tokens"], a.get("pads")
    T = tokens.shape[1]
    positions = torch.arange(T)[None, :] if pads is None else (torch.arange(T)[None, :] - pads[:, None]).clamp(min=0)
    x, keep, outputs = F.embedding(tokens, a["tok"]) + F.embedding(positions, a["pos"]), _causal(T, pads), {}
    for i in range(config["blocks"]):
        found = _lesson_block(_block(a, f"blk{i}."), x, config["heads"], keep)
        x, outputs[f"blk{i}.weights"] = found["out"], found["weights"]
    return {"logits": F.linear(_norm(x, a, "ln_f."), a["head.W"], a["head.b"]), **outputs}


def _banded(a, keep):
    """Attention of q (B, H, T, D) on k, v where keep (T, K) allows, with its log-sum-exp and the
    gradients of sum(out * dout) by autograd: the outputs of a tiled case, and the same tensors
    under plain.* (the plain form computes the same maths)."""
    q, k, v = (a[n].clone().requires_grad_() for n in ("q", "k", "v"))
    with torch.enable_grad():
        scores = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~keep, -math.inf)
        out = torch.softmax(scores, dim=-1) @ v
        grads = torch.autograd.grad(out, (q, k, v), a["dout"])
    found = {"out": out.detach(), "lse": torch.logsumexp(scores.detach(), dim=-1),
             **{f"d{n}": g for n, g in zip("qkv", grads)}}
    return {**found, **{f"plain.{n}": found[n] for n in ("out", "dq", "dk", "dv")}}


def tiled_attention(a, config):
    T, K = a["q"].shape[-2], a["k"].shape[-2]
    keep = torch.ones(T, K, dtype=torch.bool)
    return _banded(a, keep.tril() if config.get("causal", False) else keep)


def sliding_window_attention(a, config):
    """Causal attention on the last `window` keys: key k for query t when t - window < k <= t."""
    t = torch.arange(a["q"].shape[-2])
    return _banded(a, (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - config["window"]))


TWINS = {"masked_softmax": masked_softmax, "dot_product_attention": dot_product_attention,
         "additive_attention": additive_attention, "multi_head_attention": multi_head_attention,
         "grouped_query_attention": grouped_query_attention, "rope": rope, "rope_attention": rope_attention,
         "positional_encoding": positional_encoding, "linear": linear, "embedding": embedding,
         "layer_norm": layer_norm, "ffn": ffn, "gelu": gelu, "dropout": dropout, "encoder_block": encoder_block,
         "decoder_block": decoder_block, "transformer": transformer, "vit_patch_embedding": vit_patch_embedding,
         "vit": vit, "tiled_attention": tiled_attention, "sliding_window_attention": sliding_window_attention,
         "lesson_attention": lesson_attention, "lesson_block": lesson_block, "decoder_lm": decoder_lm}


def refusal(case):
    """Why the torch engine does not arbitrate a case, or None: an op without a twin, or a dropout
    that draws a mask (p > 0) PyTorch would draw otherwise."""
    op, config = case.get("op"), case.get("config") or {}
    if op not in TWINS:
        return f"PyTorch has no twin of op {op}: not arbitrated"
    p = config.get("p", 0.0) if op == "dropout" else config.get("dropout_p", config.get("dropout", 0.0))
    if p:
        return f"dropout (p = {p}) draws a mask that PyTorch would draw otherwise: not arbitrated"
    return None
