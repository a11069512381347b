// Grouped-query attention: H query heads share G key/value heads, no biases (twin:
// reference/nn/grouped_query_attention.py).
//
// Multi-head attention whose key and value projections are shared by groups of R = H / G heads:
// query head i reads key/value head i / R (rounded down), as PyTorch's
// scaled_dot_product_attention(..., enable_gqa=True) pairs them (repeat_interleave on the head axis).
//
//   W_k', W_v' = repeatHeads(W_k, G, R), repeatHeads(W_v, G, R)       (d, dkv_in)   rows of head g, R times in a row
//   out = multiHeadAttention(x_q, x_kv, {W_q, W_k', W_v', W_o}, H, lens)   (B, Q, d)
//
// Each repeated row computes the same sums as the shared head's, so the keys and values are those
// of G heads, repeated. Shape legend: B batch, Q queries, K keys, H query heads, G key/value heads
// (G divides H), D head dim, d model dim (d = H * D), dq_in / dkv_in the input feature dims. Params:
// W_q (d, dq_in), W_k (G*D, dkv_in), W_v (G*D, dkv_in), W_o (d, d). G = H is multi-head attention,
// bit for bit; G = 1 multi-query attention. validLens and dropout as in multi-head attention.
//
// The backward is multi-head attention's, then each shared head's weight gradient is the sum of its
// R copies' (sumGroups, in head order from +0).

import type { Generator } from "../core/rng.ts";
import { type IntTensor, type Tensor, empty } from "../core/ops.ts";
import { type MultiHeadAttentionCache, multiHeadAttentionBackward, multiHeadAttentionForward } from "./multiHeadAttention.ts";

export interface GroupedQueryAttentionCache {
  mha: MultiHeadAttentionCache; // of the repeated weights
  kvHeads: number;
  weights: Tensor; // (B, H, Q, K) before dropout
}

/** (G*D, n) -> (G*r*D, n): the rows of each head (D of them), r times in a row. */
export function repeatHeads(W: Tensor, groups: number, r: number): Tensor {
  const [rows, n] = W.shape;
  const size = (rows / groups) * n; // one head's rows
  const out = empty([rows * r, n]); // every element written
  for (let g = 0; g < groups; g++) {
    const head = W.data.subarray(g * size, (g + 1) * size);
    for (let i = 0; i < r; i++) out.data.set(head, (g * r + i) * size);
  }
  return out;
}

/** (G*r*D, n) -> (G*D, n): each head's r copies summed in head order (repeatHeads' adjoint). */
export function sumGroups(dW: Tensor, groups: number, r: number): Tensor {
  const [rows, n] = dW.shape;
  const size = (rows / (groups * r)) * n; // one head's rows
  const out = empty([rows / r, n]); // every element written
  for (let g = 0; g < groups; g++) {
    for (let e = 0; e < size; e++) {
      let acc = 0;
      for (let i = 0; i < r; i++) acc += dW.data[(g * r + i) * size + e];
      out.data[g * size + e] = acc;
    }
  }
  return out;
}

/** xQ (B, Q, dq_in), xKV (B, K, dkv_in) -> out (B, Q, d). */
export function groupedQueryAttentionForward(
  xQ: Tensor, xKV: Tensor, params: Record<string, Tensor>, numHeads: number, kvHeads: number,
  validLens: IntTensor | null = null, dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: GroupedQueryAttentionCache } {
  const d = params.W_q.shape[0];
  if (!Number.isInteger(numHeads) || !Number.isInteger(kvHeads) || numHeads < 1 || kvHeads < 1 || d % numHeads !== 0 || numHeads % kvHeads !== 0) {
    throw new RangeError(`groupedQueryAttention: model dim d = ${d} must be divisible by numHeads = ${numHeads}, ` +
      `and numHeads by kvHeads = ${kvHeads}; choose heads dividing d and kvHeads dividing heads`);
  }
  const R = numHeads / kvHeads, shared = [kvHeads * (d / numHeads), xKV.shape[xKV.shape.length - 1]];
  for (const name of ["W_k", "W_v"]) {
    const t = params[name];
    if (t.shape.length !== 2 || t.shape[0] !== shared[0] || t.shape[1] !== shared[1]) {
      throw new RangeError(`groupedQueryAttention: ${name} must have shape (${shared}), got (${t.shape})`);
    }
  }
  const repeated = { ...params, W_k: repeatHeads(params.W_k, kvHeads, R), W_v: repeatHeads(params.W_v, kvHeads, R) };
  const { out, cache } = multiHeadAttentionForward(xQ, xKV, repeated, numHeads, validLens, dropoutP, rng);
  return { out, cache: { mha: cache, kvHeads, weights: cache.weights } };
}

/** dout (B, Q, d) -> dxQ (B, Q, dq_in), dxKv (B, K, dkv_in), grads {W_q, W_k, W_v, W_o}. */
export function groupedQueryAttentionBackward(
  dout: Tensor, cache: GroupedQueryAttentionCache,
): { dxQ: Tensor; dxKv: Tensor; grads: Record<string, Tensor> } {
  const { dxQ, dxKv, grads } = multiHeadAttentionBackward(dout, cache.mha);
  const G = cache.kvHeads, R = cache.mha.numHeads / G;
  return { dxQ, dxKv, grads: { ...grads, W_k: sumGroups(grads.W_k, G, R), W_v: sumGroups(grads.W_v, G, R) } };
}
