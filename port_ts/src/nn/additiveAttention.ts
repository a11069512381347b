// Additive (Bahdanau) attention, no biases (twin: reference/nn/additive_attention.py).
//
//   a(q, k) = w_v^T tanh(W_q q + W_k k)
//
//   qp       = q W_q^T                        (B, Q, H)
//   kp       = k W_k^T                        (B, K, H)
//   features = qp[:, :, None] + kp[:, None]   (B, Q, K, H)   broadcast over queries and keys
//   t        = tanh(features)                 (B, Q, K, H)
//   scores   = t w_v^T                        (B, Q, K)
//   weights  = maskedSoftmax(scores, lens)    (B, Q, K)
//   out      = dropout(weights) v             (B, Q, V)
//
// Shape legend: B batch, Q queries, K keys, Dq query dim, Dk key dim, H hidden units of the
// scoring MLP, V value dim. Params: W_q (H, Dq), W_k (H, Dk), w_v (1, H).
//
// The backward walks these lines from the bottom up. The broadcast in `features` becomes two
// sums: each qp row met every key, each kp row every query, summed in index order. Parameter
// gradients sum over every (batch, query[, key]) row in row-major order.

import type { Generator } from "../core/rng.ts";
import { type Tensor, type IntTensor, matmul, matmulNT, matmulTn, weightGrad, zeros } from "../core/ops.ts";
import { type MaskedSoftmaxCache, maskedSoftmaxForward, maskedSoftmaxBackward } from "./maskedSoftmax.ts";
import { attentionDropout, attentionDropoutBackward } from "./dotProductAttention.ts";
import * as mathlib from "../core/mathlib.ts";

export interface AdditiveAttentionCache {
  q: Tensor; k: Tensor; v: Tensor;
  params: Record<string, Tensor>;
  qp: Tensor; // (B, Q, H)
  kp: Tensor; // (B, K, H)
  features: Tensor; // (B, Q, K, H)
  tanh: Tensor; // (B, Q, K, H)
  scores: Tensor; // (B, Q, K)
  weights: Tensor; // (B, Q, K) before dropout
  dropped: Tensor; // (B, Q, K)
  mask: Tensor | null;
  dropoutP: number;
  softmax: MaskedSoftmaxCache;
}

function same(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((s, i) => s === b[i]);
}

/** q (B, Q, Dq), k (B, K, Dk), v (B, K, V) -> out (B, Q, V). */
export function additiveAttentionForward(
  q: Tensor, k: Tensor, v: Tensor, params: Record<string, Tensor>,
  validLens: IntTensor | null = null, dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: AdditiveAttentionCache } {
  const { W_q, W_k, w_v } = params;
  const H = W_q.shape[0];
  if (!same(W_q.shape, [H, q.shape[2]]) || !same(W_k.shape, [H, k.shape[2]]) || !same(w_v.shape, [1, H])) {
    throw new RangeError(`additiveAttention: params W_q [${W_q.shape}], W_k [${W_k.shape}], w_v [${w_v.shape}] ` +
      `do not fit q [${q.shape}], k [${k.shape}] (need (H, Dq), (H, Dk), (1, H))`);
  }
  const B = q.shape[0], Q = q.shape[1], K = k.shape[1];
  const qp = matmulNT(q, W_q); // (B, Q, H)
  const kp = matmulNT(k, W_k); // (B, K, H)
  const features = zeros([B, Q, K, H]); // (B, Q, K, H)
  const tanh = zeros([B, Q, K, H]); // (B, Q, K, H)
  const F = features.data, T = tanh.data, QP = qp.data, KP = kp.data;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < Q; i++) {
      for (let j = 0; j < K; j++) {
        const o = ((b * Q + i) * K + j) * H, qo = (b * Q + i) * H, ko = (b * K + j) * H;
        for (let h = 0; h < H; h++) {
          F[o + h] = QP[qo + h] + KP[ko + h];
          T[o + h] = mathlib.tanh(F[o + h]);
        }
      }
    }
  }
  const s = matmulNT(tanh, w_v); // (B, Q, K, 1)
  const scores: Tensor = { shape: [B, Q, K], data: s.data }; // (B, Q, K)
  const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, validLens); // (B, Q, K)
  const { dropped, mask } = attentionDropout(weights, dropoutP, rng); // (B, Q, K)
  const out = matmul(dropped, v); // (B, Q, V)
  return {
    out,
    cache: { q, k, v, params, qp, kp, features, tanh, scores, weights, dropped, mask, dropoutP, softmax },
  };
}

