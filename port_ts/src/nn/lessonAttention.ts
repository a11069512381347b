// The lesson's multi-head attention: PyTorch's nn.MultiheadAttention, biases on all four
// projections (twin: reference/nn/lesson_attention.py; docs/lesson_block.md).
//
//   qkv = x W_in^T + b_in                          (B, T, 3d)   W_in (3d, d): rows [W_q; W_k; W_v]
//   q, k, v = qkv[..., :d], [d:2d], [2d:]          (B, T, d)    = in_proj_weight, in_proj_bias
//   qh, kh, vh = splitHeads(q), ...                (B, H, T, D) head i: features [i*D, (i+1)*D)
//   scores  = qh kh^T / sqrt(D)                    (B, H, T, K)
//   weights = softmax(where(keep, scores, -1e6))   (B, H, T, K) keep (B|1, T, K) shared by the heads
//   heads   = weights vh                           (B, H, T, D)
//   out     = mergeHeads(heads) W_o^T + b_o        (B, T, d)    = out_proj.weight, out_proj.bias
//
// Shape legend: B batch, T queries, K keys, H heads, D head dim, d model dim (d = H * D).
// keep null attends to every key; causalKeep(T, pads) gives the causal mask of a left-padded
// batch (key k is kept for query q when pads[b] <= k <= q). A masked score is replaced by
// maskedSoftmax's -1e6, as everywhere in the project. No dropout (the lesson's block in eval
// mode; our runs train with p = 0).
//
// PyTorch's initialisation: W_in Xavier-uniform over the whole (3d, d) matrix,
// U(+-sqrt(6 / (d + 3d))); W_o the default Linear init U(+-1/sqrt(d)); both biases 0.
//
// maskedAttentionForward is the core that the KV cache (runs/kvCache.ts) calls one query at a
// time. The backwards walk the lines above from the bottom up; the three parts of dqkv are
// joined back into one (B, T, 3d) gradient, so W_in and b_in get theirs from one linearBackward.

import type { Generator } from "../core/rng.ts";
import { type Tensor, matmul, matmulNT, matmulTn, zeros } from "../core/ops.ts";
import type { Params } from "../core/params.ts";
import { type LinearCache, linearBackward, linearForward } from "./linear.ts";
import { type MaskedSoftmaxCache, MASK_VALUE, maskedSoftmaxBackward, maskedSoftmaxForward } from "./maskedSoftmax.ts";
import { mergeHeads, splitHeads } from "./multiHeadAttention.ts";

/** A keep mask (B|1, Q, K) shared by the heads: 1 where the key is attended to. */
export interface Keep { shape: number[]; data: Uint8Array }

/** W_in (3d, d) ~ U(+-sqrt(6 / (4d))), b_in = 0 (3d,), W_o (d, d) ~ U(+-1/sqrt(d)), b_o = 0 (d,);
 *  drawn in that order (W_in, then W_o). */
export function initLessonAttentionParams(rng: Generator, d: number, prefix = ""): Params {
  const xavier = Math.sqrt(6 / (d + 3 * d));
  const W_in = rng.uniform([3 * d, d], -xavier, xavier); // (3d, d)
  const bound = 1 / Math.sqrt(d);
  const W_o = rng.uniform([d, d], -bound, bound); // (d, d)
  return { [`${prefix}W_in`]: W_in, [`${prefix}b_in`]: zeros([3 * d]), [`${prefix}W_o`]: W_o, [`${prefix}b_o`]: zeros([d]) };
}

/** (B, T, T) (or (1, T, T) without pads): key k kept for query q when pads[b] <= k <= q. */
export function causalKeep(T: number, pads: Int32Array | null = null): Keep {
  const B = pads === null ? 1 : pads.length;
  const data = new Uint8Array(B * T * T);
  for (let b = 0; b < B; b++) {
    const lo = pads === null ? 0 : pads[b];
    for (let q = 0; q < T; q++) for (let k = 0; k < T; k++) data[(b * T + q) * T + k] = k <= q && k >= lo ? 1 : 0;
  }
  return { shape: [B, T, T], data };
}

