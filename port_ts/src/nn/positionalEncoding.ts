// Sinusoidal positional encoding (twin: reference/nn/positional_encoding.py).
//
//   div_j      = 10000 ** ((2j) / d)              (d/2,)   one pow per frequency, j = 0..d/2-1
//   angle      = i / div_j                        (L, d/2) position i times w_j = 1 / div_j
//   P[i, 2j]   = sin(angle[i, j])                 (L, d)   even features: sine
//   P[i, 2j+1] = cos(angle[i, j])                 (L, d)   odd features: cosine
//   out        = dropout(x + P[:T])               (B, T, d)
//   sim        = (P P^T)[i, j] / (|P_i| |P_j|)    (L, L)   cosine similarity of two positions
//
// Shape legend: B batch, T steps, L table length (positions), d model dim (even).
// Written as in the reference: (2j) / d is one rounded division, div_j one mathlib powLn (exp of
// (2j)/d times ln 10000 held as a double pair), the angle one division; float64 throughout. Rows do not depend
// on the table's length, so x + P[:T] uses a table of exactly T rows. Dot products and norms are
// in-order sums over the d features.
// Backward: the table is a constant, so dx = d summed = dropoutBackward(dout) (a copy at p = 0).

import type { Generator } from "../core/rng.ts";
import { type Tensor, empty, zeros, matmulNT, sumLast } from "../core/ops.ts";
import { dropoutBackward, dropoutForward } from "./dropout.ts";
import { cos, powLn, sin } from "../core/mathlib.ts";

export const BASE = 10000;
export const LN_BASE: [number, number] = [9.210340371976184, -8.683024893528997e-16]; // ln 10000 = hi + lo: the nearest double, then the rest's

/** P (maxLen, d) in float64: sin on even features, cos on odd ones. */
export function sinusoidalTable(maxLen: number, d: number): Tensor {
  if (!Number.isInteger(d) || d % 2 !== 0 || d <= 0) {
    throw new RangeError(`sinusoidalTable needs an even, positive model dim d (a sin and a cos per frequency), got d = ${d}`);
  }
  if (!Number.isInteger(maxLen) || maxLen < 0) {
    throw new RangeError(`sinusoidalTable needs maxLen >= 0, got ${maxLen}`);
  }
  const half = d / 2;
  const div = new Float64Array(half); // 10000 ** ((2j) / d) = 1 / w_j
  for (let j = 0; j < half; j++) div[j] = powLn(LN_BASE, (2 * j) / d);
  const P = zeros([maxLen, d]);
  for (let i = 0; i < maxLen; i++) {
    for (let j = 0; j < half; j++) {
      const angle = i / div[j];
      P.data[i * d + 2 * j] = sin(angle);
      P.data[i * d + 2 * j + 1] = cos(angle);
    }
  }
  return P;
}

export interface PositionalEncodingCache {
  dropout: ReturnType<typeof dropoutForward>["cache"];
  mask: Tensor | null; // the dropout keep mask, null when p = 0
}

/** x (B, T, d) -> { out (B, T, d), cache }: rows 0..T-1 of the table added, then dropout. */
export function positionalEncodingForward(
  x: Tensor, dropoutP = 0, rng: Generator | null = null,
): { out: Tensor; cache: PositionalEncodingCache } {
  if (x.shape.length !== 3) {
    throw new RangeError(`positionalEncodingForward needs x of shape (B, T, d), got [${x.shape}]`);
  }
  const [B, T, d] = x.shape;
  const P = sinusoidalTable(T, d); // (T, d)
  const summed = empty(x.shape); // (B, T, d)  every element written
  const rows = T * d;
  for (let b = 0; b < B; b++) {
    for (let r = 0; r < rows; r++) summed.data[b * rows + r] = x.data[b * rows + r] + P.data[r];
  }
  // p = 0: the dropout is the identity and summed is this function's own, so it is the output
  // itself (dropoutForward would copy it)
  if (dropoutP === 0) return { out: summed, cache: { dropout: { mask: null, p: 0 }, mask: null } };
  const { out, cache } = dropoutForward(summed, dropoutP, rng); // backward: d summed = d out via dropout
  return { out, cache: { dropout: cache, mask: cache.mask } };
}

/** Returns dx (B, T, d): the gradient passes the addition unchanged, through the dropout. */
export function positionalEncodingBackward(dout: Tensor, cache: PositionalEncodingCache): Tensor {
  if (dout.shape.length !== 3) {
    throw new RangeError(`positionalEncodingBackward needs dout of shape (B, T, d), got [${dout.shape}]`);
  }
  return dropoutBackward(dout, cache.dropout); // inverts: out = dropout(x + P[:T])
}

/** Cosine similarity of every pair of rows of P (L, d) -> (L, L). */
export function positionSimilarity(P: Tensor): Tensor {
  const L = P.shape[0];
  const dots = matmulNT(P, P); // (L, L)  in-order over d
  const sq = zeros(P.shape);
  for (let i = 0; i < sq.data.length; i++) sq.data[i] = P.data[i] * P.data[i];
  const norms = sumLast(sq); // (L,)    in-order over d, then the square root
  for (let i = 0; i < L; i++) norms.data[i] = Math.sqrt(norms.data[i]);
  const sim = zeros([L, L]);
  for (let i = 0; i < L; i++) {
    for (let j = 0; j < L; j++) sim.data[i * L + j] = dots.data[i * L + j] / (norms.data[i] * norms.data[j]);
  }
  return sim;
}
