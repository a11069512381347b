// The row kernels: a training step's elementwise passes over rows (port only: the reference's are
// NumPy expressions, reference/nn/*.py). nn/ calls one function per pass; each is written twice:
//   - in JavaScript, the function ...Js just above it: the loops in the order of the nn module's
//     formulas, one rounded operation at a time. That is the kernel's specification, and what runs
//     wherever the Wasm form cannot;
//   - in WebAssembly SIMD (kernels/wasm.ts, rowModuleBytes): the same operations in the same
//     order, two rows (or two columns) in the two lanes of an f64x2, each lane a different element
//     or output, never two terms of one sum.
// The Wasm form runs when every array lies in the kernels' memory (a pinned workspace's tensors,
// kernels/memory.ts), the shape suits it, and the JavaScript forms are not forced
// (productEngine.mode "js"); else the JavaScript form runs. Either way the bits are the same:
// port_ts/test/kernels/rows.test.ts runs both on the same inputs over many shapes.

import { exp } from "../core/mathlib.ts";
import { reserveScratch, scratch, wasm } from "./memory.ts";
import { productEngine } from "./product.ts";
import { ROW_MODULE } from "./wasm.ts";

const rows = wasm === null ? null : wasm.rows;

/** Whether the Wasm row kernels exist (WebAssembly SIMD), their module's size, and how many calls
 * ran in Wasm (a test resets it, so a silent fallback cannot pass for the kernels). A setting of
 * the port, not a function of the maths: the reference has no twin. */
export const rowEngine = { simd: rows !== null, moduleBytes: ROW_MODULE.length, wasmRuns: 0 };

/** x's byte address in the kernels' memory, or -1 when it is elsewhere or the JavaScript forms
 * are forced. */
function addressOf(x: Float64Array): number {
  return rows !== null && productEngine.mode !== "js" && x.buffer === wasm!.memory.buffer ? x.byteOffset : -1;
}

/** Whether every address is in the kernels' memory. */
function allIn(...addresses: number[]): boolean {
  return addresses.every((a) => a >= 0);
}

/** The kernels' memory with `values` copied to its bottom, one after another (a parameter vector
 * the Wasm form reads at address 0: bias, gamma, beta), or null where they do not fit below a
 * pinned workspace (reserved for the next step). */
function copiedIn(...values: Float64Array[]): Float64Array | null {
  const H = scratch(values.reduce((n, v) => n + v.length, 0));
  if (H !== null) values.reduce((at, v) => { H.set(v, at); return at + v.length; }, 0);
  return H;
}

// ---- nn/ffn.ts: the first linear's bias and the ReLU, and the ReLU's backward ----

/** H (rows, F) = relu(H + b) row by row, b (F,): hPre = H + b, then hPre where hPre > 0, else +0. */
function biasReluJs(H: Float64Array, b: Float64Array, F: number): void {
  for (let r = 0; r < H.length; r += F) {
    for (let o = 0; o < F; o++) {
      const v = H[r + o] + b[o];
      H[r + o] = v > 0 ? v : 0;
    }
  }
}

/** biasReluJs; in Wasm two columns a lane pair (F even). */
export function biasReluRows(H: Float64Array, b: Float64Array, F: number): void {
  reserveScratch(F); // b's copy, below the next step's workspace
  const bias = allIn(addressOf(H)) && F % 2 === 0 && H.length > 0 && H.length % F === 0 ? copiedIn(b.subarray(0, F)) : null;
  if (bias === null) return biasReluJs(H, b, F);
  rowEngine.wasmRuns++;
  rows!.biasRelu(addressOf(H), 0, H.length / F, F);
}

/** D (rows, F) gated where X > 0 (D where X > 0, else +0), and DB (F,) the gated columns' sums over
 * the rows in order from +0 (DB starts at +0). */
function reluGateJs(D: Float64Array, X: Float64Array, DB: Float64Array, F: number): void {
  for (let r = 0; r < D.length; r += F) {
    for (let o = 0; o < F; o++) {
      const g = X[r + o] > 0 ? D[r + o] : 0;
      D[r + o] = g;
      DB[o] += g;
    }
  }
}

/** reluGateJs; in Wasm two columns a lane pair (F even). */
export function reluGateRows(D: Float64Array, X: Float64Array, DB: Float64Array, F: number): void {
  const d = addressOf(D), x = addressOf(X), db = addressOf(DB);
  if (!allIn(d, x, db) || F % 2 !== 0 || D.length === 0 || D.length % F !== 0 || X.length !== D.length) return reluGateJs(D, X, DB, F);
  rowEngine.wasmRuns++;
  rows!.reluGate(d, x, db, D.length / F, F);
}

// ---- nn/layerNorm.ts ----

/** Layer norm over rows of d, as nn/layerNorm.ts's header writes it: v = x (or x + residual R),
 * mean = (in-order sum of v) / d, xc = v - mean, rstd = 1 / sqrt((in-order sum of xc xc) / d + eps),
 * H = xhat = xc rstd, O = out = xhat gamma + beta; M = mean, S = rstd per row. */