/** (B, T, 3d) -> q, k, v (B, T, d) each: features [0, d), [d, 2d), [2d, 3d). */
export function splitQkv(qkv: Tensor): { q: Tensor; k: Tensor; v: Tensor } {
  const lead = qkv.shape.slice(0, -1), d = qkv.shape[qkv.shape.length - 1] / 3;
  const parts = [zeros([...lead, d]), zeros([...lead, d]), zeros([...lead, d])];
  const rows = qkv.data.length / (3 * d);
  for (let r = 0; r < rows; r++)
    for (let p = 0; p < 3; p++) parts[p].data.set(qkv.data.subarray(r * 3 * d + p * d, r * 3 * d + (p + 1) * d), r * d);
  return { q: parts[0], k: parts[1], v: parts[2] };
}

/** q, k, v (B, T, d) -> (B, T, 3d), the inverse of splitQkv. */
export function joinQkv(q: Tensor, k: Tensor, v: Tensor): Tensor {
  const lead = q.shape.slice(0, -1), d = q.shape[q.shape.length - 1];
  const out = zeros([...lead, 3 * d]);
  const rows = q.data.length / d;
  for (let r = 0; r < rows; r++) {
    out.data.set(q.data.subarray(r * d, (r + 1) * d), r * 3 * d);
    out.data.set(k.data.subarray(r * d, (r + 1) * d), r * 3 * d + d);
    out.data.set(v.data.subarray(r * d, (r + 1) * d), r * 3 * d + 2 * d);
  }
  return out;
}

export interface MaskedAttentionCache {
  qh: Tensor; kh: Tensor; vh: Tensor; // (B, H, Q|K, D)
  keep: Keep | null; // (B|1, Q, K)
  weights: Tensor; // (B, H, Q, K)
  softmax: MaskedSoftmaxCache;
}

/** Whether key k of query q in batch row b, head-shared, is kept: keep[b or 0, q, k]. */
function kept(keep: Keep, b: number, q: number, k: number): boolean {
  const [Bk, Q, K] = keep.shape;
  return keep.data[((Bk === 1 ? 0 : b) * Q + q) * K + k] === 1;
}

/** qh (B, H, Q, D), kh (B, H, K, D), vh (B, H, K, D), keep null | (B|1, Q, K)
 *  -> heads (B, H, Q, D); cache.weights (B, H, Q, K). */
export function maskedAttentionForward(qh: Tensor, kh: Tensor, vh: Tensor, keep: Keep | null = null): { out: Tensor; cache: MaskedAttentionCache } {
  const [B, H, Q, D] = qh.shape, K = kh.shape[2];
  const scores = matmulNT(qh, kh); // (B, H, Q, K)
  const S = scores.data, scale = Math.sqrt(D);
  for (let i = 0; i < S.length; i++) S[i] = S[i] / scale;
  if (keep !== null) { // filled = where(keep, scores, -1e6)
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++)
        for (let q = 0; q < Q; q++)
          for (let k = 0; k < K; k++) if (!kept(keep, b, q, k)) S[((b * H + h) * Q + q) * K + k] = MASK_VALUE;
  }
  const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, null); // (B, H, Q, K)
  const heads = matmul(weights, vh); // (B, H, Q, D): sum over keys in order
  return { out: heads, cache: { qh, kh, vh, keep, weights, softmax } };
}

/** dheads (B, H, Q, D) -> dqh (B, H, Q, D), dkh (B, H, K, D), dvh (B, H, K, D). */
export function maskedAttentionBackward(dheads: Tensor, cache: MaskedAttentionCache): { dq: Tensor; dk: Tensor; dv: Tensor } {
  const { qh, kh, vh, weights, keep } = cache;
  const [B, H, Q, D] = qh.shape, K = kh.shape[2];
  // const heads = matmul(weights, vh)
  const dweights = matmulNT(dheads, vh); // (B, H, Q, K): sum over D
  const dv = matmulTn(weights, dheads); // (B, H, K, D): weights^T dheads, sum over queries
  // const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, null)
  const dqk = maskedSoftmaxBackward(dweights, cache.softmax); // (B, H, Q, K)
  const G = dqk.data;
  if (keep !== null) { // filled = where(keep, scores, -1e6): a masked score is a constant
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++)
        for (let q = 0; q < Q; q++)
          for (let k = 0; k < K; k++) if (!kept(keep, b, q, k)) G[((b * H + h) * Q + q) * K + k] = 0;
  }
  // S[i] = S[i] / scale, scores = matmulNT(qh, kh), scale = Math.sqrt(D)
  const scale = Math.sqrt(D);
  for (let i = 0; i < G.length; i++) G[i] = G[i] / scale;
  const dq = matmul(dqk, kh); // (B, H, Q, D): sum over keys
  const dk = matmulTn(dqk, qh); // (B, H, K, D): dqk^T qh, sum over queries
  return { dq, dk, dv };
}

