// Tiled attention with an online softmax: FlashAttention's forward, and its backward from the
// stored log-sum-exp (twin: reference/nn/tiled_attention.py; docs/tiled_attention.md).
//
// The scores of a query block are never stored whole: the keys arrive a tile at a time, and each
// query row keeps a running maximum m, a running sum l and a running output o, rescaled whenever
// the maximum moves. Per query row i of a block [i0, i1):
//
//   m = -inf, l = 0, o = 0
//   for each key tile [j0, j1) that the block's band reaches (keyTiles):
//     s_j   = (q_i . k_j) / sqrt(D)                     -inf where bandKeep is false
//     mNew  = max(m, max_j s_j)
//     alpha = exp(m - mNew)   (0 while m = -inf)         the rescale of what came before
//     p_j   = exp(s_j - mNew) (0 where masked)
//     l     = l * alpha + sum_j p_j                      in key order from +0
//     o     = o * alpha + sum_j p_j v_j                  in key order from +0
//     m     = mNew
//   out_i = o / l;  lse_i = m + log(l)
//
// Backward (FlashAttention-2's), from the stored lse, with Dv_i = sum over V of dout_i * out_i:
//   for each query block, each key tile it reaches:
//     p = exp(s - lse) (0 where masked);  dv_tile += p^T dout_blk;  dp = dout_blk v_tile^T;
//     ds = p * (dp - Dv);  dq_blk += (ds / sqrt(D)) k_tile;  dk_tile += (ds / sqrt(D))^T q_blk
// dq sums its key tiles in order, dk and dv their query blocks in order; each tile's own sum
// runs from +0 and is then added, as the reference's matmul then +.
//
// The same maths as dotProductAttention.ts and slidingWindow.ts, rounded differently (the
// softmax normalised once at the end, the sums tile by tile): within a few ULP of the plain form,
// not bit-identical to it. Both engines compute this one the same way, bit for bit.
// Masks (bandKeep): causal keeps key k for query q when k <= q (needs Q = K); a window w also
// requires q - k < w. Tiles that no row of a query block can reach are skipped.
// Shape legend: ... leading axes (batch, heads), N their product, Q queries, K keys, D query/key
// dim, V value dim.

import { type Tensor, zeros } from "../core/ops.ts";
import { exp, log } from "../core/mathlib.ts";

/** Whether query row r keeps key c: causal: c <= r; a window w: r - c < w as well. */
export function bandKeep(r: number, c: number, causal: boolean, window: number | null): boolean {
  if (causal && !(c <= r)) return false;
  if (window !== null && !(r - c < window)) return false;
  return true;
}

/** The key tiles [j0, j1) that some query of the block [i0, i1) reaches, in key order. */
export function keyTiles(i0: number, i1: number, K: number, tile: number, causal: boolean, window: number | null): [number, number][] {
  const lo = window === null ? 0 : Math.max(0, i0 - window + 1); // the lowest key of the block's first row
  const hi = causal ? i1 : K; // past the highest key of its last row
  const out: [number, number][] = [];
  for (let j0 = Math.floor(lo / tile) * tile; j0 < hi; j0 += tile) out.push([j0, Math.min(j0 + tile, K)]);
  return out;
}

function check(q: Tensor, k: Tensor, v: Tensor, tile: number, causal: boolean, window: number | null): void {
  const n = q.shape.length;
  if (q.shape[n - 1] !== k.shape[n - 1] || k.shape[n - 2] !== v.shape[n - 2] || k.shape.length !== n ||
    q.shape.slice(0, -2).some((s, i) => s !== k.shape[i])) {
    throw new RangeError(`tiledAttention: q [${q.shape}], k [${k.shape}], v [${v.shape}] do not fit ` +
      "(need q (..., Q, D), k (..., K, D), v (..., K, V))");
  }
  if (!(Number.isInteger(tile) && tile >= 1)) throw new RangeError(`tiledAttention: tile must be a positive integer, got ${tile}`);
  if ((causal || window !== null) && q.shape[n - 2] !== k.shape[n - 2]) {
    throw new RangeError(`tiledAttention: a causal or windowed mask needs as many queries as keys, got Q = ${q.shape[n - 2]}, K = ${k.shape[n - 2]}`);
  }
  if (window !== null && !(causal && Number.isInteger(window) && window >= 1)) {
    throw new RangeError(`tiledAttention: a window must be a positive integer on a causal mask, got ${window}`);
  }
}