function layerNormJs(X: Float64Array, R: Float64Array | null, G: Float64Array, B: Float64Array, H: Float64Array,
  O: Float64Array, M: Float64Array, S: Float64Array, d: number, eps: number): void {
  for (let r = 0; r < M.length; r++) {
    const o = r * d;
    let sum = 0;
    for (let k = 0; k < d; k++) {
      const v = R === null ? X[o + k] : X[o + k] + R[o + k]; // the row normalised: x, or x + residual
      H[o + k] = v; // for now
      sum += v;
    }
    const m = sum / d;
    let sq = 0;
    for (let k = 0; k < d; k++) {
      const c = H[o + k] - m;
      H[o + k] = c; // xc for now
      sq += c * c;
    }
    const s = 1 / Math.sqrt(sq / d + eps);
    for (let k = 0; k < d; k++) {
      H[o + k] = H[o + k] * s; // xhat
      O[o + k] = H[o + k] * G[k] + B[k];
    }
    M[r] = m;
    S[r] = s;
  }
}

/** layerNormJs; in Wasm two rows a lane pair. */
export function layerNormRows(X: Float64Array, R: Float64Array | null, G: Float64Array, B: Float64Array, H: Float64Array,
  O: Float64Array, M: Float64Array, S: Float64Array, d: number, eps: number): void {
  reserveScratch(2 * d); // gamma's and beta's copies, below the next step's workspace
  const x = addressOf(X), r = R === null ? 0 : addressOf(R), h = addressOf(H), o = addressOf(O), m = addressOf(M), s = addressOf(S);
  const params = allIn(x, r, h, o, m, s) && d >= 1 && M.length >= 1 ? copiedIn(G.subarray(0, d), B.subarray(0, d)) : null;
  if (params === null) return layerNormJs(X, R, G, B, H, O, M, S, d, eps);
  rowEngine.wasmRuns++;
  rows!.lnForward(x, r, R === null ? 0 : 1, 0, d * 8, h, o, m, s, M.length, d, eps);
}

/** Layer norm's backward over rows of d (D = dout, H = xhat, G = gamma, S = rstd): per row
 * dxhat = dout gamma, DX = ((dxhat - mean(dxhat)) - xhat mean(dxhat xhat)) rstd; then per column
 * DB = dbeta and DG = dgamma, the sums over the rows in order from +0 of dout and dout xhat. */
function layerNormBackwardJs(D: Float64Array, H: Float64Array, G: Float64Array, S: Float64Array, DX: Float64Array,
  DG: Float64Array, DB: Float64Array, d: number): void {
  for (let r = 0; r < S.length; r++) {
    const o = r * d;
    // inverts: out = xhat * gamma + beta
    let sum1 = 0, sum2 = 0;
    for (let k = 0; k < d; k++) {
      const dxhat = D[o + k] * G[k];
      sum1 += dxhat;
      sum2 += dxhat * H[o + k];
    }
    // inverts: xhat = xc * rstd, rstd = 1 / sqrt(var + eps), xc = x - mean
    const dxhatMean = sum1 / d, dxhatXhatMean = sum2 / d, s = S[r];
    for (let k = 0; k < d; k++) {
      const dxhat = D[o + k] * G[k];
      DX[o + k] = ((dxhat - dxhatMean) - H[o + k] * dxhatXhatMean) * s;
    }
  }
  // inverts: out = xhat * gamma + beta, summed over the rows (a register sum per column: the
  // same adds in the same order as running sums over the rows)
  for (let k = 0; k < d; k++) {
    let b = 0, g = 0;
    for (let i = k; i < D.length; i += d) {
      b += D[i]; // in-order over rows
      g += D[i] * H[i]; // in-order over rows
    }
    DB[k] = b;
    DG[k] = g;
  }
}

/** layerNormBackwardJs; in Wasm two rows a lane pair, then two columns a lane pair (d even). */
export function layerNormBackwardRows(D: Float64Array, H: Float64Array, G: Float64Array, S: Float64Array, DX: Float64Array,
  DG: Float64Array, DB: Float64Array, d: number): void {
  reserveScratch(d); // gamma's copy, below the next step's workspace
  const dd = addressOf(D), h = addressOf(H), s = addressOf(S), dx = addressOf(DX), dg = addressOf(DG), db = addressOf(DB);
  const gamma = allIn(dd, h, s, dx, dg, db) && d % 2 === 0 && d >= 2 && S.length >= 1 ? copiedIn(G.subarray(0, d)) : null;
  if (gamma === null) return layerNormBackwardJs(D, H, G, S, DX, DG, DB, d);
  rowEngine.wasmRuns++;
  rows!.lnBackward(dd, h, 0, s, dx, db, dg, S.length, d);
}

