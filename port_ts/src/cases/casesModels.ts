// Forward cases of the models: encoder and decoder blocks, the encoder-decoder, the ViT
// (twin: cases_models.py). Every builder draws the parameters first, through the model's init
// function (PyTorch's defaults, in the documented parameter order), then the inputs, then whatever
// dropout masks the forward draws (config "dropout" > 0). The inputs hold the data and every
// parameter by name, the outputs the result and the attention weights.

import type { Compute, Draw } from "./casesAttention.ts";
import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor } from "../core/ops.ts";
import { type Config, get, intArray, need, optional, positiveInt } from "../core/caseConfig.ts";
import type { Params } from "../core/params.ts";
import { decoderBlockForward, initDecoderBlockParams } from "../nn/decoderBlock.ts";
import { encoderBlockForward, initEncoderBlockParams } from "../nn/encoderBlock.ts";
import { type TransformerConfig, initTransformerParams, transformerForward } from "../models/transformer.ts";
import { type VitConfig, initVitParams, patchEmbeddingForward, vitForward } from "../models/vit.ts";

function lens(config: Config, key: string): IntTensor | null {
  const value = get<unknown>(config, key, null);
  return value === null ? null : intArray(value, key);
}

function withTensor(inputs: Named, name: string, value: IntTensor | null): Named {
  if (value !== null) inputs[name] = value;
  return inputs;
}

/** The handed inputs but the data: the parameters, by name. */
function paramsOf(inputs: Named, ...data: string[]): Params {
  return Object.fromEntries(Object.entries(inputs).filter(([name]) => !data.includes(name))) as Params;
}

// config: B, T, d, heads, ffn_hidden; valid_lens null | (B,); dropout (default 0)
// draws: initEncoderBlockParams (attn.W_q..W_o, ffn.W1, b1, W2, b2); x ~ N(0, 1) (B, T, d);
//   then, in the forward, its dropout masks
function encoderBlockInputs(config: Config, rng: Generator): Named {
  const [B, T, d, F] = ["B", "T", "d", "ffn_hidden"].map((n) => positiveInt(config, n));
  const params = initEncoderBlockParams(rng, d, F);
  return withTensor({ x: rng.normal([B, T, d]), ...params }, "valid_lens", lens(config, "valid_lens"));
}

function encoderBlock(inputs: Named, config: Config, rng: Generator | null = null): Named {
  const { x } = need(inputs, "x");
  const { out, cache } = encoderBlockForward(x, optional(inputs, "valid_lens"), paramsOf(inputs, "x", "valid_lens"),
    positiveInt(config, "heads"), get(config, "dropout", 0), rng);
  return { out, weights: cache.weights };
}

// config: B, T (target steps), S (source steps), d, heads, ffn_hidden; enc_valid_lens null | (B,);
//   dropout (default 0)
// draws: initDecoderBlockParams (self_attn.*, cross_attn.*, ffn.*); x ~ N(0, 1) (B, T, d);
//   enc_out ~ N(0, 1) (B, S, d); then, in the forward, its dropout masks
function decoderBlockInputs(config: Config, rng: Generator): Named {
  const [B, T, S, d, F] = ["B", "T", "S", "d", "ffn_hidden"].map((n) => positiveInt(config, n));
  const params = initDecoderBlockParams(rng, d, F);
  const x = rng.normal([B, T, d]);
  return withTensor({ x, enc_out: rng.normal([B, S, d]), ...params }, "enc_valid_lens", lens(config, "enc_valid_lens"));
}

function decoderBlock(inputs: Named, config: Config, rng: Generator | null = null): Named {
  const { x, enc_out: encOut } = need(inputs, "x", "enc_out");
  const { out, cache } = decoderBlockForward(x, encOut, optional(inputs, "enc_valid_lens"), paramsOf(inputs, "x", "enc_out", "enc_valid_lens"),
    positiveInt(config, "heads"), get(config, "dropout", 0), rng);
  return { out, self_weights: cache.selfWeights, cross_weights: cache.crossWeights };
}