export interface TiledAttentionCache {
  q: Tensor; k: Tensor; v: Tensor;
  out: Tensor; // (..., Q, V)
  lse: Tensor; // (..., Q) the log-sum-exp of each row's scores
  tile: number; causal: boolean; window: number | null;
}

/** q (..., Q, D), k (..., K, D), v (..., K, V) -> out (..., Q, V); cache.lse (..., Q). */
export function tiledAttentionForward(
  q: Tensor, k: Tensor, v: Tensor, tile: number, causal = false, window: number | null = null,
): { out: Tensor; cache: TiledAttentionCache } {
  check(q, k, v, tile, causal, window);
  const n = q.shape.length, Q = q.shape[n - 2], K = k.shape[n - 2], D = q.shape[n - 1], Vd = v.shape[n - 1];
  const N = q.data.length / (Q * D);
  const out = zeros([...q.shape.slice(0, -1), Vd]), lse = zeros(q.shape.slice(0, -1));
  const Qd = q.data, Kd = k.data, Vv = v.data, O = out.data, L = lse.data;
  const scale = Math.sqrt(D);
  const o = new Float64Array(Vd), acc = new Float64Array(Vd), s = new Float64Array(tile), p = new Float64Array(tile);
  for (let b = 0; b < N; b++) {
    for (let i0 = 0; i0 < Q; i0 += tile) {
      const i1 = Math.min(i0 + tile, Q);
      const tiles = keyTiles(i0, i1, K, tile, causal, window);
      for (let i = i0; i < i1; i++) {
        const qi = (b * Q + i) * D;
        let m = -Infinity, l = 0;
        o.fill(0);
        for (const [j0, j1] of tiles) {
          let tileMax = -Infinity;
          for (let j = j0; j < j1; j++) { // s = q_blk k_tile^T / scale, -inf where masked
            let dot = 0;
            const kj = (b * K + j) * D;
            for (let e = 0; e < D; e++) dot += Qd[qi + e] * Kd[kj + e];
            s[j - j0] = bandKeep(i, j, causal, window) ? dot / scale : -Infinity;
            if (s[j - j0] > tileMax) tileMax = s[j - j0];
          }
          const mNew = Math.max(m, tileMax);
          const alpha = m > -Infinity ? exp(m - mNew) : 0; // 0 while m = -inf
          let rs = 0;
          for (let j = j0; j < j1; j++) {
            p[j - j0] = s[j - j0] > -Infinity ? exp(s[j - j0] - mNew) : 0; // 0 where masked
            rs += p[j - j0];
          }
          l = l * alpha + rs;
          acc.fill(0);
          for (let j = j0; j < j1; j++) { // p v_tile, in key order
            const vj = (b * K + j) * Vd, pj = p[j - j0];
            for (let e = 0; e < Vd; e++) acc[e] += pj * Vv[vj + e];
          }
          for (let e = 0; e < Vd; e++) o[e] = o[e] * alpha + acc[e];
          m = mNew;
        }
        for (let e = 0; e < Vd; e++) O[(b * Q + i) * Vd + e] = o[e] / l;
        L[b * Q + i] = m + log(l);
      }
    }
  }
  return { out, cache: { q, k, v, out, lse, tile, causal, window } };
}

