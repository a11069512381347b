// Scaled dot-product attention (twin: reference/nn/dot_product_attention.py).
//
//   scores  = q k^T / sqrt(D)                 (B, ..., Q, K)
//   weights = maskedSoftmax(scores, lens)     (B, ..., Q, K)   rows sum to 1
//   dropped = weights * (keep / (1 - p))      (B, ..., Q, K)   inverted dropout; p == 0: weights
//   out     = dropped v                       (B, ..., Q, V)
//
// Shape legend: B batch, ... further leading axes (heads in multi-head attention), Q queries,
// K keys, D query/key dim, V value dim. The dot product sums over D in index order, and each
// score is then divided by sqrt(D) (one rounded division, the same in both engines).
//
// The backward walks these lines from the bottom up. Each product of the forward gives two
// products of the backward, and every sum in them runs in index order through ops.matmul: over
// V for the weights, over queries for dk and dv, over keys for dq.

import type { Generator } from "../core/rng.ts";
import { type Tensor, type IntTensor, empty, matmul, matmulNT, matmulTn, zeros } from "../core/ops.ts";
import { type MaskedSoftmaxCache, maskedSoftmaxForward, maskedSoftmaxBackward } from "./maskedSoftmax.ts";

export interface DotProductAttentionCache {
  q: Tensor; // (B, ..., Q, D)
  k: Tensor; // (B, ..., K, D)
  v: Tensor; // (B, ..., K, V)
  weights: Tensor; // (B, ..., Q, K) before dropout
  dropped: Tensor; // (B, ..., Q, K) after dropout (the same tensor as weights when p == 0)
  mask: Tensor | null; // (B, ..., Q, K) keep mask of 0 / 1, null when p == 0
  dropoutP: number;
  softmax: MaskedSoftmaxCache;
}

/** (..., M, N) -> (..., N, M), a row-major copy: the backward's transposed matmul operands. */
export function transposeLast(x: Tensor): Tensor {
  const n = x.shape.length, M = x.shape[n - 2], N = x.shape[n - 1];
  const out = empty([...x.shape.slice(0, -2), N, M]); // every element written
  const X = x.data, O = out.data;
  for (let p = 0; p < X.length / (M * N); p++) {
    const o = p * M * N;
    for (let m = 0; m < M; m++) for (let j = 0; j < N; j++) O[o + j * M + m] = X[o + m * N + j];
  }
  return out;
}

/** Inverted dropout on attention weights. p == 0 draws nothing and returns the weights
 * themselves; otherwise the keep mask of the weights' shape is drawn now, in one go. */
export function attentionDropout(weights: Tensor, dropoutP: number, rng: Generator | null): { dropped: Tensor; mask: Tensor | null } {
  if (!(dropoutP >= 0 && dropoutP < 1)) throw new RangeError(`attention dropout: p must be a number in [0, 1), got ${dropoutP}`);
  if (dropoutP === 0) return { dropped: weights, mask: null };
  if (rng === null) throw new RangeError(`dropoutP = ${dropoutP} needs a generator (rng), got null`);
  const mask = rng.keepMask(weights.shape, dropoutP); // (B, ..., Q, K) of 0 / 1
  const dropped = zeros(weights.shape);
  const W = weights.data, M = mask.data, O = dropped.data;
  // the scale is rounded once, then one product: as dropout.ts and PyTorch's x * (mask / (1 - p))
  for (let i = 0; i < O.length; i++) O[i] = W[i] * (M[i] / (1 - dropoutP));
  return { dropped, mask };
}

/** d weights of dropped = weights * (keep / (1 - p)): the same product with the same mask;
 * mask null (p == 0) passes the gradient through. */
export function attentionDropoutBackward(ddropped: Tensor, mask: Tensor | null, dropoutP: number): Tensor {
  if (mask === null) return ddropped;
  const dweights = zeros(ddropped.shape);
  const G = ddropped.data, M = mask.data, O = dweights.data;
  for (let i = 0; i < O.length; i++) O[i] = G[i] * (M[i] / (1 - dropoutP));
  return dweights;
}

/** q (B, ..., Q, D), k (B, ..., K, D), v (B, ..., K, V) -> out (B, ..., Q, V). */
export function dotProductAttentionForward(
  q: Tensor, k: Tensor, v: Tensor, validLens: IntTensor | null = null, dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: DotProductAttentionCache } {
  const D = q.shape[q.shape.length - 1];
  if (k.shape[k.shape.length - 1] !== D || k.shape[k.shape.length - 2] !== v.shape[v.shape.length - 2]) {
    throw new RangeError(`dotProductAttention: q [${q.shape}], k [${k.shape}], v [${v.shape}] do not fit ` +
      "(need q (..., Q, D), k (..., K, D), v (..., K, V))");
  }
  const scores = matmulNT(q, k); // (B, ..., Q, K)
  const S = scores.data, scale = Math.sqrt(D);
  for (let i = 0; i < S.length; i++) S[i] = S[i] / scale;
  const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, validLens); // (B, ..., Q, K)
  const { dropped, mask } = attentionDropout(weights, dropoutP, rng); // (B, ..., Q, K)
  const out = matmul(dropped, v); // (B, ..., Q, V)
  return { out, cache: { q, k, v, weights, dropped, mask, dropoutP, softmax } };
}

/** dout (B, ..., Q, V) -> dq (B, ..., Q, D), dk (B, ..., K, D), dv (B, ..., K, V). */
export function dotProductAttentionBackward(dout: Tensor, cache: DotProductAttentionCache): { dq: Tensor; dk: Tensor; dv: Tensor } {
  const { q, k, v } = cache;
  const expected = [...q.shape.slice(0, -1), v.shape[v.shape.length - 1]];
  if (dout.shape.length !== expected.length || dout.shape.some((s, i) => s !== expected[i])) {
    throw new RangeError(`dotProductAttentionBackward: dout must have shape (${expected}), got (${dout.shape})`);
  }
  // const out = matmul(dropped, v)
  const ddropped = matmulNT(dout, v); // (B, ..., Q, K): sum over V
  const dv = matmulTn(cache.dropped, dout); // (B, ..., K, V): dropped^T dout, sum over queries in order
  // const { dropped, mask } = attentionDropout(weights, dropoutP, rng)
  const dweights = attentionDropoutBackward(ddropped, cache.mask, cache.dropoutP); // (B, ..., Q, K)
  // const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, validLens)
  const dqk = maskedSoftmaxBackward(dweights, cache.softmax); // (B, ..., Q, K), d scores so far
  // S[i] = S[i] / scale, scores = matmulNT(q, k), scale = Math.sqrt(D)
  const G = dqk.data, scale = Math.sqrt(q.shape[q.shape.length - 1]);
  for (let i = 0; i < G.length; i++) G[i] = G[i] / scale;
  const dq = matmul(dqk, k); // (B, ..., Q, D): sum over keys
  const dk = matmulTn(dqk, q); // (B, ..., K, D): dqk^T q, sum over queries in order
  return { dq, dk, dv };
}
