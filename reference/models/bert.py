"""A BERT-style encoder run from pretrained weights, in float64 (twin: bert.ts). docs/pretrained.md.

    x0  = LN(word[ids] + type[token_type_ids] + pos[0..T-1])      embeddings, that order of adds
    per layer l = 0..L-1 (post-norm, as BertLayer in eval mode):
      q, k, v = x W_q^T + b_q, x W_k^T + b_k, x W_v^T + b_v          (B, T, d)
      heads   = attention(split(q), split(k), split(v), lens)        (B, H, T, D)  scores / sqrt(D)
      a       = merge(heads) W_o^T + b_o                             (B, T, d)
      h       = LN(a + x)
      f       = gelu(h W_i^T + b_i) W_2^T + b_2                       (B, T, F) -> (B, T, d)
      x       = LN(f + h)
LN is layer norm with the config's eps (1e-12 here). Attention reuses dot_product_attention and
its masked softmax; BERT's q/k/v/o biases are added here by linear, so multi-head attention
stays as the book's. The padding mask becomes valid lengths (the mask must be 1...1 0...0 per
row): a padded key's score is replaced by -1e6, where Hugging Face adds finfo(float64).min;
both make exp underflow to exactly 0, so the weights are the same (docs/pretrained.md).
No dropout (inference).

Shape legend: B batch, T steps, d model dim (hidden_size), H heads, D = d / H head dim,
F FFN hidden (intermediate_size), L layers, V vocabulary.
Parameters keep Hugging Face's names: embeddings.word_embeddings.weight (V, d),
encoder.layer.<l>.attention.self.query.weight (d, d), ... output.dense.weight (d, F).
"""

import numpy as np

from ..nn.dot_product_attention import dot_product_attention_forward
from ..nn.embedding import embedding_forward
from ..nn.gelu import gelu_forward
from ..nn.layer_norm import layer_norm_forward
from ..nn.linear import linear_forward
from ..nn.multi_head_attention import merge_heads, split_heads
from ..core.safetensors import load_tensor, tensor_names
from ..core.trace import scope, sublayer

# config.json keys this encoder needs, and the values it supports where only one is implemented
REQUIRED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
            "max_position_embeddings", "type_vocab_size", "layer_norm_eps")
SUPPORTED = {"hidden_act": "gelu", "position_embedding_type": "absolute"}


def bert_config(config_json):
    """The encoder's sizes from a Hugging Face config.json (a dict), checked."""
    missing = [k for k in REQUIRED if k not in config_json]
    if missing:
        raise ValueError(f"bert: config.json lacks {missing}; a BERT config.json has {list(REQUIRED)}")
    for key, value in SUPPORTED.items():
        if config_json.get(key, value) != value:
            raise ValueError(f"bert: config {key} = {config_json[key]!r}; this encoder implements only {value!r}")
    cfg = {k: config_json[k] for k in REQUIRED}
    if cfg["hidden_size"] % cfg["num_attention_heads"] != 0:
        raise ValueError(f"bert: hidden_size {cfg['hidden_size']} is not a multiple of "
                         f"num_attention_heads {cfg['num_attention_heads']}")
    return cfg


def param_shapes(cfg):
    """{name: shape} of every parameter the encoder reads, in Hugging Face's names."""
    d, F = cfg["hidden_size"], cfg["intermediate_size"]
    shapes = {"embeddings.word_embeddings.weight": (cfg["vocab_size"], d),
              "embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], d),
              "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], d),
              "embeddings.LayerNorm.weight": (d,), "embeddings.LayerNorm.bias": (d,)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}."
        for part in ("query", "key", "value"):
            shapes[p + f"attention.self.{part}.weight"] = (d, d)
            shapes[p + f"attention.self.{part}.bias"] = (d,)
        shapes.update({p + "attention.output.dense.weight": (d, d), p + "attention.output.dense.bias": (d,),
                       p + "attention.output.LayerNorm.weight": (d,), p + "attention.output.LayerNorm.bias": (d,),
                       p + "intermediate.dense.weight": (F, d), p + "intermediate.dense.bias": (F,),
                       p + "output.dense.weight": (d, F), p + "output.dense.bias": (d,),
                       p + "output.LayerNorm.weight": (d,), p + "output.LayerNorm.bias": (d,)})
    return shapes


def bert_params(st, cfg):
    """Every parameter from a parsed safetensors file (safetensors.parse_safetensors), float64.
    A checkpoint saved from BertForX prefixes its names with "bert."; both spellings are read."""
    names = set(tensor_names(st))
    params = {}
    for name, shape in param_shapes(cfg).items():
        stored = name if name in names else "bert." + name
        if stored not in names:
            raise ValueError(f"bert: the weights lack {name!r}; is this a BERT checkpoint of this config?")
        params[name] = load_tensor(st, stored)
        if params[name].shape != shape:
            raise ValueError(f"bert: {stored} has shape {params[name].shape}, the config implies {shape}")
    return params


def valid_lengths(attention_mask):
    """(B, T) of 0/1 -> (B,) lengths; every row must be ones then zeros (right padding)."""
    mask = np.asarray(attention_mask)
    lens = np.count_nonzero(mask, axis=-1)
    expected = (np.arange(mask.shape[-1]) < lens[:, None]).astype(mask.dtype)
    if not np.array_equal(mask, expected):
        row = int(np.argwhere(np.any(mask != expected, axis=-1))[0, 0])
        raise ValueError(f"bert: attention_mask row {row} is {mask[row].tolist()}; it must be ones then zeros "
                         "(right padding, as the tokenizer pads)")
    return lens.astype(np.int64)


