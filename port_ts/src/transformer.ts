// The Transformer encoder-decoder, forward to logits (twin: reference/transformer.py).
//
//   X = PE(embed_src(src) * sqrt(d))          (B, S, d)     scaled BEFORE the positions are added
//   X = enc_block_i(X, srcLens)               (B, S, d)     i = 0 .. encBlocks-1, post-norm
//   Y = PE(embed_tgt(tgtIn) * sqrt(d))        (B, T, d)
//   Y = dec_block_j(Y, X, srcLens)            (B, T, d)     causal self, cross, FFN
//   logits = Y W_out^T + b_out                (B, T, V_tgt)
//
// Shape legend: B batch, S source steps, T target steps, d model dim, H heads, F FFN hidden,
// V_src / V_tgt vocabularies. Config: vocab_src, vocab_tgt, d, ffn_hidden, heads, enc_blocks,
// dec_blocks, dropout (one p for the positional encoding, attention weights and every AddNorm).
//
// Parameters, in the order initTransformerParams draws them (PyTorch's defaults):
//   enc.embed (V_src, d) N(0, 1)
//   enc.blk{i}.*  for each encoder block: attn.W_q..W_o, ln1, ffn.W1/b1/W2/b2, ln2
//   dec.embed (V_tgt, d) N(0, 1)
//   dec.blk{j}.*  for each decoder block: self_attn.*, ln1, cross_attn.*, ln2, ffn.*, ln3
//   dec.out.W (V_tgt, d), dec.out.b (V_tgt,)  U(+-1/sqrt(d))
// Dropout masks (p > 0) are drawn in forward order: the encoder's, then the decoder's.

import type { Generator } from "./rng.ts";
import { type Tensor, type IntTensor, zeros } from "./ops.ts";
import { type EmbeddingCache, embeddingForward } from "./embedding.ts";
import { type PositionalEncodingCache, positionalEncodingForward } from "./positionalEncoding.ts";
import { type LinearCache, linearForward } from "./linear.ts";
import { embeddingParams, linearParams } from "./init.ts";
import { type EncoderBlockCache, type Params, encoderBlockForward, initEncoderBlockParams, param, subParams } from "./encoderBlock.ts";
import { type DecoderBlockCache, decoderBlockForward, initDecoderBlockParams } from "./decoderBlock.ts";

export interface TransformerConfig {
  vocab_src: number; vocab_tgt: number; d: number; ffn_hidden: number; heads: number;
  enc_blocks: number; dec_blocks: number; dropout: number;
}

/** The flat parameter record, keyed by dotted names, drawn in the order of the module doc. */
export function initTransformerParams(rng: Generator, config: TransformerConfig): Params {
  const { d, ffn_hidden: F } = config;
  const params: Params = { "enc.embed": embeddingParams(rng, config.vocab_src, d) };
  for (let i = 0; i < config.enc_blocks; i++) {
    for (const [name, value] of Object.entries(initEncoderBlockParams(rng, d, F))) params[`enc.blk${i}.${name}`] = value;
  }
  params["dec.embed"] = embeddingParams(rng, config.vocab_tgt, d);
  for (let j = 0; j < config.dec_blocks; j++) {
    for (const [name, value] of Object.entries(initDecoderBlockParams(rng, d, F))) params[`dec.blk${j}.${name}`] = value;
  }
  const out = linearParams(rng, config.vocab_tgt, d);
  params["dec.out.W"] = out.W;
  params["dec.out.b"] = out.b as Tensor;
  return params;
}

export interface EmbedCache {
  embed: EmbeddingCache;
  pe: PositionalEncodingCache;
}