export interface LessonAttentionCache {
  linIn: LinearCache; linOut: LinearCache; numHeads: number;
  attn: MaskedAttentionCache;
  kh: Tensor; vh: Tensor; // (B, H, T, D) the keys and values per head (what a KV cache keeps)
  weights: Tensor; // (B, H, T, T)
}

function checkShape(name: string, t: Tensor, expected: number[]): void {
  if (t.shape.length !== expected.length || t.shape.some((s, i) => s !== expected[i])) {
    throw new RangeError(`lessonAttention: ${name} must have shape (${expected}), got (${t.shape})`);
  }
}

/** Self-attention, x (B, T, d), keep null | (B|1, T, T) -> out (B, T, d). */
export function lessonAttentionForward(x: Tensor, params: Params, numHeads: number, keep: Keep | null = null): { out: Tensor; cache: LessonAttentionCache } {
  const { W_in, b_in, W_o, b_o } = params;
  const d = x.shape[x.shape.length - 1];
  if (!Number.isInteger(numHeads) || numHeads < 1 || d % numHeads !== 0) {
    throw new RangeError(`lessonAttention: model dim d = ${d} must be divisible by numHeads = ${numHeads}; choose h dividing d`);
  }
  checkShape("W_in", W_in, [3 * d, d]);
  checkShape("b_in", b_in, [3 * d]);
  checkShape("W_o", W_o, [d, d]);
  checkShape("b_o", b_o, [d]);
  const { out: qkv, cache: linIn } = linearForward(x, W_in, b_in); // (B, T, 3d)
  const { q, k, v } = splitQkv(qkv); // (B, T, d) each
  const qh = splitHeads(q, numHeads), kh = splitHeads(k, numHeads), vh = splitHeads(v, numHeads); // (B, H, T, D)
  const { out: heads, cache: attn } = maskedAttentionForward(qh, kh, vh, keep); // (B, H, T, D)
  const concat = mergeHeads(heads); // (B, T, d)
  const { out, cache: linOut } = linearForward(concat, W_o, b_o); // (B, T, d)
  return { out, cache: { linIn, linOut, numHeads, attn, kh, vh, weights: attn.weights } };
}

/** dout (B, T, d) -> dx (B, T, d), grads { W_in, b_in, W_o, b_o }. */
export function lessonAttentionBackward(dout: Tensor, cache: LessonAttentionCache): { dx: Tensor; grads: Params } {
  const { numHeads } = cache;
  // const { out, cache: linOut } = linearForward(concat, W_o, b_o)
  const { dx: dconcat, dW: dW_o, db: db_o } = linearBackward(dout, cache.linOut); // (B, T, d)
  // const concat = mergeHeads(heads)
  const dheads = splitHeads(dconcat, numHeads); // (B, H, T, D)
  // const { out: heads, cache: attn } = maskedAttentionForward(qh, kh, vh, keep)
  const { dq: dqh, dk: dkh, dv: dvh } = maskedAttentionBackward(dheads, cache.attn); // (B, H, T, D) each
  // const qh = splitHeads(q, numHeads), ...
  const dqkv = joinQkv(mergeHeads(dqh), mergeHeads(dkh), mergeHeads(dvh)); // (B, T, 3d)
  // const { out: qkv, cache: linIn } = linearForward(x, W_in, b_in)
  const { dx, dW: dW_in, db: db_in } = linearBackward(dqkv, cache.linIn); // (B, T, d)
  return { dx, grads: { W_in: dW_in, b_in: db_in as Tensor, W_o: dW_o, b_o: db_o as Tensor } };
}
