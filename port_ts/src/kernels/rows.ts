// The row kernels: a training step's elementwise passes (port only; the reference's are NumPy's
// expressions), in WebAssembly SIMD when their operands lie in the kernels' memory.

import { exp } from "../core/mathlib.ts";
import { scratch as wasmHeap, reserveScratch, wasm } from "./memory.ts";
import { productEngine } from "./product.ts";
import { ROW_MODULE } from "./wasm.ts";

const wasmRows = wasm === null ? null : wasm.rows;

/** x's byte address in the kernels' memory, or -1 when it is elsewhere or the JavaScript path is
 * forced (productEngine.mode "js"). */
function addressOf(x: Float64Array): number {
  return wasmRows !== null && productEngine.mode !== "js" && x.buffer === wasm!.memory.buffer ? x.byteOffset : -1;
}

/** Elementwise passes of a training step in the Wasm row kernels (kernels/wasm.ts) when their
 * operands lie in the kernels' memory (a pinned workspace's tensors), each element or output in
 * its own lane, the same operations in the same order as the JavaScript written beside each use;
 * `biasRelu` and `reluGate` return false where they did not run (the caller's loop then runs),
 * `exp` runs its loop itself for what the kernel leaves. A setting of the port, not a function
 * of the maths: the reference has no twin. */
export const rowKernels = {
  /** Whether the row kernels exist (WebAssembly SIMD), their module's size, and how many calls
   * ran in them (a test resets it, so a silent fallback cannot pass for the kernels). */
  simd: wasmRows !== null,
  moduleBytes: ROW_MODULE.length,
  wasmRuns: 0,
  /** H (rows, F) = relu(H + b) per row, b (F,): nn/ffn.ts's fused bias and ReLU. */
  biasRelu(H: Float64Array, b: Float64Array, F: number): boolean {
    reserveScratch(F); // b's copy, below the next step's workspace
    const h = addressOf(H);
    if (h < 0 || F < 2 || F % 2 !== 0 || H.length < F || H.length % F !== 0) return false;
    const scratch = wasmHeap(F);
    if (scratch === null) return false;
    scratch.set(b.subarray(0, F), 0);
    rowKernels.wasmRuns++;
    wasmRows!.biasRelu(h, 0, H.length / F, F);
    return true;
  },
  /** D (rows, F) gated where X > 0, and DB (F,) the gated columns' in-order sums: nn/ffn.ts's ReLU backward. */
  reluGate(D: Float64Array, X: Float64Array, DB: Float64Array, F: number): boolean {
    const d = addressOf(D), x = addressOf(X), db = addressOf(DB);
    if (d < 0 || x < 0 || db < 0 || F < 2 || F % 2 !== 0 || D.length < F || D.length % F !== 0 || X.length !== D.length) return false;
    rowKernels.wasmRuns++;
    wasmRows!.reluGate(d, x, db, D.length / F, F);
    return true;
  },
  /** nn/layerNorm.ts's forward over rows of d (its loops, two rows at a time): H = xhat, O = out,
   * M = mean, S = rstd from X (+ R). */
  layerNorm(X: Float64Array, R: Float64Array | null, G: Float64Array, B: Float64Array, H: Float64Array, O: Float64Array,
    M: Float64Array, S: Float64Array, d: number, eps: number): boolean {
    reserveScratch(2 * d); // gamma's and beta's copies, below the next step's workspace
    const x = addressOf(X), r = R === null ? 0 : addressOf(R), h = addressOf(H), o = addressOf(O), m = addressOf(M), s = addressOf(S);
    const rows = M.length;
    if (x < 0 || r < 0 || h < 0 || o < 0 || m < 0 || s < 0 || d < 1 || rows < 1) return false;
    const scratch = wasmHeap(2 * d);
    if (scratch === null) return false;
    scratch.set(G.subarray(0, d), 0);
    scratch.set(B.subarray(0, d), d);
    rowKernels.wasmRuns++;
    wasmRows!.lnForward(x, r, R === null ? 0 : 1, 0, d * 8, h, o, m, s, rows, d, eps);
    return true;
  },
  /** nn/layerNorm.ts's backward (its loops, two rows at a time, then the column sums two columns
   * at a time, d even): DX, DG = dgamma, DB = dbeta from D = dout, H = xhat, G = gamma, S = rstd. */
  layerNormBackward(D: Float64Array, H: Float64Array, G: Float64Array, S: Float64Array, DX: Float64Array,
    DG: Float64Array, DB: Float64Array, d: number): boolean {
    reserveScratch(d); // gamma's copy, below the next step's workspace
    const dd = addressOf(D), h = addressOf(H), s = addressOf(S), dx = addressOf(DX), dg = addressOf(DG), db = addressOf(DB);
    const rows = S.length;
    if (dd < 0 || h < 0 || s < 0 || dx < 0 || dg < 0 || db < 0 || d < 2 || d % 2 !== 0 || rows < 1) return false;
    const scratch = wasmHeap(d);
    if (scratch === null) return false;
    scratch.set(G.subarray(0, d), 0);
    rowKernels.wasmRuns++;
    wasmRows!.lnBackward(dd, h, 0, s, dx, db, dg, rows, d);
    return true;
  },
  /** nn/maskedSoftmax.ts's forward before the exps, rows of K (kept: each row's kept count, or
   * null: all): O = X - max where kept, maskValue - max elsewhere. */
  softmaxShift(X: Float64Array, O: Float64Array, kept: Float64Array | null, K: number, maskValue: number): boolean {
    const x = addressOf(X), o = addressOf(O), k = kept === null ? 0 : addressOf(kept), rows = K > 0 ? O.length / K : 0;
    if (x < 0 || o < 0 || k < 0 || rows < 1) return false;
    rowKernels.wasmRuns++;
    wasmRows!.smShift(x, o, k, kept === null ? 0 : 1, rows, K, maskValue);
    return true;
  },
  /** ... and after them: each row of O divided by its in-order sum. */
  softmaxNormalize(O: Float64Array, K: number): boolean {
    const o = addressOf(O), rows = K > 0 ? O.length / K : 0;
    if (o < 0 || rows < 1) return false;
    rowKernels.wasmRuns++;
    wasmRows!.smNorm(o, rows, K);
    return true;
  },
  /** nn/maskedSoftmax.ts's backward: DX = Y (G - in-order sum of G Y) where kept, +0 elsewhere. */
  softmaxBackward(G: Float64Array, Y: Float64Array, DX: Float64Array, kept: Float64Array | null, K: number): boolean {
    const g = addressOf(G), y = addressOf(Y), dx = addressOf(DX), k = kept === null ? 0 : addressOf(kept), rows = K > 0 ? Y.length / K : 0;
    if (g < 0 || y < 0 || dx < 0 || k < 0 || rows < 1) return false;
    rowKernels.wasmRuns++;
    wasmRows!.smBack(g, y, dx, k, kept === null ? 0 : 1, rows, K);
    return true;
  },
  /** P[i] = exp(P[i]) for every i (mathlib's exp, the same bits). */
  exp(P: Float64Array): void {
    const p = addressOf(P), n = P.length;
    let i = 0;
    if (p >= 0) {
      rowKernels.wasmRuns++;
      for (;;) {
        i = wasmRows!.expRange(p, i, n);
        if (i + 4 > n) break; // the last n - i < 4 elements
        P[i] = exp(P[i]); // four the kernel left to the scalar exp (one of them needs ldexp's steps):
        P[i + 1] = exp(P[i + 1]); // the first pair here, the kernel again from the second
        i += 2;
      }
    }
    for (; i < n; i++) P[i] = exp(P[i]);
  },
};