/** PE(E[tokens] * sqrt(d)): tokens (B, T), E (V, d) -> (B, T, d). */
export function embedPositions(
  tokens: IntTensor, E: Tensor, dropoutP: number, rng: Generator | null,
): { out: Tensor; cache: EmbedCache } {
  const { out: e, cache: embed } = embeddingForward(tokens, E); // (B, T, d)
  const scale = Math.sqrt(E.shape[1]);
  const scaled = zeros(e.shape); // (B, T, d)
  for (let i = 0; i < scaled.data.length; i++) scaled.data[i] = e.data[i] * scale;
  const { out, cache: pe } = positionalEncodingForward(scaled, dropoutP, rng); // (B, T, d)
  return { out, cache: { embed, pe } };
}

/** src (B, S), srcValidLens null | (B,) -> encOut (B, S, d). */
export function transformerEncode(
  src: IntTensor, srcValidLens: IntTensor | null, params: Params, config: TransformerConfig, rng: Generator | null = null,
): { out: Tensor; cache: { embed: EmbedCache; blocks: EncoderBlockCache[] } } {
  const p = config.dropout;
  const { out: x0, cache: embed } = embedPositions(src, param(params, "enc.embed"), p, rng); // (B, S, d)
  let x = x0;
  const blocks: EncoderBlockCache[] = [];
  for (let i = 0; i < config.enc_blocks; i++) {
    const blk = encoderBlockForward(x, srcValidLens, subParams(params, `enc.blk${i}.`), config.heads, p, rng); // (B, S, d)
    x = blk.out;
    blocks.push(blk.cache);
  }
  return { out: x, cache: { embed, blocks } };
}

/** tgtIn (B, T), encOut (B, S, d) -> logits (B, T, V_tgt). */
export function transformerDecode(
  tgtIn: IntTensor, encOut: Tensor, srcValidLens: IntTensor | null, params: Params, config: TransformerConfig,
  rng: Generator | null = null,
): { out: Tensor; cache: { embed: EmbedCache; blocks: DecoderBlockCache[]; out: LinearCache } } {
  const p = config.dropout;
  const { out: y0, cache: embed } = embedPositions(tgtIn, param(params, "dec.embed"), p, rng); // (B, T, d)
  let y = y0;
  const blocks: DecoderBlockCache[] = [];
  for (let j = 0; j < config.dec_blocks; j++) {
    const blk = decoderBlockForward(y, encOut, srcValidLens, subParams(params, `dec.blk${j}.`), config.heads, p, rng); // (B, T, d)
    y = blk.out;
    blocks.push(blk.cache);
  }
  const { out: logits, cache: out } = linearForward(y, param(params, "dec.out.W"), param(params, "dec.out.b")); // (B, T, V_tgt)
  return { out: logits, cache: { embed, blocks, out } };
}

export interface TransformerCache {
  enc: { embed: EmbedCache; blocks: EncoderBlockCache[] };
  encOut: Tensor; // (B, S, d)
  dec: { embed: EmbedCache; blocks: DecoderBlockCache[]; out: LinearCache };
  encWeights: Tensor[]; // per encoder block (B, H, S, S)
  decSelfWeights: Tensor[]; // per decoder block (B, H, T, T)
  decCrossWeights: Tensor[]; // per decoder block (B, H, T, S)
}

/** src (B, S), srcValidLens null | (B,), tgtIn (B, T) -> logits (B, T, V_tgt); the cache keeps
 *  every block's attention weights, for the heatmaps. */
export function transformerForward(
  src: IntTensor, srcValidLens: IntTensor | null, tgtIn: IntTensor, params: Params, config: TransformerConfig,
  rng: Generator | null = null,
): { out: Tensor; cache: TransformerCache } {
  const { out: encOut, cache: enc } = transformerEncode(src, srcValidLens, params, config, rng); // (B, S, d)
  const { out: logits, cache: dec } = transformerDecode(tgtIn, encOut, srcValidLens, params, config, rng); // (B, T, V_tgt)
  const cache = {
    enc, encOut, dec,
    encWeights: enc.blocks.map((b) => b.weights),
    decSelfWeights: dec.blocks.map((b) => b.selfWeights),
    decCrossWeights: dec.blocks.map((b) => b.crossWeights),
  };
  return { out: logits, cache };
}