function transformerConfig(config: Config): TransformerConfig {
  const [vocabSrc, vocabTgt, d, F, heads, encBlocks, decBlocks] =
    ["vocab_src", "vocab_tgt", "d", "ffn_hidden", "heads", "enc_blocks", "dec_blocks"].map((n) => positiveInt(config, n));
  return {
    vocab_src: vocabSrc, vocab_tgt: vocabTgt, d, ffn_hidden: F, heads,
    enc_blocks: encBlocks, dec_blocks: decBlocks, dropout: get(config, "dropout", 0),
  };
}

// config: the model's (vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks, dec_blocks,
//   dropout default 0), B, T_src, T_tgt, src_valid_lens null | (B,)
// draws: initTransformerParams; src ids U{0..vocab_src-1} (B, T_src); tgt_in ids
//   U{0..vocab_tgt-1} (B, T_tgt); then, in the forward, its dropout masks
function transformerInputs(config: Config, rng: Generator): Named {
  const model = transformerConfig(config);
  const [B, S, T] = ["B", "T_src", "T_tgt"].map((n) => positiveInt(config, n));
  const params = initTransformerParams(rng, model);
  const src = rng.integers([B, S], 0, model.vocab_src);
  return withTensor({ src, tgt_in: rng.integers([B, T], 0, model.vocab_tgt), ...params }, "src_valid_lens", lens(config, "src_valid_lens"));
}

function transformer(inputs: Named, config: Config, rng: Generator | null = null): Named {
  const { src, tgt_in: tgtIn } = need(inputs, "src", "tgt_in");
  const { out: logits, cache } = transformerForward(src as unknown as IntTensor, optional(inputs, "src_valid_lens"), tgtIn as unknown as IntTensor,
    paramsOf(inputs, "src", "tgt_in", "src_valid_lens"), transformerConfig(config), rng);
  const outputs: Named = { logits };
  cache.encWeights.forEach((w, i) => { outputs[`enc.blk${i}.weights`] = w; });
  cache.decSelfWeights.forEach((w, j) => {
    outputs[`dec.blk${j}.self_weights`] = w;
    outputs[`dec.blk${j}.cross_weights`] = cache.decCrossWeights[j];
  });
  return outputs;
}

// inputs: images (B, C, H, H), patch.W (d, C, p, p), patch.b (d,)
function vitPatchEmbedding(inputs: Named): Named {
  const { images, "patch.W": W, "patch.b": b } = need(inputs, "images", "patch.W", "patch.b");
  return { out: patchEmbeddingForward(images, W, b).out };
}

function vitConfig(config: Config): VitConfig {
  const [image, channels, patch, d, heads, mlpHidden, blocks, classes] =
    ["image", "channels", "patch", "d", "heads", "mlp_hidden", "blocks", "classes"].map((n) => positiveInt(config, n));
  return { image, channels, patch, d, heads, mlp_hidden: mlpHidden, blocks, classes, dropout: get(config, "dropout", 0) };
}

// config: the model's (image, channels, patch, d, heads, mlp_hidden, blocks, classes, dropout
//   default 0) and B
// draws: initVitParams; images ~ U[0, 1) (B, C, H, H); then, in the forward, its dropout masks
function vitInputs(config: Config, rng: Generator): Named {
  const model = vitConfig(config);
  const B = positiveInt(config, "B");
  const params = initVitParams(rng, model);
  return { images: rng.uniform([B, model.channels, model.image, model.image]), ...params };
}

function vit(inputs: Named, config: Config, rng: Generator | null = null): Named {
  const { images } = need(inputs, "images");
  const { out: logits, cache } = vitForward(images, paramsOf(inputs, "images"), vitConfig(config), rng);
  const outputs: Named = { logits };
  cache.weights.forEach((w, i) => { outputs[`blk${i}.weights`] = w; });
  return outputs;
}

export const COMPUTE: Record<string, Compute> = {
  encoder_block: encoderBlock, decoder_block: decoderBlock, transformer, vit_patch_embedding: vitPatchEmbedding, vit,
};

export const DRAWS: Record<string, Draw> = {
  encoder_block: encoderBlockInputs, decoder_block: decoderBlockInputs, transformer: transformerInputs, vit: vitInputs,
};
