// Forward cases of the models: encoder and decoder blocks, the encoder-decoder, the ViT
// (twin: cases_models.py). The inputs the request hands hold the data and every parameter by name
// (the reference draws them); the forward draws its dropout masks (config "dropout" > 0) from the
// position they were handed with. The outputs hold the result and the attention weights.

import type { Compute } from "../core/caseConfig.ts";
import type { Generator } from "../core/rng.ts";
import type { Named } from "../core/golden.ts";
import type { IntTensor } from "../core/ops.ts";
import { type Config, get, need, optional, positiveInt } from "../core/caseConfig.ts";
import type { Params } from "../core/params.ts";
import { decoderBlockForward } from "../nn/decoderBlock.ts";
import { encoderBlockForward } from "../nn/encoderBlock.ts";
import { type TransformerConfig, transformerForward } from "../models/transformer.ts";
import { type VitConfig, patchEmbeddingForward, vitForward } from "../models/vit.ts";

/** The handed inputs but the data: the parameters, by name. */
function paramsOf(inputs: Named, ...data: string[]): Params {
  return Object.fromEntries(Object.entries(inputs).filter(([name]) => !data.includes(name))) as Params;
}

function encoderBlock(inputs: Named, config: Config, rng: Generator): Named {
  const { x } = need(inputs, "x");
  const { out, cache } = encoderBlockForward(x, optional(inputs, "valid_lens"), paramsOf(inputs, "x", "valid_lens"),
    positiveInt(config, "heads"), get(config, "dropout", 0), rng);
  return { out, weights: cache.weights };
}

function decoderBlock(inputs: Named, config: Config, rng: Generator): Named {
  const { x, enc_out: encOut } = need(inputs, "x", "enc_out");
  const { out, cache } = decoderBlockForward(x, encOut, optional(inputs, "enc_valid_lens"), paramsOf(inputs, "x", "enc_out", "enc_valid_lens"),
    positiveInt(config, "heads"), get(config, "dropout", 0), rng);
  return { out, self_weights: cache.selfWeights, cross_weights: cache.crossWeights };
}

export function transformerConfig(config: Config): TransformerConfig {
  const [vocabSrc, vocabTgt, d, F, heads, encBlocks, decBlocks] =
    ["vocab_src", "vocab_tgt", "d", "ffn_hidden", "heads", "enc_blocks", "dec_blocks"].map((n) => positiveInt(config, n));
  return {
    vocab_src: vocabSrc, vocab_tgt: vocabTgt, d, ffn_hidden: F, heads,
    enc_blocks: encBlocks, dec_blocks: decBlocks, dropout: get(config, "dropout", 0),
  };
}

function transformer(inputs: Named, config: Config, rng: Generator): Named {
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

export function vitConfig(config: Config): VitConfig {
  const [image, channels, patch, d, heads, mlpHidden, blocks, classes] =
    ["image", "channels", "patch", "d", "heads", "mlp_hidden", "blocks", "classes"].map((n) => positiveInt(config, n));
  return { image, channels, patch, d, heads, mlp_hidden: mlpHidden, blocks, classes, dropout: get(config, "dropout", 0) };
}

function vit(inputs: Named, config: Config, rng: Generator): Named {
  const { images } = need(inputs, "images");
  const { out: logits, cache } = vitForward(images, paramsOf(inputs, "images"), vitConfig(config), rng);
  const outputs: Named = { logits };
  cache.weights.forEach((w, i) => { outputs[`blk${i}.weights`] = w; });
  return outputs;
}

export const COMPUTE: Record<string, Compute> = {
  encoder_block: encoderBlock, decoder_block: decoderBlock, transformer, vit_patch_embedding: vitPatchEmbedding, vit,
};
