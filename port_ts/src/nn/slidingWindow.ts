// Sliding-window causal attention (twin: reference/nn/sliding_window.py; docs/tiled_attention.md).
//
// Query q attends to the w most recent keys, its own included: q - w < k <= q.
//
//   plain:  scores  = q k^T / sqrt(D)                           (..., T, T)
//           weights = softmax(where(windowKeep, scores, -1e6))  (..., T, T)   every score computed
//           out     = weights v                                 (..., T, V)
//   tiled:  tiledAttention(q, k, v, tile, causal, window)       only the key tiles that the
//                                                               window reaches: O(T w) scores
//
// The plain form is the mask written out (windowKeep, a T x T table) on lessonAttention.ts's
// maskedAttention; the tiled form is the online softmax of tiledAttention.ts, whose own band rule
// (bandKeep) skips the tiles the window never reaches. They are the same maths, within a few ULP
// (the case checks it); each is bit-identical across our engines.
// Shape legend: ... leading axes (batch, heads), T steps (queries = keys), D query/key dim,
// V value dim, w the window.

import type { Tensor } from "../core/ops.ts";
import { type Keep, type MaskedAttentionCache, maskedAttentionBackward, maskedAttentionForward } from "./lessonAttention.ts";
import { type TiledAttentionCache, tiledAttentionBackward, tiledAttentionForward } from "./tiledAttention.ts";

/** (1, T, T): key k kept for query q when q - window < k <= q. */
export function windowKeep(T: number, window: number): Keep {
  if (!(Number.isInteger(window) && window >= 1)) throw new RangeError(`slidingWindow: the window must be a positive integer, got ${window}`);
  const data = new Uint8Array(T * T);
  for (let q = 0; q < T; q++) for (let k = 0; k < T; k++) data[q * T + k] = k <= q && k > q - window ? 1 : 0;
  return { shape: [1, T, T], data };
}

/** q, k (B, H, T, D), v (B, H, T, V) -> out (B, H, T, V): the mask written out. */
export function slidingWindowPlainForward(q: Tensor, k: Tensor, v: Tensor, window: number): { out: Tensor; cache: MaskedAttentionCache } {
  return maskedAttentionForward(q, k, v, windowKeep(q.shape[q.shape.length - 2], window));
}

/** dout (B, H, T, V) -> dq, dk, dv. */
export function slidingWindowPlainBackward(dout: Tensor, cache: MaskedAttentionCache): { dq: Tensor; dk: Tensor; dv: Tensor } {
  return maskedAttentionBackward(dout, cache);
}

/** q, k (..., T, D), v (..., T, V) -> out (..., T, V): the tiled online softmax over the tiles
 *  the window reaches. */
export function slidingWindowForward(q: Tensor, k: Tensor, v: Tensor, window: number, tile: number): { out: Tensor; cache: TiledAttentionCache } {
  return tiledAttentionForward(q, k, v, tile, true, window);
}

/** dout (..., T, V) -> dq, dk, dv, from the forward's stored log-sum-exp. */
export function slidingWindowBackward(dout: Tensor, cache: TiledAttentionCache): { dq: Tensor; dk: Tensor; dv: Tensor } {
  return tiledAttentionBackward(dout, cache);
}
