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

import type { Generator } from "../core/rng.ts";
import { type Tensor, type IntTensor, empty, matmul, matmulNT, weightGrad } from "../core/ops.ts";
import {
  type DotProductAttentionCache, dotProductAttentionForward, dotProductAttentionBackward,
} from "./dotProductAttention.ts";

export interface MultiHeadAttentionCache {
  xQ: Tensor; xKV: Tensor;
  params: Record<string, Tensor>;
  numHeads: number;
  q: Tensor; k: Tensor; v: Tensor; // (B, Q|K, d) projections
  qh: Tensor; kh: Tensor; vh: Tensor; // (B, H, Q|K, D) per head
  heads: Tensor; // (B, H, Q, D)
  weights: Tensor; // (B, H, Q, K) before dropout
  attn: DotProductAttentionCache;
  concat: Tensor; // (B, Q, d)
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
  const qh = splitHeads(q, numHeads), kh = splitHeads(k, numHeads), vh = splitHeads(v, numHeads); // (B, H, T, D)
  const { out: heads, cache: attn } = dotProductAttentionForward(qh, kh, vh, validLens, dropoutP, rng); // (B, H, Q, D)
  const concat = mergeHeads(heads); // (B, Q, d)
  const out = matmulNT(concat, W_o); // (B, Q, d)
  return {
    out,
    cache: { xQ, xKV, params, numHeads, q, k, v, qh, kh, vh, heads, weights: attn.weights, attn, concat },
  };
}

/** dout (B, Q, d) -> dxQ (B, Q, dq_in), dxKv (B, K, dkv_in), grads { W_q, W_k, W_v, W_o }.
 * Self-attention: the input's gradient is dxQ + dxKv, added by the caller. */
export function multiHeadAttentionBackward(
  dout: Tensor, cache: MultiHeadAttentionCache,
): { dxQ: Tensor; dxKv: Tensor; grads: Record<string, Tensor> } {
  const { xQ, xKV, numHeads, concat } = cache;
  const { W_q, W_k, W_v, W_o } = cache.params;
  checkShape("dout", dout, concat.shape);
  // const out = matmulNT(concat, W_o)
  const dconcat = matmul(dout, W_o); // (B, Q, d): sum over output features
  const dW_o = weightGrad(dout, concat); // (d, d)
  // const concat = mergeHeads(heads)
  const dheads = splitHeads(dconcat, numHeads); // (B, H, Q, D)
  // const { out: heads, cache: attn } = dotProductAttentionForward(qh, kh, vh, validLens, dropoutP, rng)
  const { dq: dqh, dk: dkh, dv: dvh } = dotProductAttentionBackward(dheads, cache.attn); // (B, H, Q|K, D)
  // const qh = splitHeads(q, numHeads), kh = ..., vh = ...
  const dq = mergeHeads(dqh), dk = mergeHeads(dkh), dv = mergeHeads(dvh); // (B, Q|K, d)
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
