// A decoder-only language model of the lesson's blocks (twin: reference/models/decoder_lm.py;
// docs/decoder_lm.md).
//
//   P[b, t] = t - pads[b]  (0 for a pad)         (B, T)       positions of a left-padded batch
//   X = tok[tokens] + pos[P]                     (B, T, d)    learned token and position embeddings
//   X = block_i(X, keep), i = 0..N-1             (B, T, d)    pre-norm lesson blocks, keep =
//                                                             causalKeep(T, pads): pads[b] <= k <= q
//   logits = LN_f(X) W_head^T + b_head           (B, T, V)
//
// Shape legend: B batch, T steps, d model dim, V vocabulary, L maxLen (rows of the position table).
// Config: vocab, max_len, d, heads, ffn_hidden, blocks. A left-padded row computes bit for bit what
// the row computes alone: its pads are masked keys, whose softmax weights are exactly +0, and its
// tokens sit at the positions they have alone (runs/kvCache.ts relies on it).
//
// Parameters, in the order initDecoderLmParams draws them (PyTorch's defaults):
//   tok (V, d) N(0, 1); pos (L, d) N(0, 1);
//   blk{i}.* (nn/lessonBlock.ts, NAMES order); ln_f.gamma, ln_f.beta (d,);
//   head.W (V, d), head.b (V,) U(+-1/sqrt(d))
// Backward: each block's backward in reverse; the two embeddings' gradients scatter the same dX
// (embeddingBackward: rows accumulated in row-major token order). decoderLmLoss adds the weighted
// cross-entropy (nn/loss.ts: weight 1 for a counted position, 0 otherwise).
// Traced (core/trace.ts): the sub-layers embedding, blk{i}.attention, blk{i}.ffn and head, forward
// and backward.

import type { Generator } from "../core/rng.ts";
import type { IntTensor, Tensor } from "../core/ops.ts";
import { type Params, addGrads, param, prefixedParams, subParams } from "../core/params.ts";
import { backward, scope, sublayer } from "../core/trace.ts";
import { type EmbeddingCache, embeddingBackward, embeddingForward } from "../nn/embedding.ts";
import { initLayerNormParams } from "../nn/encoderBlock.ts";
import { embeddingParams, linearParams } from "../nn/init.ts";
import { type LayerNormCache, layerNormBackward, layerNormForward } from "../nn/layerNorm.ts";
import { causalKeep } from "../nn/lessonAttention.ts";
import { type LessonBlockCache, initLessonBlockParams, lessonBlockBackward, lessonBlockForward } from "../nn/lessonBlock.ts";
import { type LinearCache, linearBackward, linearForward } from "../nn/linear.ts";
import { type CrossEntropyCache, crossEntropyBackward, crossEntropyForward } from "../nn/loss.ts";

export interface DecoderLmConfig { vocab: number; max_len: number; d: number; heads: number; ffn_hidden: number; blocks: number }

/** The flat parameter record, keyed by dotted names, drawn in the order of the module doc. */
export function initDecoderLmParams(rng: Generator, config: DecoderLmConfig): Params {
  const { vocab: V, max_len: L, d } = config;
  const params: Params = { tok: embeddingParams(rng, V, d), pos: embeddingParams(rng, L, d) };
  for (let i = 0; i < config.blocks; i++) {
    for (const [n, p] of Object.entries(initLessonBlockParams(rng, d, config.ffn_hidden))) params[`blk${i}.${n}`] = p;
  }
  Object.assign(params, initLayerNormParams(d, "ln_f."));
  const { W, b } = linearParams(rng, V, d);
  params["head.W"] = W;
  params["head.b"] = b as Tensor;
  return params;
}

/** (B, T) (or (1, T) without pads): t - pads[b], and 0 where t < pads[b]. */
export function decoderLmPositions(T: number, pads: Int32Array | null = null): IntTensor {
  const B = pads === null ? 1 : pads.length;
  const data = new Int32Array(B * T);
  for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) data[b * T + t] = Math.max(t - (pads === null ? 0 : pads[b]), 0);
  return { shape: [B, T], data };
}

export interface DecoderLmCache {
  tok: EmbeddingCache; pos: EmbeddingCache; blocks: LessonBlockCache[]; lnF: LayerNormCache; head: LinearCache;
  weights: Tensor[]; // per block (B, H, T, T)
}

/** tokens (B, T), pads null | (B,) -> logits (B, T, V); cache.blocks[i] holds block i's cache
 *  (its attention's kh, vh (B, H, T, D) and weights (B, H, T, T)). */