// ---- nn/maskedSoftmax.ts: the shift before the exps, the normalisation after, the backward ----
// kept: each row's kept count n as a double (keys k < n are kept), or null: every key kept.

/** O = X - max where kept, maskValue - max elsewhere; max over the kept keys (x > max), raised to
 * maskValue when a key is masked and maskValue is above it. */
function softmaxShiftJs(X: Float64Array, O: Float64Array, kept: Float64Array | null, K: number, maskValue: number): void {
  for (let r = 0; r < O.length / K; r++) {
    const o = r * K, n = kept === null ? K : kept[r];
    let max = -Infinity;
    for (let k = 0; k < n; k++) if (X[o + k] > max) max = X[o + k];
    if (n < K && maskValue > max) max = maskValue;
    for (let k = 0; k < n; k++) O[o + k] = X[o + k] - max;
    const masked = maskValue - max;
    for (let k = n; k < K; k++) O[o + k] = masked;
  }
}

/** softmaxShiftJs; in Wasm two rows a lane pair. */
export function softmaxShiftRows(X: Float64Array, O: Float64Array, kept: Float64Array | null, K: number, maskValue: number): void {
  const x = addressOf(X), o = addressOf(O), k = kept === null ? 0 : addressOf(kept);
  if (!allIn(x, o, k) || O.length === 0) return softmaxShiftJs(X, O, kept, K, maskValue);
  rowEngine.wasmRuns++;
  rows!.smShift(x, o, k, kept === null ? 0 : 1, O.length / K, K, maskValue);
}

/** Each row of O divided by its in-order sum from +0. */
function softmaxNormalizeJs(O: Float64Array, K: number): void {
  for (let r = 0; r < O.length / K; r++) {
    const o = r * K;
    let sum = 0;
    for (let k = 0; k < K; k++) sum += O[o + k];
    for (let k = 0; k < K; k++) O[o + k] = O[o + k] / sum;
  }
}

/** softmaxNormalizeJs; in Wasm two rows a lane pair. */
export function softmaxNormalizeRows(O: Float64Array, K: number): void {
  const o = addressOf(O);
  if (!allIn(o) || O.length === 0) return softmaxNormalizeJs(O, K);
  rowEngine.wasmRuns++;
  rows!.smNorm(o, O.length / K, K);
}

/** DX = Y (G - dot) where kept, +0 elsewhere; dot = the row's in-order sum from +0 of G Y. */
function softmaxBackwardJs(G: Float64Array, Y: Float64Array, DX: Float64Array, kept: Float64Array | null, K: number): void {
  for (let r = 0; r < Y.length / K; r++) {
    const o = r * K;
    // O[o + k] = O[o + k] / sum, O = exp(v - max): the shift by the row max cancels
    let dot = 0;
    for (let k = 0; k < K; k++) dot += G[o + k] * Y[o + k];
    // v = kept ? x : MASK_VALUE: a masked score is replaced by a constant, its dx is 0
    const n = kept === null ? K : kept[r];
    for (let k = 0; k < n; k++) DX[o + k] = Y[o + k] * (G[o + k] - dot);
    for (let k = n; k < K; k++) DX[o + k] = 0;
  }
}

/** softmaxBackwardJs; in Wasm two rows a lane pair. */
export function softmaxBackwardRows(G: Float64Array, Y: Float64Array, DX: Float64Array, kept: Float64Array | null, K: number): void {
  const g = addressOf(G), y = addressOf(Y), dx = addressOf(DX), k = kept === null ? 0 : addressOf(kept);
  if (!allIn(g, y, dx, k) || Y.length === 0) return softmaxBackwardJs(G, Y, DX, kept, K);
  rowEngine.wasmRuns++;
  rows!.smBack(g, y, dx, k, kept === null ? 0 : 1, Y.length / K, K);
}

// ---- exp over a whole tensor (nn/maskedSoftmax.ts, nn/loss.ts) ----

/** P[i] = exp(P[i]) for i = from .. P.length - 1 (mathlib's exp). */
function expJs(P: Float64Array, from = 0): void {
  for (let i = from; i < P.length; i++) P[i] = exp(P[i]);
}

/** expJs; in Wasm four elements a pass (mathlib's exp lane by lane), except four that hold a
 * result near the overflow or subnormal (ldexp's steps: the scalar exp), and the last n mod 4. */
export function expAll(P: Float64Array): void {
  const p = addressOf(P), n = P.length;
  if (!allIn(p)) return expJs(P);
  rowEngine.wasmRuns++;
  let i = 0;
  for (;;) {
    i = rows!.expRange(p, i, n);
    if (i + 4 > n) break; // the last n - i < 4 elements
    P[i] = exp(P[i]); // four the kernel left to the scalar exp (one of them needs ldexp's steps):
    P[i + 1] = exp(P[i + 1]); // the first pair here, the kernel again from the second
    i += 2;
  }
  expJs(P, i);
}
