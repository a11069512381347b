// Rotary position embeddings, RoPE (twin: reference/nn/rope.py): each (even, odd) feature pair of
// a query or key at position p is rotated by the angle p * w_i, w_i = 10000^(-2i/d).
//
//   div_i     = 10000 ** ((2i) / d)                    (d/2,)    i = 0..d/2-1, 1 / w_i
//   angle     = p / div_i                              (T, d/2)  p the position of step t
//   c, s      = cos(angle), sin(angle)                 (T, d/2)
//   out[2i]   = x[2i] * c - x[2i+1] * s                (..., T, d)
//   out[2i+1] = x[2i] * s + x[2i+1] * c
//   rope attention: out = attention(rope(q, q positions), rope(k, k positions), v)
//
// Shape legend: B batch, H heads, T steps (the second-to-last axis of x), Q queries, K keys, D head
// dim, d features (even), V value dim. Positions default to 0..T-1; any integer positions may be
// given (a cached prefix starts later). The angles are the sinusoidal table's: at positions
// 0..T-1, c and s are its odd and even columns bit for bit (the same powLn, the same division,
// mathlib's sin and cos). A rotation moves the scores of two positions by their gap alone:
// q_m . k_n after RoPE depends on m - n, not on m and n.
// Backward: the rotation's transpose, dx[2i] = dout[2i] * c + dout[2i+1] * s,
// dx[2i+1] = dout[2i+1] * c - dout[2i] * s.

import { type Tensor, type IntTensor, zeros } from "../core/ops.ts";
import { cos, powLn, sin } from "../core/mathlib.ts";
import { LN_BASE } from "./positionalEncoding.ts";
import { type DotProductAttentionCache, dotProductAttentionBackward, dotProductAttentionForward } from "./dotProductAttention.ts";

export interface RopeCache {
  cos: Tensor; // (T, d/2)
  sin: Tensor; // (T, d/2)
  positions: IntTensor; // (T,)
}

export interface RopeAttentionCache {
  qRope: RopeCache;
  kRope: RopeCache;
  attn: DotProductAttentionCache;
  weights: Tensor; // (B, ..., Q, K)
}

/** { cos, sin }, each (T, d/2), of the angles p / 10000^((2i) / d) at the given positions (T,). */
export function ropeAngles(positions: IntTensor, d: number): { cos: Tensor; sin: Tensor } {
  if (!Number.isInteger(d) || d % 2 !== 0 || d <= 0) {
    throw new RangeError(`rope needs an even, positive feature dim d (pairs of features), got d = ${d}`);
  }
  if (positions.shape.length !== 1 || !(positions.data instanceof Int32Array)) {
    throw new RangeError(`rope needs positions as a 1-D array of integers, got shape [${positions.shape}]`);
  }
  const T = positions.shape[0], half = d / 2;
  const div = new Float64Array(half); // 10000 ** ((2i) / d) = 1 / w_i
  for (let i = 0; i < half; i++) div[i] = powLn(LN_BASE, (2 * i) / d);
  const c = zeros([T, half]), s = zeros([T, half]);
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < half; i++) {
      const angle = positions.data[t] / div[i];
      c.data[t * half + i] = cos(angle);
      s.data[t * half + i] = sin(angle);
    }
  }
  return { cos: c, sin: s };
}

/** x (..., T, d) -> { out (..., T, d), cache }: pair (2i, 2i+1) of step t rotated by positions[t] * w_i. */
export function ropeForward(x: Tensor, positions: IntTensor | null = null): { out: Tensor; cache: RopeCache } {
  if (x.shape.length < 2) throw new RangeError(`ropeForward needs x of shape (..., T, d), got [${x.shape}]`);
  const T = x.shape[x.shape.length - 2], d = x.shape[x.shape.length - 1], half = d / 2;
  const pos: IntTensor = positions ?? { shape: [T], data: Int32Array.from({ length: T }, (_, t) => t) };
  if (pos.shape.length !== 1 || pos.shape[0] !== T) {
    throw new RangeError(`ropeForward needs one position per step: x has T = ${T} steps, positions [${pos.shape}]`);
  }
  const { cos: c, sin: s } = ropeAngles(pos, d); // (T, d/2) each
  const out = zeros(x.shape), X = x.data, O = out.data;
  for (let r = 0; r < X.length / d; r++) { // every row (..., t) of x
    const o = r * d, at = (r % T) * half;
    for (let i = 0; i < half; i++) {
      const a = o + 2 * i, b = o + 2 * i + 1; // the pair (2i, 2i + 1)
      const ci = c.data[at + i], si = s.data[at + i];
      O[a] = X[a] * ci - X[b] * si;
      O[b] = X[a] * si + X[b] * ci;
    }
  }
  return { out, cache: { cos: c, sin: s, positions: pos } };
}

/** dout (..., T, d) -> dx (..., T, d): the rotation by -angle (the forward's transpose). */
export function ropeBackward(dout: Tensor, cache: RopeCache): Tensor {
  const [T, half] = cache.cos.shape, d = 2 * half, n = dout.shape.length;
  if (n < 2 || dout.shape[n - 2] !== T || dout.shape[n - 1] !== d) {
    throw new RangeError(`ropeBackward needs dout of shape (..., ${T}, ${d}), got [${dout.shape}]`);
  }
  const dx = zeros(dout.shape), G = dout.data, D = dx.data;
  for (let r = 0; r < G.length / d; r++) {
    const o = r * d, at = (r % T) * half;
    for (let i = 0; i < half; i++) {
      const a = o + 2 * i, b = o + 2 * i + 1;
      const ci = cache.cos.data[at + i], si = cache.sin.data[at + i];
      D[a] = G[a] * ci + G[b] * si; // inverts O[a] = X[a] * ci - X[b] * si and O[b] = X[a] * si + X[b] * ci
      D[b] = G[b] * ci - G[a] * si;
    }
  }
  return dx;
}

/** Scaled dot-product attention of RoPE-rotated queries and keys: q (B, ..., Q, D), k (B, ..., K, D),
 *  v (B, ..., K, V) -> { out (B, ..., Q, V), cache }; cache.weights the weights. */
export function ropeAttentionForward(
  q: Tensor, k: Tensor, v: Tensor, validLens: IntTensor | null = null,
  qPositions: IntTensor | null = null, kPositions: IntTensor | null = null,
): { out: Tensor; cache: RopeAttentionCache } {
  const { out: qRot, cache: qRope } = ropeForward(q, qPositions);
  const { out: kRot, cache: kRope } = ropeForward(k, kPositions);
  const { out, cache: attn } = dotProductAttentionForward(qRot, kRot, v, validLens);
  return { out, cache: { qRope, kRope, attn, weights: attn.weights } };
}

/** dout (B, ..., Q, V) -> { dq, dk, dv }: attention's backward, then each rotation's. */
export function ropeAttentionBackward(dout: Tensor, cache: RopeAttentionCache): { dq: Tensor; dk: Tensor; dv: Tensor } {
  const { dq, dk, dv } = dotProductAttentionBackward(dout, cache.attn); // inverts the attention of qRot, kRot, v
  return { dq: ropeBackward(dq, cache.qRope), dk: ropeBackward(dk, cache.kRope), dv };
}
