"""The Transformer encoder-decoder, forward to logits (twin: port_ts/src/models/transformer.ts).

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

Backward (transformer_backward(dlogits, cache) -> grads keyed by the parameter names, in draw
order) walks the model in reverse: the output linear, the decoder blocks from last to first, the
decoder embedding (through the positional dropout and the sqrt(d) scale), then the encoder blocks
from last to first and the encoder embedding. The encoder output feeds every decoder block's
cross-attention; its gradient is the sum of those contributions in block order j = 0, 1, ...
from +0 (an explicit loop, the same in both engines), taken once all decoder blocks are done.
transformer_loss / transformer_loss_backward wrap the forward and the backward with the
padding-masked cross-entropy, for the gradient checks and the training runs.
"""

import math

import numpy as np

from ..nn.decoder_block import decoder_block_backward, decoder_block_forward, init_decoder_block_params
from ..nn.embedding import embedding_backward, embedding_forward
from ..core.params import add_grads, param, sub_params
from ..core.trace import backward, scope, sublayer
from ..nn.encoder_block import encoder_block_backward, encoder_block_forward, init_encoder_block_params
from ..nn.init import embedding_params, linear_params
from ..nn.linear import linear_backward, linear_forward
from ..nn.loss import cross_entropy_backward, cross_entropy_forward, sequence_weights
from ..nn.positional_encoding import positional_encoding_backward, positional_encoding_forward


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


def embed_positions_backward(dout, cache):
    """dout (B, T, d) -> dE (V, d)."""
    dscaled = positional_encoding_backward(dout, cache["pe"])  # inverts: x = PE(scaled)
    de = dscaled * math.sqrt(dout.shape[-1])  # inverts: scaled = e * sqrt(d)
    return embedding_backward(de, cache["embed"])  # inverts: e = E[tokens]


def transformer_encode(src, src_valid_lens, params, config, rng=None):
    """src int (B, S), src_valid_lens None | (B,) -> (enc_out (B, S, d), cache)."""
    p = config["dropout"]
    x, emb = sublayer("enc.embedding", embed_positions, src, param(params, "enc.embed"), p, rng)  # (B, S, d)
    blocks = []
    for i in range(config["enc_blocks"]):
        scope(f"enc.blk{i}.")  # names the block's traced sub-layers
        x, blk = encoder_block_forward(x, src_valid_lens, sub_params(params, f"enc.blk{i}."),
                                       config["heads"], p, rng)  # (B, S, d)
        blocks.append(blk)
    scope("")
    return x, {"embed": emb, "blocks": blocks}


def transformer_encode_backward(denc_out, cache):
    """denc_out (B, S, d) -> grads of enc.* under their full names, in draw order."""
    dx = denc_out  # (B, S, d)
    block_grads = [None] * len(cache["blocks"])
    for i in reversed(range(len(cache["blocks"]))):
        scope(f"enc.blk{i}.")  # names the block's traced backwards
        dx, block_grads[i] = encoder_block_backward(dx, cache["blocks"][i])  # inverts: X = enc_block_i(X)
    scope("")
    # inverts: X = PE(embed * sqrt(d))
    grads = {"enc.embed": backward("enc.embedding", ("dE",), embed_positions_backward, dx, cache["embed"])}
    for i, bg in enumerate(block_grads):
        grads.update({f"enc.blk{i}.{name}": g for name, g in bg.items()})
    return grads


def transformer_decode(tgt_in, enc_out, src_valid_lens, params, config, rng=None):
    """tgt_in int (B, T), enc_out (B, S, d) -> (logits (B, T, V_tgt), cache)."""
    p = config["dropout"]
    y, emb = sublayer("dec.embedding", embed_positions, tgt_in, param(params, "dec.embed"), p, rng)  # (B, T, d)
    blocks = []
    for j in range(config["dec_blocks"]):
        scope(f"dec.blk{j}.")  # names the block's traced sub-layers
        y, blk = decoder_block_forward(y, enc_out, src_valid_lens, sub_params(params, f"dec.blk{j}."),
                                       config["heads"], p, rng)  # (B, T, d)
        blocks.append(blk)
    scope("")
    logits, out = sublayer("dec.head", linear_forward, y, param(params, "dec.out.W"), param(params, "dec.out.b"))  # (B, T, V_tgt)
    return logits, {"embed": emb, "blocks": blocks, "out": out}


