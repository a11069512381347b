// The Transformer encoder-decoder, forward to logits (twin: reference/models/transformer.py).
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
//
// Backward (transformerBackward(dlogits, cache) -> grads keyed by the parameter names, in draw
// order) walks the model in reverse: the output linear, the decoder blocks from last to first,
// the decoder embedding (through the positional dropout and the sqrt(d) scale), then the encoder
// blocks from last to first and the encoder embedding. The encoder output feeds every decoder
// block's cross-attention; its gradient is the sum of those contributions in block order
// j = 0, 1, ... from +0 (an explicit loop, the same in both engines), taken once all decoder
// blocks are done. transformerLoss / transformerLossBackward wrap the forward and the backward
// with the padding-masked cross-entropy, for the gradient checks and the training runs.

import type { Generator } from "../core/rng.ts";
import { type Tensor, type IntTensor, empty, zeros } from "../core/ops.ts";
import { type EmbeddingCache, embeddingBackward, embeddingForward } from "../nn/embedding.ts";
import { type PositionalEncodingCache, positionalEncodingBackward, positionalEncodingForward } from "../nn/positionalEncoding.ts";
import { type LinearCache, linearBackward, linearForward } from "../nn/linear.ts";
import { embeddingParams, linearParams } from "../nn/init.ts";
import { type CrossEntropyCache, crossEntropyBackward, crossEntropyForward, sequenceWeights } from "../nn/loss.ts";
import { type Params, addGrads, param, subParams } from "../core/params.ts";
import { type EncoderBlockCache, encoderBlockBackward, encoderBlockForward, initEncoderBlockParams } from "../nn/encoderBlock.ts";
import { type DecoderBlockCache, decoderBlockBackward, decoderBlockForward, initDecoderBlockParams } from "../nn/decoderBlock.ts";
import { backward, scope, sublayer } from "../core/trace.ts";

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
  const scaled = empty(e.shape); // (B, T, d)  every element written
  for (let i = 0; i < scaled.data.length; i++) scaled.data[i] = e.data[i] * scale;
  const { out, cache: pe } = positionalEncodingForward(scaled, dropoutP, rng); // (B, T, d)
  return { out, cache: { embed, pe } };
}

/** dout (B, T, d) -> dE (V, d). */
export function embedPositionsBackward(dout: Tensor, cache: EmbedCache): Tensor {
  // inverts: x = PE(scaled); at p = 0 its gradient is dout itself (positionalEncodingBackward's
  // copy), read here without the copy
  const dscaled = cache.pe.mask === null ? dout : positionalEncodingBackward(dout, cache.pe);
  const scale = Math.sqrt(dout.shape[dout.shape.length - 1]);
  const de = empty(dscaled.shape); // (B, T, d)  every element written
  for (let i = 0; i < de.data.length; i++) de.data[i] = dscaled.data[i] * scale; // inverts: scaled = e * sqrt(d)
  return embeddingBackward(de, cache.embed); // inverts: e = E[tokens]
}

export interface EncodeCache {
  embed: EmbedCache;
  blocks: EncoderBlockCache[];
}

/** src (B, S), srcValidLens null | (B,) -> encOut (B, S, d). */
export function transformerEncode(
  src: IntTensor, srcValidLens: IntTensor | null, params: Params, config: TransformerConfig, rng: Generator | null = null,
): { out: Tensor; cache: EncodeCache } {
  const p = config.dropout;
  const { out: x0, cache: embed } = sublayer("enc.embedding", embedPositions, src, param(params, "enc.embed"), p, rng); // (B, S, d)
  let x = x0;
  const blocks: EncoderBlockCache[] = [];
  for (let i = 0; i < config.enc_blocks; i++) {
    scope(`enc.blk${i}.`); // names the block's traced sub-layers
    const blk = encoderBlockForward(x, srcValidLens, subParams(params, `enc.blk${i}.`), config.heads, p, rng); // (B, S, d)
    x = blk.out;
    blocks.push(blk.cache);
  }
  scope("");
  return { out: x, cache: { embed, blocks } };
}

/** dencOut (B, S, d) -> grads of enc.* under their full names, in draw order. */
export function transformerEncodeBackward(dencOut: Tensor, cache: EncodeCache): Params {
  let dx = dencOut; // (B, S, d)
  const n = cache.blocks.length;
  const blockGrads: Params[] = new Array(n);
  for (let i = n - 1; i >= 0; i--) {
    scope(`enc.blk${i}.`); // names the block's traced backwards
    const r = encoderBlockBackward(dx, cache.blocks[i]); // inverts: X = enc_block_i(X)
    dx = r.dx;
    blockGrads[i] = r.grads;
  }
  scope("");
  // inverts: X = PE(embed * sqrt(d))
  const grads: Params = { "enc.embed": backward("enc.embedding", (d: Tensor, c: EmbedCache) => ({ dE: embedPositionsBackward(d, c) }), dx, cache.embed).dE };
  for (let i = 0; i < n; i++) {
    for (const [name, g] of Object.entries(blockGrads[i])) grads[`enc.blk${i}.${name}`] = g;
  }
  return grads;
}

export interface DecodeCache {
  embed: EmbedCache;
  blocks: DecoderBlockCache[];
  out: LinearCache;
}