/** dout (..., Q, V) -> dq (..., Q, D), dk (..., K, D), dv (..., K, V). */
export function tiledAttentionBackward(dout: Tensor, cache: TiledAttentionCache): { dq: Tensor; dk: Tensor; dv: Tensor } {
  const { q, k, v, out, lse, tile, causal, window } = cache;
  if (dout.shape.length !== out.shape.length || dout.shape.some((s, i) => s !== out.shape[i])) {
    throw new RangeError(`tiledAttentionBackward: dout must have the output's shape (${out.shape}), got (${dout.shape})`);
  }
  const n = q.shape.length, Q = q.shape[n - 2], K = k.shape[n - 2], D = q.shape[n - 1], Vd = v.shape[n - 1];
  const N = q.data.length / (Q * D);
  const dq = zeros(q.shape), dk = zeros(k.shape), dv = zeros(v.shape);
  const Qd = q.data, Kd = k.data, Vv = v.data, G = dout.data, Od = out.data, L = lse.data;
  const dQ = dq.data, dK = dk.data, dV = dv.data;
  const scale = Math.sqrt(D);
  const dvec = new Float64Array(Q);
  for (let b = 0; b < N; b++) {
    for (let i = 0; i < Q; i++) { // the row's sum of dout * out
      let acc = 0;
      for (let e = 0; e < Vd; e++) acc += G[(b * Q + i) * Vd + e] * Od[(b * Q + i) * Vd + e];
      dvec[i] = acc;
    }
    for (let i0 = 0; i0 < Q; i0 += tile) {
      const i1 = Math.min(i0 + tile, Q), bq = i1 - i0;
      for (const [j0, j1] of keyTiles(i0, i1, K, tile, causal, window)) {
        const bk = j1 - j0;
        // s = q k^T / scale, masked; p = exp(s - lse), the forward's weights recomputed
        const p = new Float64Array(bq * bk), dqk = new Float64Array(bq * bk);
        for (let i = i0; i < i1; i++) {
          for (let j = j0; j < j1; j++) {
            let dot = 0;
            for (let e = 0; e < D; e++) dot += Qd[(b * Q + i) * D + e] * Kd[(b * K + j) * D + e];
            const s = bandKeep(i, j, causal, window) ? dot / scale : -Infinity;
            p[(i - i0) * bk + j - j0] = s > -Infinity ? exp(s - L[b * Q + i]) : 0;
          }
        }
        // o = o * alpha + p v_tile: dv_tile += p^T dout_blk (sum over the block's rows)
        for (let j = j0; j < j1; j++) {
          for (let e = 0; e < Vd; e++) {
            let acc = 0;
            for (let i = i0; i < i1; i++) acc += p[(i - i0) * bk + j - j0] * G[(b * Q + i) * Vd + e];
            dV[(b * K + j) * Vd + e] = dV[(b * K + j) * Vd + e] + acc;
          }
        }
        // dp = dout_blk v_tile^T; ds = p * (dp - Dv); dqk = ds / scale (inverts: s = q k^T / scale)
        for (let i = i0; i < i1; i++) {
          for (let j = j0; j < j1; j++) {
            let dp = 0;
            for (let e = 0; e < Vd; e++) dp += G[(b * Q + i) * Vd + e] * Vv[(b * K + j) * Vd + e];
            const at = (i - i0) * bk + j - j0;
            dqk[at] = (p[at] * (dp - dvec[i])) / scale;
          }
        }
        for (let i = i0; i < i1; i++) { // dq_blk += dqk k_tile (sum over the tile's keys)
          for (let e = 0; e < D; e++) {
            let acc = 0;
            for (let j = j0; j < j1; j++) acc += dqk[(i - i0) * bk + j - j0] * Kd[(b * K + j) * D + e];
            dQ[(b * Q + i) * D + e] = dQ[(b * Q + i) * D + e] + acc;
          }
        }
        for (let j = j0; j < j1; j++) { // dk_tile += dqk^T q_blk (sum over the block's rows)
          for (let e = 0; e < D; e++) {
            let acc = 0;
            for (let i = i0; i < i1; i++) acc += dqk[(i - i0) * bk + j - j0] * Qd[(b * Q + i) * D + e];
            dK[(b * K + j) * D + e] = dK[(b * K + j) * D + e] + acc;
          }
        }
      }
    }
  }
  return { dq, dk, dv };
}
