// Masked softmax over the last axis, as the book's masked_softmax (twin: masked_softmax.py).
// Shapes: x (B, ..., Q, K); validLens null, (B,) (one length per batch row, shared by every
// query) or (B, Q) (one length per query row). Key k of a row is kept when k < len; masked
// scores are replaced by -1e6, not -Infinity, so a row with length 0 gets uniform weights 1/K.

import { type Tensor, type IntTensor, empty, sizeOf } from "../core/ops.ts";
import { exp } from "../core/mathlib.ts";

export const MASK_VALUE = -1e6;

export interface MaskedSoftmaxCache {
  out: Tensor;
  keep: Uint8Array | null; // 1 where kept, per element of x; null when unmasked
}

/** The keep mask flattened like x: 1 where key k < the row's valid length. */
export function keepMask(shape: readonly number[], validLens: IntTensor | null): Uint8Array | null {
  if (validLens === null) return null;
  const B = shape[0], Q = shape[shape.length - 2], K = shape[shape.length - 1];
  const rows = sizeOf(shape) / K;
  const perBatch = rows / B; // (middle axes) * Q rows per batch element
  const oneD = validLens.shape.length === 1 && validLens.shape[0] === B;
  const twoD = validLens.shape.length === 2 && validLens.shape[0] === B && validLens.shape[1] === Q;
  if (!oneD && !twoD) {
    throw new RangeError(`validLens must have shape (${B},) or (${B}, ${Q}), got (${validLens.shape})`);
  }
  const keep = new Uint8Array(rows * K);
  for (let r = 0; r < rows; r++) {
    const b = Math.floor(r / perBatch);
    const len = oneD ? validLens.data[b] : validLens.data[b * Q + (r % Q)];
    for (let k = 0; k < K; k++) keep[r * K + k] = k < len ? 1 : 0;
  }
  return keep;
}

export function maskedSoftmaxForward(x: Tensor, validLens: IntTensor | null = null): { out: Tensor; cache: MaskedSoftmaxCache } {
  const K = x.shape[x.shape.length - 1];
  const keep = keepMask(x.shape, validLens);
  const out = empty(x.shape); // every element written
  const X = x.data, O = out.data;
  for (let r = 0; r < X.length / K; r++) {
    const o = r * K;
    let max = -Infinity;
    for (let k = 0; k < K; k++) {
      const v = keep === null || keep[o + k] ? X[o + k] : MASK_VALUE;
      O[o + k] = v;
      if (v > max) max = v;
    }
    let sum = 0;
    for (let k = 0; k < K; k++) {
      const e = exp(O[o + k] - max);
      O[o + k] = e;
      sum += e;
    }
    for (let k = 0; k < K; k++) O[o + k] = O[o + k] / sum;
  }
  return { out, cache: { out, keep } };
}

/** dout (B, ..., Q, K) -> dx of x's shape. Per row, with y = out:
 * dx = y * (dout - sum_k dout_k y_k), the sum in key order; 0 where the forward masked x. */
export function maskedSoftmaxBackward(dout: Tensor, cache: MaskedSoftmaxCache): Tensor {
  const { out, keep } = cache;
  if (dout.shape.length !== out.shape.length || dout.shape.some((s, i) => s !== out.shape[i])) {
    throw new RangeError(`maskedSoftmaxBackward: dout must have the output's shape (${out.shape}), got (${dout.shape})`);
  }
  const K = out.shape[out.shape.length - 1];
  const dx = empty(out.shape); // every element written
  const Y = out.data, G = dout.data, DX = dx.data;
  for (let r = 0; r < Y.length / K; r++) {
    const o = r * K;
    // O[o + k] = O[o + k] / sum, O = exp(v - max): the shift by the row max cancels
    let dot = 0;
    for (let k = 0; k < K; k++) dot += G[o + k] * Y[o + k];
    for (let k = 0; k < K; k++) DX[o + k] = Y[o + k] * (G[o + k] - dot);
    if (keep === null) continue;
    // v = keep[o + k] ? X[o + k] : MASK_VALUE: a masked score is replaced by a constant
    for (let k = 0; k < K; k++) if (!keep[o + k]) DX[o + k] = 0;
  }
  return dx;
}
