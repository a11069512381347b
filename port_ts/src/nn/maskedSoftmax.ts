// Masked softmax over the last axis, as the book's masked_softmax (twin: masked_softmax.py).
// Shapes: x (B, ..., Q, K); validLens null, (B,) (one length per batch row, shared by every
// query) or (B, Q) (one length per query row). Key k of a row is kept when k < len; masked
// scores are replaced by -1e6, not -Infinity, so a row with length 0 gets uniform weights 1/K.

import { type Tensor, type IntTensor, empty, sizeOf } from "../core/ops.ts";
import { expAll, softmaxBackwardRows, softmaxNormalizeRows, softmaxShiftRows } from "../kernels/rows.ts";

export const MASK_VALUE = -1e6;

export interface MaskedSoftmaxCache {
  out: Tensor;
  lens: RowLengths | null; // how many keys of each row are kept; null when unmasked
  kept: Float64Array | null; // (rows,) keptIn of each row, as the forward read it; null when unmasked
}

/** validLens read per row of x (B, ..., Q, K): row r belongs to batch element r / perBatch and,
 * for 2-D lengths (B, Q), to query r mod Q. */
export interface RowLengths {
  data: Int32Array;
  perBatch: number; // rows per batch element: (middle axes) * Q
  Q: number;
  twoD: boolean;
}

function rowLengths(shape: readonly number[], validLens: IntTensor | null): RowLengths | null {
  if (validLens === null) return null;
  const B = shape[0], Q = shape[shape.length - 2], K = shape[shape.length - 1];
  const oneD = validLens.shape.length === 1 && validLens.shape[0] === B;
  const twoD = validLens.shape.length === 2 && validLens.shape[0] === B && validLens.shape[1] === Q;
  if (!oneD && !twoD) {
    throw new RangeError(`validLens must have shape (${B},) or (${B}, ${Q}), got (${validLens.shape})`);
  }
  return { data: validLens.data, perBatch: sizeOf(shape) / K / B, Q, twoD };
}

/** The keys kept in row r: its length clamped to [0, K] (keys k < len are kept). */
function keptIn(lens: RowLengths, r: number, K: number): number {
  const b = Math.floor(r / lens.perBatch);
  const len = lens.twoD ? lens.data[b * lens.Q + (r % lens.Q)] : lens.data[b];
  return len < 0 ? 0 : len > K ? K : len;
}

/** The keep mask flattened like x: 1 where key k < the row's valid length (the rule
 * maskedSoftmaxForward applies row by row). */
export function keepMask(shape: readonly number[], validLens: IntTensor | null): Uint8Array | null {
  const lens = rowLengths(shape, validLens);
  if (lens === null) return null;
  const K = shape[shape.length - 1], rows = sizeOf(shape) / K;
  const keep = new Uint8Array(rows * K);
  for (let r = 0; r < rows; r++) keep.fill(1, r * K, r * K + keptIn(lens, r, K));
  return keep;
}

/** keptIn of every row r = 0 .. rows-1, once for the forward and its backward. */
function keptCounts(lens: RowLengths, rows: number, K: number): Float64Array {
  const kept = empty([rows]).data; // every element written
  for (let r = 0; r < rows; r++) kept[r] = keptIn(lens, r, K);
  return kept;
}

/** Per row: v = x where kept, else MASK_VALUE; out = exp(v - max v) / (in-order sum of those).
 * The masked keys are the row's last K - n (n = keptIn), so their v is one value, MASK_VALUE.
 * The shifted scores of every row are written first, their exps taken in one pass over the
 * tensor (mathlib's exp), then each row summed in key order and divided (kernels/rows.ts). */
export function maskedSoftmaxForward(x: Tensor, validLens: IntTensor | null = null): { out: Tensor; cache: MaskedSoftmaxCache } {
  const K = x.shape[x.shape.length - 1];
  const lens = rowLengths(x.shape, validLens);
  const out = empty(x.shape); // every element written
  const kept = lens === null ? null : keptCounts(lens, x.data.length / K, K);
  softmaxShiftRows(x.data, out.data, kept, K, MASK_VALUE); // shifted = v - max v, v = x where kept, else MASK_VALUE
  expAll(out.data); // e = exp(shifted)
  softmaxNormalizeRows(out.data, K); // out = e / (in-order sum of e)
  return { out, cache: { out, lens, kept } };
}

/** dout (B, ..., Q, K) -> dx of x's shape. Per row, with y = out:
 * dx = y * (dout - sum_k dout_k y_k), the sum in key order; 0 where the forward masked x. */
export function maskedSoftmaxBackward(dout: Tensor, cache: MaskedSoftmaxCache): Tensor {
  const { out, kept } = cache;
  if (dout.shape.length !== out.shape.length || dout.shape.some((s, i) => s !== out.shape[i])) {
    throw new RangeError(`maskedSoftmaxBackward: dout must have the output's shape (${out.shape}), got (${dout.shape})`);
  }
  const K = out.shape[out.shape.length - 1];
  const dx = empty(out.shape); // every element written
  softmaxBackwardRows(dout.data, out.data, dx.data, kept, K); // dx = out (dout - dot) where kept, else 0
  return dx;
}
