"""Forward cases of the models: encoder and decoder blocks, the encoder-decoder, the ViT
(twin: casesModels.ts). Each op has a draw function (DRAWS) and a compute function (COMPUTE)
(cases.py). A draw function draws the parameters first, through the model's init function
(PyTorch's defaults, in the documented parameter order), then the data; the forward then draws
whatever dropout masks it needs (config "dropout" > 0), so such a case draws in every engine. The
inputs hold the data and every parameter by name, the outputs the result and the attention weights."""

from ..core import case_config as cc
from ..nn.decoder_block import decoder_block_forward, init_decoder_block_params
from ..nn.encoder_block import encoder_block_forward, init_encoder_block_params
from ..nn.init import patch_embedding_params
from ..models.transformer import init_transformer_params, transformer_forward
from ..models.vit import init_vit_params, patch_embedding_forward, vit_forward


def _lens(config, key):
    value = cc.get(config, key, None)
    return None if value is None else cc.int_array(value, key)


def _with(inputs, name, value):
    if value is not None:
        inputs[name] = value
    return inputs


def _params(inputs, *data):
    """The handed inputs but the data: the parameters, by name."""
    return {name: t for name, t in inputs.items() if name not in data}


def encoder_block_inputs(config, rng):
    # config: B, T, d, heads, ffn_hidden; valid_lens null | (B,); dropout (default 0)
    # draws: init_encoder_block_params (attn.W_q..W_o, ffn.W1, b1, W2, b2); x ~ N(0, 1) (B, T, d);
    #   then, in the forward, its dropout masks
    B, T, d, F = (cc.positive_int(config, n) for n in ("B", "T", "d", "ffn_hidden"))
    params = init_encoder_block_params(rng, d, F)
    return _with({"x": rng.normal((B, T, d)), **params}, "valid_lens", _lens(config, "valid_lens"))


def encoder_block(inputs, config, rng=None):
    (x,) = cc.need(inputs, "x")
    out, cache = encoder_block_forward(x, inputs.get("valid_lens"), _params(inputs, "x", "valid_lens"),
                                       cc.positive_int(config, "heads"), cc.get(config, "dropout", 0.0), rng)
    return {"out": out, "weights": cache["weights"]}


def decoder_block_inputs(config, rng):
    # config: B, T (target steps), S (source steps), d, heads, ffn_hidden; enc_valid_lens null | (B,);
    #   dropout (default 0)
    # draws: init_decoder_block_params (self_attn.*, cross_attn.*, ffn.*); x ~ N(0, 1) (B, T, d);
    #   enc_out ~ N(0, 1) (B, S, d); then, in the forward, its dropout masks
    B, T, S, d, F = (cc.positive_int(config, n) for n in ("B", "T", "S", "d", "ffn_hidden"))
    params = init_decoder_block_params(rng, d, F)
    x = rng.normal((B, T, d))
    inputs = {"x": x, "enc_out": rng.normal((B, S, d)), **params}
    return _with(inputs, "enc_valid_lens", _lens(config, "enc_valid_lens"))


def decoder_block(inputs, config, rng=None):
    x, enc_out = cc.need(inputs, "x", "enc_out")
    params = _params(inputs, "x", "enc_out", "enc_valid_lens")
    out, cache = decoder_block_forward(x, enc_out, inputs.get("enc_valid_lens"), params, cc.positive_int(config, "heads"),
                                       cc.get(config, "dropout", 0.0), rng)
    return {"out": out, "self_weights": cache["self_weights"], "cross_weights": cache["cross_weights"]}


def _transformer_config(config):
    model = {n: cc.positive_int(config, n) for n in ("vocab_src", "vocab_tgt", "d", "ffn_hidden", "heads",
                                           "enc_blocks", "dec_blocks")}
    model["dropout"] = cc.get(config, "dropout", 0.0)
    return model


def transformer_inputs(config, rng):
    # config: the model's (vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks, dec_blocks,
    #   dropout default 0), B, T_src, T_tgt, src_valid_lens null | (B,)
    # draws: init_transformer_params; src ids U{0..vocab_src-1} (B, T_src); tgt_in ids
    #   U{0..vocab_tgt-1} (B, T_tgt); then, in the forward, its dropout masks
    model = _transformer_config(config)
    B, S, T = (cc.positive_int(config, n) for n in ("B", "T_src", "T_tgt"))
    params = init_transformer_params(rng, model)
    src = rng.integers((B, S), 0, model["vocab_src"])
    inputs = {"src": src, "tgt_in": rng.integers((B, T), 0, model["vocab_tgt"]), **params}
    return _with(inputs, "src_valid_lens", _lens(config, "src_valid_lens"))


def transformer(inputs, config, rng=None):
    src, tgt_in = cc.need(inputs, "src", "tgt_in")
    params = _params(inputs, "src", "tgt_in", "src_valid_lens")
    logits, cache = transformer_forward(src, inputs.get("src_valid_lens"), tgt_in, params, _transformer_config(config), rng)
    outputs = {"logits": logits}
    for i, w in enumerate(cache["enc_weights"]):
        outputs[f"enc.blk{i}.weights"] = w
    for j, (ws, wc) in enumerate(zip(cache["dec_self_weights"], cache["dec_cross_weights"])):
        outputs[f"dec.blk{j}.self_weights"] = ws
        outputs[f"dec.blk{j}.cross_weights"] = wc
    return outputs


def vit_patch_embedding_inputs(config, rng):
    # config: B, image (side), channels, patch, d
    # draws: patch.W, patch.b (patch_embedding_params); images ~ U[0, 1) (B, C, H, H)
    B, H, C, p, d = (cc.positive_int(config, n) for n in ("B", "image", "channels", "patch", "d"))
    W, b = patch_embedding_params(rng, d, C, p)
    return {"images": rng.uniform((B, C, H, H)), "patch.W": W.reshape(d, C, p, p), "patch.b": b}


def vit_patch_embedding(inputs, config, rng=None):
    images, W, b = cc.need(inputs, "images", "patch.W", "patch.b")
    return {"out": patch_embedding_forward(images, W, b)[0]}


def _vit_config(config):
    model = {n: cc.positive_int(config, n) for n in ("image", "channels", "patch", "d", "heads", "mlp_hidden",
                                           "blocks", "classes")}
    model["dropout"] = cc.get(config, "dropout", 0.0)
    return model


def vit_inputs(config, rng):
    # config: the model's (image, channels, patch, d, heads, mlp_hidden, blocks, classes, dropout
    #   default 0) and B
    # draws: init_vit_params; images ~ U[0, 1) (B, C, H, H); then, in the forward, its dropout masks
    model = _vit_config(config)
    B = cc.positive_int(config, "B")
    params = init_vit_params(rng, model)
    return {"images": rng.uniform((B, model["channels"], model["image"], model["image"])), **params}


def vit(inputs, config, rng=None):
    (images,) = cc.need(inputs, "images")
    logits, cache = vit_forward(images, _params(inputs, "images"), _vit_config(config), rng)
    outputs = {"logits": logits}
    for i, w in enumerate(cache["weights"]):
        outputs[f"blk{i}.weights"] = w
    return outputs


DRAWS = {"encoder_block": encoder_block_inputs, "decoder_block": decoder_block_inputs, "transformer": transformer_inputs,
         "vit_patch_embedding": vit_patch_embedding_inputs, "vit": vit_inputs}
COMPUTE = {"encoder_block": encoder_block, "decoder_block": decoder_block, "transformer": transformer,
           "vit_patch_embedding": vit_patch_embedding, "vit": vit}
