// Multi-head attention, no biases (twin: reference/nn/multi_head_attention.py).
//
//   q = x_q W_q^T, k = x_kv W_k^T, v = x_kv W_v^T        (B, Q|K, d)
//   qh, kh, vh = splitHeads(q), ...                      (B, H, Q|K, D)   head i: features [i*D, (i+1)*D)
//   heads = dotProductAttention(qh, kh, vh, lens)        (B, H, Q, D)     scale 1/sqrt(D), D = d / H
//   concat = mergeHeads(heads)                           (B, Q, d)
//   out = concat W_o^T                                   (B, Q, d)
//
// Shape legend: B batch, Q queries, K keys, H heads, D head dim, d model dim (d = H * D),
// dq_in / dkv_in the input feature dims. Params: W_q (d, dq_in), W_k (d, dkv_in),
// W_v (d, dkv_in), W_o (d, d). validLens null | (B,) | (B, Q) applies to every head; the dropout
// keep mask is drawn once for the whole (B, H, Q, K) weights tensor.
//
// The backward walks these lines from the bottom up: through W_o, the merge (undone by a split),
// each head's attention, the split (undone by a merge) and the three projections. It returns
// dxQ and dxKv apart; for self-attention (xQ is xKV) the caller adds them. Parameter gradients
// sum over every (batch, step) row in row-major order.
//
// No split or merge is copied: each head's products (its scores, weights times values, and the
// four products of their backward) read and write head h's slice of the (B, Q|K, d) tensors in
// place (kernels/product.ts: offset h*D, rows d apart), one call per head batched over B. Every output
// is the sum it is in dotProductAttention on split heads, in the same order (q_h k_h^T over D,
// weights v_h over keys, dv and dk over queries, dq over keys); splitHeads and mergeHeads remain
// for the layers that copy (bert, lessonAttention).

import type { Generator } from "../core/rng.ts";
import { type Tensor, type IntTensor, empty, matmul, matmulNT, weightGrad } from "../core/ops.ts";
import { products } from "../kernels/product.ts";
import { attentionDropout, attentionDropoutBackward } from "./dotProductAttention.ts";
import { type MaskedSoftmaxCache, maskedSoftmaxBackward, maskedSoftmaxForward } from "./maskedSoftmax.ts";

/** The heads' attention: as dotProductAttention's cache, its q, k, v being head slices of the projections. */
export interface HeadsAttentionCache {
  weights: Tensor; // (B, H, Q, K) before dropout
  dropped: Tensor; // (B, H, Q, K) after dropout (the same tensor as weights when p == 0)
  mask: Tensor | null; // (B, H, Q, K) keep mask of 0 / 1, null when p == 0
  dropoutP: number;
  softmax: MaskedSoftmaxCache;
}

export interface MultiHeadAttentionCache {
  xQ: Tensor; xKV: Tensor;
  params: Record<string, Tensor>;
  numHeads: number;
  q: Tensor; k: Tensor; v: Tensor; // (B, Q|K, d) projections; head h: features [h*D, (h+1)*D)
  weights: Tensor; // (B, H, Q, K) before dropout
  attn: HeadsAttentionCache;
  concat: Tensor; // (B, Q, d) the heads' outputs side by side
}

/** (B, T, d) -> (B, H, T, D): head i takes features [i*D, (i+1)*D). */
export function splitHeads(x: Tensor, numHeads: number): Tensor {
  const [B, T, d] = x.shape;
  const D = d / numHeads;
  const out = empty([B, numHeads, T, D]); // every element written
  const X = x.data, O = out.data;
  for (let b = 0, o = 0; b < B; b++)
    for (let h = 0; h < numHeads; h++)
      for (let t = 0, i = b * T * d + h * D; t < T; t++, i += d)
        for (let j = 0; j < D; j++) O[o++] = X[i + j]; // out[b, h, t, j] = x[b, t, h*D + j]
  return out;
}

/** (B, H, T, D) -> (B, T, H*D), the inverse of splitHeads. */
export function mergeHeads(x: Tensor): Tensor {
  const [B, H, T, D] = x.shape;
  const d = H * D;
  const out = empty([B, T, d]); // every element written
  const X = x.data, O = out.data;
  for (let b = 0, i = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let t = 0, o = b * T * d + h * D; t < T; t++, o += d)
        for (let j = 0; j < D; j++) O[o + j] = X[i++]; // out[b, t, h*D + j] = x[b, h, t, j]
  return out;
}

function checkShape(name: string, t: Tensor, expected: number[]): void {
  if (t.shape.length !== expected.length || t.shape.some((s, i) => s !== expected[i])) {
    throw new RangeError(`multiHeadAttention: ${name} must have shape (${expected}), got (${t.shape})`);
  }
}