def transformer_decode_backward(dlogits, cache):
    """dlogits (B, T, V_tgt) -> (denc_out (B, S, d), grads of dec.* under their full names, in
    draw order). denc_out sums the blocks' cross-attention contributions in block order from +0."""
    # inverts: logits = Y W_out^T + b_out
    dy, dW_out, db_out = backward("dec.head", ("dx", "dW", "db"), linear_backward, dlogits, cache["out"])
    n = len(cache["blocks"])
    block_grads, dencs = [None] * n, [None] * n
    for j in reversed(range(n)):
        scope(f"dec.blk{j}.")  # names the block's traced backwards
        dy, dencs[j], block_grads[j] = decoder_block_backward(dy, cache["blocks"][j])  # inverts: Y = dec_block_j(Y, X)
    scope("")
    denc_out = np.zeros(dencs[0].shape) if n else None  # (B, S, d)
    for j in range(n):
        denc_out = add_grads(denc_out, dencs[j])  # in block order, from +0
    # inverts: Y = PE(embed * sqrt(d))
    grads = {"dec.embed": backward("dec.embedding", ("dE",), embed_positions_backward, dy, cache["embed"])}
    for j, bg in enumerate(block_grads):
        grads.update({f"dec.blk{j}.{name}": g for name, g in bg.items()})
    grads["dec.out.W"], grads["dec.out.b"] = dW_out, db_out
    return denc_out, grads


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


def transformer_backward(dlogits, cache):
    """dlogits (B, T, V_tgt) -> grads keyed by the full parameter names, in draw order."""
    dlogits = np.asarray(dlogits, dtype=np.float64)
    denc_out, dec_grads = transformer_decode_backward(dlogits, cache["dec"])  # (B, S, d)
    if denc_out is None:  # no decoder block reads the encoder: its gradients are zero
        denc_out = np.zeros(cache["enc_out"].shape)
    enc_grads = transformer_encode_backward(denc_out, cache["enc"])
    return {**enc_grads, **dec_grads}


def transformer_loss(params, config, src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens, rng=None):
    """The mean cross-entropy of the next-token logits over the counted target positions.

    params, config: as transformer_forward (config's dropout p > 0 needs rng, which draws the
    masks in forward order). src int (B, S), src_valid_lens None | int (B,): source tokens and
    how many of each row are real (padded keys are masked). tgt_in int (B, T): the decoder input
    (<bos> then the target shifted right); tgt_out int (B, T): the token expected at each step.
    tgt_valid_lens None | int (B,): positions t < tgt_valid_lens[b] count (<eos> included),
    later ones are padding and get weight 0; None counts every position.
    Returns (loss, cache): loss a float; cache["logits"] (B, T, V_tgt), cache["model"] the
    forward's cache (attention weights included), cache["ce"] the loss's cache.
    """
    logits, model = transformer_forward(src, src_valid_lens, tgt_in, params, config, rng)  # (B, T, V_tgt)
    tgt_out = np.asarray(tgt_out)
    weights = None if tgt_valid_lens is None else sequence_weights(tgt_valid_lens, tgt_out.shape[1])  # (B, T)
    loss, ce = cross_entropy_forward(logits, tgt_out, weights)
    return loss, {"logits": logits, "model": model, "ce": ce}


def transformer_loss_backward(cache):
    """The gradient of transformer_loss's loss (dloss = 1) -> grads keyed by the parameter names."""
    dlogits = cross_entropy_backward(cache["ce"])  # (B, T, V_tgt)  inverts: loss = CE(logits, tgt_out, w)
    return transformer_backward(dlogits, cache["model"])