/** tgtIn (B, T), encOut (B, S, d) -> logits (B, T, V_tgt). */
export function transformerDecode(
  tgtIn: IntTensor, encOut: Tensor, srcValidLens: IntTensor | null, params: Params, config: TransformerConfig,
  rng: Generator | null = null,
): { out: Tensor; cache: DecodeCache } {
  const p = config.dropout;
  const { out: y0, cache: embed } = sublayer("dec.embedding", embedPositions, tgtIn, param(params, "dec.embed"), p, rng); // (B, T, d)
  let y = y0;
  const blocks: DecoderBlockCache[] = [];
  for (let j = 0; j < config.dec_blocks; j++) {
    scope(`dec.blk${j}.`); // names the block's traced sub-layers
    const blk = decoderBlockForward(y, encOut, srcValidLens, subParams(params, `dec.blk${j}.`), config.heads, p, rng); // (B, T, d)
    y = blk.out;
    blocks.push(blk.cache);
  }
  scope("");
  const { out: logits, cache: out } = sublayer("dec.head", linearForward, y, param(params, "dec.out.W"), param(params, "dec.out.b")); // (B, T, V_tgt)
  return { out: logits, cache: { embed, blocks, out } };
}

/** dlogits (B, T, V_tgt) -> dencOut (B, S, d) (null without decoder blocks) and the grads of
 *  dec.* under their full names, in draw order. dencOut sums the blocks' cross-attention
 *  contributions in block order from +0. */
export function transformerDecodeBackward(dlogits: Tensor, cache: DecodeCache): { dencOut: Tensor | null; grads: Params } {
  const { dx: dy0, dW: dWOut, db: dbOut } = backward("dec.head", linearBackward, dlogits, cache.out); // inverts: logits = Y W_out^T + b_out
  let dy = dy0;
  const n = cache.blocks.length;
  const blockGrads: Params[] = new Array(n);
  const dencs: Tensor[] = new Array(n);
  for (let j = n - 1; j >= 0; j--) {
    scope(`dec.blk${j}.`); // names the block's traced backwards
    const r = decoderBlockBackward(dy, cache.blocks[j]); // inverts: Y = dec_block_j(Y, X)
    dy = r.dx;
    dencs[j] = r.denc;
    blockGrads[j] = r.grads;
  }
  scope("");
  let dencOut: Tensor | null = n > 0 ? zeros(dencs[0].shape) : null; // (B, S, d)
  for (let j = 0; j < n; j++) dencOut = addGrads(dencOut as Tensor, dencs[j]); // in block order, from +0
  // inverts: Y = PE(embed * sqrt(d))
  const grads: Params = { "dec.embed": backward("dec.embedding", (d: Tensor, c: EmbedCache) => ({ dE: embedPositionsBackward(d, c) }), dy, cache.embed).dE };
  for (let j = 0; j < n; j++) {
    for (const [name, g] of Object.entries(blockGrads[j])) grads[`dec.blk${j}.${name}`] = g;
  }
  grads["dec.out.W"] = dWOut;
  grads["dec.out.b"] = dbOut as Tensor;
  return { dencOut, grads };
}

export interface TransformerCache {
  enc: EncodeCache;
  encOut: Tensor; // (B, S, d)
  dec: DecodeCache;
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

/** dlogits (B, T, V_tgt) -> grads keyed by the full parameter names, in draw order. */
export function transformerBackward(dlogits: Tensor, cache: TransformerCache): Params {
  const { dencOut, grads: decGrads } = transformerDecodeBackward(dlogits, cache.dec); // (B, S, d)
  // no decoder block reads the encoder: its gradients are zero
  const encGrads = transformerEncodeBackward(dencOut ?? zeros(cache.encOut.shape), cache.enc);
  return { ...encGrads, ...decGrads };
}

export interface TransformerLossCache {
  logits: Tensor; // (B, T, V_tgt)
  model: TransformerCache;
  ce: CrossEntropyCache;
}

/** The mean cross-entropy of the next-token logits over the counted target positions.
 *
 *  params, config: as transformerForward (config.dropout > 0 needs rng, which draws the masks in
 *  forward order). src (B, S), srcValidLens null | (B,): source tokens and how many of each row
 *  are real (padded keys are masked). tgtIn (B, T): the decoder input (<bos> then the target
 *  shifted right); tgtOut (B, T): the token expected at each step. tgtValidLens null | (B,):
 *  positions t < tgtValidLens[b] count (<eos> included), later ones are padding and get weight 0;
 *  null counts every position. Returns the loss and a cache: cache.logits (B, T, V_tgt),
 *  cache.model the forward's cache (attention weights included), cache.ce the loss's cache. */
export function transformerLoss(
  params: Params, config: TransformerConfig, src: IntTensor, srcValidLens: IntTensor | null, tgtIn: IntTensor,
  tgtOut: IntTensor, tgtValidLens: IntTensor | null, rng: Generator | null = null,
): { loss: number; cache: TransformerLossCache } {
  const { out: logits, cache: model } = transformerForward(src, srcValidLens, tgtIn, params, config, rng); // (B, T, V_tgt)
  const weights = tgtValidLens === null ? null : sequenceWeights(tgtValidLens, tgtOut.shape[1]); // (B, T)
  const { loss, cache: ce } = crossEntropyForward(logits, tgtOut, weights);
  return { loss, cache: { logits, model, ce } };
}

/** The gradient of transformerLoss's loss (dloss = 1) -> grads keyed by the parameter names. */
export function transformerLossBackward(cache: TransformerLossCache): Params {
  const dlogits = crossEntropyBackward(cache.ce); // (B, T, V_tgt)  inverts: loss = CE(logits, tgtOut, w)
  return transformerBackward(dlogits, cache.model);
}
