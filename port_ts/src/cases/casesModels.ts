// Forward cases of the models: encoder and decoder blocks, the encoder-decoder, the ViT
// (twin: cases_models.py). Every builder draws the parameters first, through the model's init
// function (PyTorch's defaults, in the documented parameter order), then the inputs, then whatever
// dropout masks the forward draws (config "dropout" > 0). The inputs hold the data and every
// parameter by name, the outputs the result and the attention weights.

import type { Builder } from "./casesAttention.ts";
import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor } from "../core/ops.ts";
import { type Config, get, intArray, positiveInt } from "../core/caseConfig.ts";
import { decoderBlockForward, initDecoderBlockParams } from "../nn/decoderBlock.ts";
import { encoderBlockForward, initEncoderBlockParams } from "../nn/encoderBlock.ts";
import { patchEmbeddingParams } from "../nn/init.ts";
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

// config: B, T, d, heads, ffn_hidden; valid_lens null | (B,); dropout (default 0)
// draws: initEncoderBlockParams (attn.W_q..W_o, ffn.W1, b1, W2, b2); x ~ N(0, 1) (B, T, d);
//   the forward's dropout masks
function encoderBlockCase(config: Config, rng: Generator) {
  const [B, T, d, heads, F] = ["B", "T", "d", "heads", "ffn_hidden"].map((n) => positiveInt(config, n));
  const params = initEncoderBlockParams(rng, d, F);
  const x = rng.normal([B, T, d]);
  const validLens = lens(config, "valid_lens");
  const { out, cache } = encoderBlockForward(x, validLens, params, heads, get(config, "dropout", 0), rng);
  const inputs = withTensor({ x, ...params }, "valid_lens", validLens);
  return { inputs, outputs: { out, weights: cache.weights } };
}

// config: B, T (target steps), S (source steps), d, heads, ffn_hidden; enc_valid_lens null | (B,);
//   dropout (default 0)
// draws: initDecoderBlockParams (self_attn.*, cross_attn.*, ffn.*); x ~ N(0, 1) (B, T, d);
//   enc_out ~ N(0, 1) (B, S, d); the forward's dropout masks
function decoderBlockCase(config: Config, rng: Generator) {
  const [B, T, S, d, heads, F] = ["B", "T", "S", "d", "heads", "ffn_hidden"].map((n) => positiveInt(config, n));
  const params = initDecoderBlockParams(rng, d, F);
  const x = rng.normal([B, T, d]);
  const encOut = rng.normal([B, S, d]);
  const encLens = lens(config, "enc_valid_lens");
  const { out, cache } = decoderBlockForward(x, encOut, encLens, params, heads, get(config, "dropout", 0), rng);
  const inputs = withTensor({ x, enc_out: encOut, ...params }, "enc_valid_lens", encLens);
  return { inputs, outputs: { out, self_weights: cache.selfWeights, cross_weights: cache.crossWeights } };
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
//   U{0..vocab_tgt-1} (B, T_tgt); the forward's dropout masks
function transformerCase(config: Config, rng: Generator) {
  const model = transformerConfig(config);
  const [B, S, T] = ["B", "T_src", "T_tgt"].map((n) => positiveInt(config, n));
  const params = initTransformerParams(rng, model);
  const src = rng.integers([B, S], 0, model.vocab_src);
  const tgtIn = rng.integers([B, T], 0, model.vocab_tgt);
  const srcLens = lens(config, "src_valid_lens");
  const { out: logits, cache } = transformerForward(src, srcLens, tgtIn, params, model, rng);
  const inputs = withTensor({ src, tgt_in: tgtIn, ...params }, "src_valid_lens", srcLens);
  const outputs: Named = { logits };
  cache.encWeights.forEach((w, i) => { outputs[`enc.blk${i}.weights`] = w; });
  cache.decSelfWeights.forEach((w, j) => {
    outputs[`dec.blk${j}.self_weights`] = w;
    outputs[`dec.blk${j}.cross_weights`] = cache.decCrossWeights[j];
  });
  return { inputs, outputs };
}

// config: B, image (side), channels, patch, d
// draws: patch.W, patch.b (patchEmbeddingParams); images ~ U[0, 1) (B, C, H, H)
function vitPatchEmbeddingCase(config: Config, rng: Generator) {
  const [B, H, C, p, d] = ["B", "image", "channels", "patch", "d"].map((n) => positiveInt(config, n));
  const patch = patchEmbeddingParams(rng, d, C, p);
  const W = { shape: [d, C, p, p], data: patch.W.data };
  const images = rng.uniform([B, C, H, H]);
  const { out } = patchEmbeddingForward(images, W, patch.b);
  return { inputs: { images, "patch.W": W, "patch.b": patch.b }, outputs: { out } };
}

// config: the model's (image, channels, patch, d, heads, mlp_hidden, blocks, classes, dropout
//   default 0) and B
// draws: initVitParams; images ~ U[0, 1) (B, C, H, H); the forward's dropout masks
function vitCase(config: Config, rng: Generator) {
  const [image, channels, patch, d, heads, mlpHidden, blocks, classes] =
    ["image", "channels", "patch", "d", "heads", "mlp_hidden", "blocks", "classes"].map((n) => positiveInt(config, n));
  const model: VitConfig = { image, channels, patch, d, heads, mlp_hidden: mlpHidden, blocks, classes, dropout: get(config, "dropout", 0) };
  const B = positiveInt(config, "B");
  const params = initVitParams(rng, model);
  const images = rng.uniform([B, channels, image, image]);
  const { out: logits, cache } = vitForward(images, params, model, rng);
  const outputs: Named = { logits };
  cache.weights.forEach((w, i) => { outputs[`blk${i}.weights`] = w; });
  return { inputs: { images, ...params }, outputs };
}

export const BUILDERS: Record<string, Builder> = {
  encoder_block: encoderBlockCase,
  decoder_block: decoderBlockCase,
  transformer: transformerCase,
  vit_patch_embedding: vitPatchEmbeddingCase,
  vit: vitCase,
};