export function decoderLmForward(
  tokens: IntTensor, params: Params, config: DecoderLmConfig, pads: Int32Array | null = null,
): { out: Tensor; cache: DecoderLmCache } {
  const [B, T] = tokens.shape;
  if (T > config.max_len) throw new RangeError(`decoderLm: ${T} steps, but the position table has max_len = ${config.max_len} rows`);
  const p1 = decoderLmPositions(T, pads);
  const positions: IntTensor = p1.shape[0] === B ? p1 : { shape: [B, T], data: new Int32Array(B * T) }; // (B, T)
  if (p1.shape[0] !== B) for (let b = 0; b < B; b++) positions.data.set(p1.data, b * T);
  const { out: x0, cache: embed } = sublayer("embedding", decoderLmEmbed, tokens, positions, params); // (B, T, d)
  let x = x0;
  const keep = causalKeep(T, pads); // (B|1, T, T)
  const blocks: LessonBlockCache[] = [];
  for (let i = 0; i < config.blocks; i++) {
    scope(`blk${i}.`); // names the block's traced sub-layers
    const blk = lessonBlockForward(x, subParams(params, `blk${i}.`), config.heads, keep); // (B, T, d)
    x = blk.out;
    blocks.push(blk.cache);
  }
  scope("");
  const { out: logits, cache: head } = sublayer("head", decoderLmHead, x, params); // (B, T, V)
  return { out: logits, cache: { tok: embed.tok, pos: embed.pos, blocks, lnF: head.lnF, head: head.head, weights: blocks.map((b) => b.weights) } };
}

/** tokens, positions (B, T) -> x (B, T, d): E_tok[tokens] + E_pos[positions]. */
export function decoderLmEmbed(tokens: IntTensor, positions: IntTensor, params: Params): { out: Tensor; cache: { tok: EmbeddingCache; pos: EmbeddingCache } } {
  const { out: eTok, cache: tok } = embeddingForward(tokens, param(params, "tok")); // (B, T, d)
  const { out: ePos, cache: pos } = embeddingForward(positions, param(params, "pos")); // (B, T, d)
  const x = addGrads(eTok, ePos); // (B, T, d)
  return { out: x, cache: { tok, pos } };
}

/** x (B, T, d) -> logits (B, T, V): the final LN, then the head. */
export function decoderLmHead(x: Tensor, params: Params): { out: Tensor; cache: { lnF: LayerNormCache; head: LinearCache } } {
  const { out: h, cache: lnF } = layerNormForward(x, param(params, "ln_f.gamma"), param(params, "ln_f.beta")); // (B, T, d)
  const { out: logits, cache: head } = linearForward(h, param(params, "head.W"), param(params, "head.b")); // (B, T, V)
  return { out: logits, cache: { lnF, head } };
}

/** dlogits (B, T, V) -> dx (B, T, d), dgamma, dbeta (d,) (LN_f's), dW (V, d), db (V,) (the head's);
 *  cache the model's. */
export function decoderLmHeadBackward(dlogits: Tensor, cache: DecoderLmCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor; dW: Tensor; db: Tensor } {
  // inverts: logits = LN_f(X) W_head^T + b_head
  const { dx: dh, dW, db } = linearBackward(dlogits, cache.head); // (B, T, d)
  const { dx, dgamma, dbeta } = layerNormBackward(dh, cache.lnF); // (B, T, d)
  return { dx, dgamma, dbeta, dW, db: db as Tensor };
}

/** dx (B, T, d) -> dtok (V, d), dpos (L, d); cache the model's. */
export function decoderLmEmbedBackward(dx: Tensor, cache: DecoderLmCache): { dtok: Tensor; dpos: Tensor } {
  // inverts: X = tok[tokens] + pos[P]
  return { dtok: embeddingBackward(dx, cache.tok), dpos: embeddingBackward(dx, cache.pos) };
}

/** dlogits (B, T, V) -> grads keyed by every parameter name, in init order. */
export function decoderLmBackward(dlogits: Tensor, cache: DecoderLmCache): Params {
  const { dx: dx0, dgamma: dgammaF, dbeta: dbetaF, dW: dWHead, db: dbHead } = backward("head", decoderLmHeadBackward, dlogits, cache);
  let dx = dx0;
  const blockGrads: Params[] = new Array(cache.blocks.length);
  for (let i = cache.blocks.length - 1; i >= 0; i--) {
    scope(`blk${i}.`); // names the block's traced backwards
    const blk = lessonBlockBackward(dx, cache.blocks[i]); // inverts: X = block_i(X, keep)
    dx = blk.dx;
    blockGrads[i] = blk.grads;
  }
  scope("");
  const { dtok, dpos } = backward("embedding", decoderLmEmbedBackward, dx, cache);
  return {
    tok: dtok, pos: dpos, ...prefixedParams(blockGrads, "blk"),
    "ln_f.gamma": dgammaF, "ln_f.beta": dbetaF, "head.W": dWHead, "head.b": dbHead as Tensor,
  };
}

export interface DecoderLmLossCache { logits: Tensor; model: DecoderLmCache; ce: CrossEntropyCache }

/** The weighted mean cross-entropy of next-token targets (B, T) (weights (B, T): 1 counted, 0 not). */
export function decoderLmLoss(
  params: Params, config: DecoderLmConfig, tokens: IntTensor, targets: IntTensor, weights: Tensor | null = null,
): { loss: number; cache: DecoderLmLossCache } {
  const { out: logits, cache: model } = decoderLmForward(tokens, params, config); // (B, T, V)
  const { loss, cache: ce } = crossEntropyForward(logits, targets, weights);
  return { loss, cache: { logits, model, ce } };
}

/** The gradient of decoderLmLoss's loss (dloss = 1) -> grads keyed by the parameter names. */
export function decoderLmLossBackward(cache: DecoderLmLossCache): Params {
  const dlogits = crossEntropyBackward(cache.ce); // (B, T, V)  inverts: loss = CE(logits, targets, weights)
  return decoderLmBackward(dlogits, cache.model);
}
