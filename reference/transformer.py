"""The Transformer encoder-decoder, forward to logits (twin: port_ts/src/transformer.ts).

    X = PE(embed_src(src) * sqrt(d))          (B, S, d)     scaled BEFORE the positions are added
    X = enc_block_i(X, src_lens)              (B, S, d)     i = 0 .. enc_blocks-1, post-norm
    Y = PE(embed_tgt(tgt_in) * sqrt(d))       (B, T, d)
    Y = dec_block_j(Y, X, src_lens)           (B, T, d)     causal self, cross, FFN
    logits = Y W_out^T + b_out                (B, T, V_tgt)

Shape legend: B batch, S source steps, T target steps, d model dim, H heads, F FFN hidden,
V_src / V_tgt vocabularies. Config: vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks,
dec_blocks, dropout (one p for the positional encoding, attention weights and every AddNorm).

Parameters, in the order init_transformer_params draws them (PyTorch's defaults):
    enc.embed (V_src, d) N(0, 1)
    enc.blk{i}.*  for each encoder block: attn.W_q..W_o, ln1, ffn.W1/b1/W2/b2, ln2
    dec.embed (V_tgt, d) N(0, 1)
    dec.blk{j}.*  for each decoder block: self_attn.*, ln1, cross_attn.*, ln2, ffn.*, ln3
    dec.out.W (V_tgt, d), dec.out.b (V_tgt,)  U(+-1/sqrt(d))
Dropout masks (p > 0) are drawn in forward order: the encoder's, then the decoder's.
"""

import math

import numpy as np

from .decoder_block import decoder_block_forward, init_decoder_block_params
from .embedding import embedding_forward
from .encoder_block import encoder_block_forward, init_encoder_block_params, param, sub_params
from .init import embedding_params, linear_params
from .linear import linear_forward
from .positional_encoding import positional_encoding_forward


def init_transformer_params(rng, config):
    """The flat parameter dict, keyed by dotted names, drawn in the order of the module doc."""
    d, F = config["d"], config["ffn_hidden"]
    params = {"enc.embed": embedding_params(rng, config["vocab_src"], d)}
    for i in range(config["enc_blocks"]):
        for name, value in init_encoder_block_params(rng, d, F).items():
            params[f"enc.blk{i}.{name}"] = value
    params["dec.embed"] = embedding_params(rng, config["vocab_tgt"], d)
    for j in range(config["dec_blocks"]):
        for name, value in init_decoder_block_params(rng, d, F).items():
            params[f"dec.blk{j}.{name}"] = value
    params["dec.out.W"], params["dec.out.b"] = linear_params(rng, config["vocab_tgt"], d)
    return params


def embed_positions(tokens, E, dropout_p, rng):
    """PE(E[tokens] * sqrt(d)): tokens int (B, T), E (V, d) -> ((B, T, d), cache)."""
    e, embed = embedding_forward(tokens, E)  # (B, T, d)
    x, pe = positional_encoding_forward(e * math.sqrt(E.shape[1]), dropout_p, rng)  # (B, T, d)
    return x, {"embed": embed, "pe": pe}


def transformer_encode(src, src_valid_lens, params, config, rng=None):
    """src int (B, S), src_valid_lens None | (B,) -> (enc_out (B, S, d), cache)."""
    p = config["dropout"]
    x, emb = embed_positions(src, param(params, "enc.embed"), p, rng)  # (B, S, d)
    blocks = []
    for i in range(config["enc_blocks"]):
        x, blk = encoder_block_forward(x, src_valid_lens, sub_params(params, f"enc.blk{i}."),
                                       config["heads"], p, rng)  # (B, S, d)
        blocks.append(blk)
    return x, {"embed": emb, "blocks": blocks}


def transformer_decode(tgt_in, enc_out, src_valid_lens, params, config, rng=None):
    """tgt_in int (B, T), enc_out (B, S, d) -> (logits (B, T, V_tgt), cache)."""
    p = config["dropout"]
    y, emb = embed_positions(tgt_in, param(params, "dec.embed"), p, rng)  # (B, T, d)
    blocks = []
    for j in range(config["dec_blocks"]):
        y, blk = decoder_block_forward(y, enc_out, src_valid_lens, sub_params(params, f"dec.blk{j}."),
                                       config["heads"], p, rng)  # (B, T, d)
        blocks.append(blk)
    logits, out = linear_forward(y, param(params, "dec.out.W"), param(params, "dec.out.b"))  # (B, T, V_tgt)
    return logits, {"embed": emb, "blocks": blocks, "out": out}


def transformer_forward(src, src_valid_lens, tgt_in, params, config, rng=None):
    """src int (B, S), src_valid_lens None | (B,), tgt_in int (B, T) -> (logits (B, T, V_tgt), cache).
    cache["enc_weights"][i] (B, H, S, S), ["dec_self_weights"][j] (B, H, T, T) and
    ["dec_cross_weights"][j] (B, H, T, S) are every block's attention weights, for the heatmaps."""
    src = np.asarray(src)
    enc_out, enc = transformer_encode(src, src_valid_lens, params, config, rng)  # (B, S, d)
    logits, dec = transformer_decode(np.asarray(tgt_in), enc_out, src_valid_lens, params, config, rng)
    cache = {"enc": enc, "enc_out": enc_out, "dec": dec,
             "enc_weights": [blk["weights"] for blk in enc["blocks"]],
             "dec_self_weights": [blk["self_weights"] for blk in dec["blocks"]],
             "dec_cross_weights": [blk["cross_weights"] for blk in dec["blocks"]]}
    return logits, cache