def bert_embeddings_forward(input_ids, token_type_ids, params, cfg):
    """ids (B, T) int -> (x0 (B, T, d), cache)."""
    B, T = input_ids.shape
    if T > cfg["max_position_embeddings"]:
        raise ValueError(f"bert: {T} tokens exceed max_position_embeddings = {cfg['max_position_embeddings']}")
    positions = np.broadcast_to(np.arange(T, dtype=np.int64), (B, T))  # (B, T)
    word, _ = embedding_forward(input_ids, params["embeddings.word_embeddings.weight"])  # (B, T, d)
    typ, _ = embedding_forward(token_type_ids, params["embeddings.token_type_embeddings.weight"])  # (B, T, d)
    pos, _ = embedding_forward(positions, params["embeddings.position_embeddings.weight"])  # (B, T, d)
    summed = (word + typ) + pos  # (B, T, d)  Hugging Face's order of adds
    out, ln = layer_norm_forward(summed, params["embeddings.LayerNorm.weight"], params["embeddings.LayerNorm.bias"],
                                 cfg["layer_norm_eps"])
    return out, {"summed": summed, "ln": ln}


def bert_attention_forward(x, params, prefix, num_heads, valid_lens):
    """Self-attention with biases: x (B, T, d) -> (a (B, T, d), cache with weights (B, H, T, T))."""
    p = prefix + "attention."
    q, _ = linear_forward(x, params[p + "self.query.weight"], params[p + "self.query.bias"])  # (B, T, d)
    k, _ = linear_forward(x, params[p + "self.key.weight"], params[p + "self.key.bias"])  # (B, T, d)
    v, _ = linear_forward(x, params[p + "self.value.weight"], params[p + "self.value.bias"])  # (B, T, d)
    heads, attn = dot_product_attention_forward(split_heads(q, num_heads), split_heads(k, num_heads),
                                                split_heads(v, num_heads), valid_lens)  # (B, H, T, D)
    a, _ = linear_forward(merge_heads(heads), params[p + "output.dense.weight"], params[p + "output.dense.bias"])  # (B, T, d)
    return a, {"weights": attn["weights"], "q": q, "k": k, "v": v}


def bert_add_norm_forward(y, x, params, name, eps):
    """An add-and-norm: LN(y + x) with the parameters <name>.weight, <name>.bias ->
    (out (B, T, d), cache)."""
    return layer_norm_forward(y + x, params[name + ".weight"], params[name + ".bias"], eps)


def bert_ffn_forward(h, params, prefix):
    """The feed-forward: gelu(h W_i^T + b_i) W_2^T + b_2, h (B, T, d) -> f (B, T, d)."""
    i, _ = linear_forward(h, params[prefix + "intermediate.dense.weight"], params[prefix + "intermediate.dense.bias"])  # (B, T, F)
    g, _ = gelu_forward(i)  # (B, T, F)
    f, _ = linear_forward(g, params[prefix + "output.dense.weight"], params[prefix + "output.dense.bias"])  # (B, T, d)
    return f


def bert_layer_forward(x, params, layer, cfg, valid_lens):
    """One post-norm encoder layer: x (B, T, d) -> (out (B, T, d), cache with weights (B, H, T, T)).
    Traced sub-layers (core/trace.py): attention, addnorm1, ffn, addnorm2."""
    p = f"encoder.layer.{layer}."
    eps = cfg["layer_norm_eps"]
    a, attn = sublayer("attention", bert_attention_forward, x, params, p, cfg["num_attention_heads"], valid_lens)  # (B, T, d)
    h, _ = sublayer("addnorm1", bert_add_norm_forward, a, x, params, p + "attention.output.LayerNorm", eps)  # (B, T, d)
    f = sublayer("ffn", bert_ffn_forward, h, params, p)  # (B, T, d)
    out, _ = sublayer("addnorm2", bert_add_norm_forward, f, h, params, p + "output.LayerNorm", eps)  # (B, T, d)
    return out, {"weights": attn["weights"], "h": h}


def bert_forward(input_ids, attention_mask, token_type_ids, params, cfg):
    """ids, mask, token types (B, T) int -> (last hidden state (B, T, d), cache) with
    cache["hidden_states"] (L + 1, B, T, d): the embeddings, then every layer's output, and
    cache["attentions"] (L, B, H, T, T): every head's weights, as Hugging Face's outputs.
    Traced sub-layers (core/trace.py): embedding, then layer<l>.attention .. layer<l>.addnorm2."""
    input_ids = np.asarray(input_ids, dtype=np.int64)
    if input_ids.ndim != 2:
        raise ValueError(f"bert: input_ids must be (B, T), got shape {input_ids.shape}")
    mask = np.ones_like(input_ids) if attention_mask is None else np.asarray(attention_mask, dtype=np.int64)
    types = np.zeros_like(input_ids) if token_type_ids is None else np.asarray(token_type_ids, dtype=np.int64)
    if mask.shape != input_ids.shape or types.shape != input_ids.shape:
        raise ValueError(f"bert: attention_mask {mask.shape} and token_type_ids {types.shape} must match input_ids "
                         f"{input_ids.shape}")
    valid_lens = valid_lengths(mask)  # (B,)
    x, _ = sublayer("embedding", bert_embeddings_forward, input_ids, types, params, cfg)  # (B, T, d)
    hidden, weights = [x], []
    for layer in range(cfg["num_hidden_layers"]):
        scope(f"layer{layer}.")  # names the layer's traced sub-layers
        x, c = bert_layer_forward(x, params, layer, cfg, valid_lens)  # (B, T, d)
        hidden.append(x)
        weights.append(c["weights"])
    scope("")
    return x, {"hidden_states": np.stack(hidden), "attentions": np.stack(weights), "valid_lens": valid_lens}