/** dout (B, Q, V) -> dq (B, Q, Dq), dk (B, K, Dk), dv (B, K, V), grads { W_q, W_k, w_v }. */
export function additiveAttentionBackward(
  dout: Tensor, cache: AdditiveAttentionCache,
): { dq: Tensor; dk: Tensor; dv: Tensor; grads: Record<string, Tensor> } {
  const { q, k, v, tanh } = cache;
  const { W_q, W_k, w_v } = cache.params;
  const [B, Q, K, H] = tanh.shape;
  if (!same(dout.shape, [B, Q, v.shape[2]])) {
    throw new RangeError(`additiveAttentionBackward: dout must have shape (${[B, Q, v.shape[2]]}), got (${dout.shape})`);
  }
  // const out = matmul(dropped, v)
  const ddropped = matmulNT(dout, v); // (B, Q, K): sum over V
  const dv = matmulTn(cache.dropped, dout); // (B, K, V): dropped^T dout, sum over queries in order
  // const { dropped, mask } = attentionDropout(weights, dropoutP, rng)
  const dweights = attentionDropoutBackward(ddropped, cache.mask, cache.dropoutP); // (B, Q, K)
  // const { out: weights, cache: softmax } = maskedSoftmaxForward(scores, validLens)
  const dscores = maskedSoftmaxBackward(dweights, cache.softmax); // (B, Q, K)
  // const s = matmulNT(tanh, w_v), scores = s viewed as (B, Q, K)
  const dt = zeros([B, Q, K, H]); // (B, Q, K, H)
  const DS = dscores.data, WV = w_v.data, DT = dt.data;
  for (let r = 0; r < B * Q * K; r++) for (let h = 0; h < H; h++) DT[r * H + h] = DS[r] * WV[h];
  const dw_v = matmul({ shape: [1, B * Q * K], data: DS }, { shape: [B * Q * K, H], data: tanh.data }); // (1, H)
  // T[o + h] = mathlib.tanh(F[o + h])
  const dfeatures = zeros([B, Q, K, H]); // (B, Q, K, H)
  const T = tanh.data, DF = dfeatures.data;
  for (let i = 0; i < DF.length; i++) DF[i] = DT[i] * (1 - T[i] * T[i]);
  // F[o + h] = QP[qo + h] + KP[ko + h]: qp row (b, i) met every key j, kp row (b, j) every query i
  const dqp = zeros([B, Q, H]), dkp = zeros([B, K, H]); // (B, Q, H), (B, K, H)
  const DQP = dqp.data, DKP = dkp.data;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < Q; i++) {
      for (let h = 0; h < H; h++) {
        let acc = 0; // sum over keys in order
        for (let j = 0; j < K; j++) acc += DF[((b * Q + i) * K + j) * H + h];
        DQP[(b * Q + i) * H + h] = acc;
      }
    }
    for (let j = 0; j < K; j++) {
      for (let h = 0; h < H; h++) {
        let acc = 0; // sum over queries in order
        for (let i = 0; i < Q; i++) acc += DF[((b * Q + i) * K + j) * H + h];
        DKP[(b * K + j) * H + h] = acc;
      }
    }
  }
  // const kp = matmulNT(k, W_k)
  const dk = matmul(dkp, W_k); // (B, K, Dk): sum over H
  const dW_k = weightGrad(dkp, k); // (H, Dk)
  // const qp = matmulNT(q, W_q)
  const dq = matmul(dqp, W_q); // (B, Q, Dq): sum over H
  const dW_q = weightGrad(dqp, q); // (H, Dq)
  return { dq, dk, dv, grads: { W_q: dW_q, W_k: dW_k, w_v: dw_v } };
}