/** xQ (B, Q, dq_in), xKV (B, K, dkv_in) -> out (B, Q, d). */
export function multiHeadAttentionForward(
  xQ: Tensor, xKV: Tensor, params: Record<string, Tensor>, numHeads: number,
  validLens: IntTensor | null = null, dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: MultiHeadAttentionCache } {
  const { W_q, W_k, W_v, W_o } = params;
  const d = W_q.shape[0];
  if (!Number.isInteger(numHeads) || numHeads < 1 || d % numHeads !== 0) {
    throw new RangeError(`multiHeadAttention: model dim d = ${d} must be divisible by numHeads = ${numHeads}; choose h dividing d`);
  }
  const dq = xQ.shape[xQ.shape.length - 1], dkv = xKV.shape[xKV.shape.length - 1];
  checkShape("W_q", W_q, [d, dq]);
  checkShape("W_k", W_k, [d, dkv]);
  checkShape("W_v", W_v, [d, dkv]);
  checkShape("W_o", W_o, [d, d]);
  const q = matmulNT(xQ, W_q); // (B, Q, d)
  const k = matmulNT(xKV, W_k); // (B, K, d)
  const v = matmulNT(xKV, W_v); // (B, K, d)
  const B = q.shape[0], Q = q.shape[1], K = k.shape[1], H = numHeads, D = d / H;
  // scores_h = q_h k_h^T / sqrt(D), head h's slices of q and k (dotProductAttention's first line)
  const scores = empty([B, H, Q, K]); // every element written: each head its own (Q, K) blocks
  for (let h = 0; h < H; h++) {
    products(q.data, h * D, d, 1, Q * d, k.data, h * D, 1, d, K * d, scores.data, h * Q * K, K, H * Q * K, Q, D, K, B);
  }
  const S = scores.data, scale = Math.sqrt(D);
  for (let i = 0; i < S.length; i++) S[i] = S[i] / scale;
  const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, validLens); // (B, H, Q, K)
  const { dropped, mask } = attentionDropout(weights, dropoutP, rng); // (B, H, Q, K)
  // concat[:, :, h*D:(h+1)*D] = dropped_h v_h: the heads' outputs merged as they are written
  const concat = empty([B, Q, d]); // every element written: each head its own D columns
  for (let h = 0; h < H; h++) {
    products(dropped.data, h * Q * K, K, 1, H * Q * K, v.data, h * D, d, 1, K * d, concat.data, h * D, d, Q * d, Q, K, D, B);
  }
  const out = matmulNT(concat, W_o); // (B, Q, d)
  const attn = { weights, dropped, mask, dropoutP, softmax };
  return { out, cache: { xQ, xKV, params, numHeads, q, k, v, weights, attn, concat } };
}

/** dout (B, Q, d) -> dxQ (B, Q, dq_in), dxKv (B, K, dkv_in), grads { W_q, W_k, W_v, W_o }.
 * Self-attention: the input's gradient is dxQ + dxKv, added by the caller. */
export function multiHeadAttentionBackward(
  dout: Tensor, cache: MultiHeadAttentionCache,
): { dxQ: Tensor; dxKv: Tensor; grads: Record<string, Tensor> } {
  const { xQ, xKV, numHeads, concat, q, k, v } = cache;
  const { W_q, W_k, W_v, W_o } = cache.params;
  const { dropped, mask, dropoutP, softmax } = cache.attn;
  checkShape("dout", dout, concat.shape);
  const B = q.shape[0], Q = q.shape[1], K = k.shape[1], d = q.shape[2], H = numHeads, D = d / H;
  // const out = matmulNT(concat, W_o)
  const dconcat = matmul(dout, W_o); // (B, Q, d): sum over output features; head h's dout: its D columns
  const dW_o = weightGrad(dout, concat); // (d, d)
  // concat_h = dropped_h v_h: ddropped_h = dout_h v_h^T (sum over D), dv_h = dropped_h^T dout_h (over queries)
  const ddropped = empty([B, H, Q, K]); // every element written
  const dv = empty([B, K, d]); // every element written
  for (let h = 0; h < H; h++) {
    products(dconcat.data, h * D, d, 1, Q * d, v.data, h * D, 1, d, K * d, ddropped.data, h * Q * K, K, H * Q * K, Q, D, K, B);
    products(dropped.data, h * Q * K, 1, K, H * Q * K, dconcat.data, h * D, d, 1, Q * d, dv.data, h * D, d, K * d, K, Q, D, B);
  }
  // const { dropped, mask } = attentionDropout(weights, dropoutP, rng)
  const dweights = attentionDropoutBackward(ddropped, mask, dropoutP); // (B, H, Q, K)
  // const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, validLens)
  const dscores = maskedSoftmaxBackward(dweights, softmax); // (B, H, Q, K), d scores so far
  // S[i] = S[i] / scale
  const G = dscores.data, scale = Math.sqrt(D);
  for (let i = 0; i < G.length; i++) G[i] = G[i] / scale;
  // scores_h = q_h k_h^T: dq_h = dscores_h k_h (sum over keys), dk_h = dscores_h^T q_h (over queries)
  const dq = empty([B, Q, d]), dk = empty([B, K, d]); // every element written
  for (let h = 0; h < H; h++) {
    products(G, h * Q * K, K, 1, H * Q * K, k.data, h * D, d, 1, K * d, dq.data, h * D, d, Q * d, Q, K, D, B);
    products(G, h * Q * K, 1, K, H * Q * K, q.data, h * D, d, 1, Q * d, dk.data, h * D, d, K * d, K, Q, D, B);
  }
  // const v = matmulNT(xKV, W_v); const k = matmulNT(xKV, W_k): xKV feeds both, one add
  const dxKv = matmul(dk, W_k); // (B, K, dkv_in): sum over d
  const fromV = matmul(dv, W_v).data;
  for (let i = 0; i < fromV.length; i++) dxKv.data[i] = dxKv.data[i] + fromV[i];
  const dW_v = weightGrad(dv, xKV); // (d, dkv_in)
  const dW_k = weightGrad(dk, xKV); // (d, dkv_in)
  // const q = matmulNT(xQ, W_q)
  const dxQ = matmul(dq, W_q); // (B, Q, dq_in)
  const dW_q = weightGrad(dq, xQ); // (d, dq_in)
  return { dxQ, dxKv, grads: { W_q: dW_q, W_k: dW_k, W_v: dW_v, W_o: dW_o } };
}
