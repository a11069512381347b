"""Forward cases of the models: encoder and decoder blocks, the encoder-decoder, the ViT
(twin: casesModels.ts). Every builder draws the parameters first, through the model's init
function (PyTorch's defaults, in the documented parameter order), then the inputs, then whatever
dropout masks the forward draws (config "dropout" > 0). It returns (inputs, outputs): the inputs
hold the data and every parameter by name, the outputs the result and the attention weights."""

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


def encoder_block_case(config, rng):
    # config: B, T, d, heads, ffn_hidden; valid_lens null | (B,); dropout (default 0)
    # draws: init_encoder_block_params (attn.W_q..W_o, ffn.W1, b1, W2, b2); x ~ N(0, 1) (B, T, d);
    #   the forward's dropout masks
    B, T, d, heads, F = (cc.positive_int(config, n) for n in ("B", "T", "d", "heads", "ffn_hidden"))
    params = init_encoder_block_params(rng, d, F)
    x = rng.normal((B, T, d))
    lens = _lens(config, "valid_lens")
    out, cache = encoder_block_forward(x, lens, params, heads, cc.get(config, "dropout", 0.0), rng)
    inputs = _with({"x": x, **params}, "valid_lens", lens)
    return inputs, {"out": out, "weights": cache["weights"]}


def decoder_block_case(config, rng):
    # config: B, T (target steps), S (source steps), d, heads, ffn_hidden; enc_valid_lens null | (B,);
    #   dropout (default 0)
    # draws: init_decoder_block_params (self_attn.*, cross_attn.*, ffn.*); x ~ N(0, 1) (B, T, d);
    #   enc_out ~ N(0, 1) (B, S, d); the forward's dropout masks
    B, T, S, d, heads, F = (cc.positive_int(config, n) for n in ("B", "T", "S", "d", "heads", "ffn_hidden"))
    params = init_decoder_block_params(rng, d, F)
    x = rng.normal((B, T, d))
    enc_out = rng.normal((B, S, d))
    lens = _lens(config, "enc_valid_lens")
    out, cache = decoder_block_forward(x, enc_out, lens, params, heads, cc.get(config, "dropout", 0.0), rng)
    inputs = _with({"x": x, "enc_out": enc_out, **params}, "enc_valid_lens", lens)
    return inputs, {"out": out, "self_weights": cache["self_weights"], "cross_weights": cache["cross_weights"]}


def _transformer_config(config):
    model = {n: cc.positive_int(config, n) for n in ("vocab_src", "vocab_tgt", "d", "ffn_hidden", "heads",
                                           "enc_blocks", "dec_blocks")}
    model["dropout"] = cc.get(config, "dropout", 0.0)
    return model


def transformer_case(config, rng):
    # config: the model's (vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks, dec_blocks,
    #   dropout default 0), B, T_src, T_tgt, src_valid_lens null | (B,)
    # draws: init_transformer_params; src ids U{0..vocab_src-1} (B, T_src); tgt_in ids
    #   U{0..vocab_tgt-1} (B, T_tgt); the forward's dropout masks
    model = _transformer_config(config)
    B, S, T = (cc.positive_int(config, n) for n in ("B", "T_src", "T_tgt"))
    params = init_transformer_params(rng, model)
    src = rng.integers((B, S), 0, model["vocab_src"])
    tgt_in = rng.integers((B, T), 0, model["vocab_tgt"])
    lens = _lens(config, "src_valid_lens")
    logits, cache = transformer_forward(src, lens, tgt_in, params, model, rng)
    inputs = _with({"src": src, "tgt_in": tgt_in, **params}, "src_valid_lens", lens)
    outputs = {"logits": logits}
    for i, w in enumerate(cache["enc_weights"]):
        outputs[f"enc.blk{i}.weights"] = w
    for j, (ws, wc) in enumerate(zip(cache["dec_self_weights"], cache["dec_cross_weights"])):
        outputs[f"dec.blk{j}.self_weights"] = ws
        outputs[f"dec.blk{j}.cross_weights"] = wc
    return inputs, outputs


def vit_patch_embedding_case(config, rng):
    # config: B, image (side), channels, patch, d
    # draws: patch.W, patch.b (patch_embedding_params); images ~ U[0, 1) (B, C, H, H)
    B, H, C, p, d = (cc.positive_int(config, n) for n in ("B", "image", "channels", "patch", "d"))
    W, b = patch_embedding_params(rng, d, C, p)
    W = W.reshape(d, C, p, p)
    images = rng.uniform((B, C, H, H))
    out, _ = patch_embedding_forward(images, W, b)
    return {"images": images, "patch.W": W, "patch.b": b}, {"out": out}


def vit_case(config, rng):
    # config: the model's (image, channels, patch, d, heads, mlp_hidden, blocks, classes, dropout
    #   default 0) and B
    # draws: init_vit_params; images ~ U[0, 1) (B, C, H, H); the forward's dropout masks
    model = {n: cc.positive_int(config, n) for n in ("image", "channels", "patch", "d", "heads", "mlp_hidden",
                                           "blocks", "classes")}
    model["dropout"] = cc.get(config, "dropout", 0.0)
    B = cc.positive_int(config, "B")
    params = init_vit_params(rng, model)
    images = rng.uniform((B, model["channels"], model["image"], model["image"]))
    logits, cache = vit_forward(images, params, model, rng)
    outputs = {"logits": logits}
    for i, w in enumerate(cache["weights"]):
        outputs[f"blk{i}.weights"] = w
    return {"images": images, **params}, outputs


BUILDERS = {
    "encoder_block": encoder_block_case,
    "decoder_block": decoder_block_case,
    "transformer": transformer_case,
    "vit_patch_embedding": vit_patch_embedding_case,
    "vit": vit_case,
}
