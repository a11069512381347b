// Tensors and reductions in one documented order (twin: reference/core/ops.py).
// A tensor is its shape plus a row-major Float64Array. Every sum runs in index order from +0,
// one rounded add per term: acc = 0; for k in 0..K-1: acc = acc + x[k]. The products compute
// several outputs per pass over k (productKernel), each in that order (docs/performance.md), in
// JavaScript or in the Wasm SIMD kernel of core/wasmKernel.ts (products, below, chooses);
// port_ts/test/core/ops.test.ts checks them bit for bit against the naive loops.
// Shape legend: ... leading (batch) axes, M rows, K summed axis, N columns.

import { PRODUCT_MODULE, instantiateProduct, instantiateProductT, instantiateRows, rowModule } from "./wasmKernel.ts";
import { EXP_CONSTANTS, exp } from "./mathlib.ts";

export interface Tensor {
  shape: number[];
  data: Float64Array;
}

/** Integer tensors (token ids, valid lengths, labels). */
export interface IntTensor {
  shape: number[];
  data: Int32Array;
}

export function sizeOf(shape: readonly number[]): number {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

export function zeros(shape: readonly number[]): Tensor {
  const n = sizeOf(shape);
  return { shape: [...shape], data: active === null ? new Float64Array(n) : take(active, n) };
}

// A workspace: the memory of one training step, owned by its run and reused from step to step
// (inWorkspace). While one is active, zeros takes its arrays from it (zero-filled, as
// new Float64Array) instead of allocating: no allocation, zeroing by the allocator or garbage
// collection per tensor. Everything zeros hands out inside inWorkspace(ws, fn) is overwritten
// by the next inWorkspace(ws, ...): fn copies what it returns out of it (the gradients).
// Where the Wasm kernel runs, a step's tensors live in the kernel's own memory (as many doubles
// as the previous step used; the rest, if any, in ordinary chunks), so the products read and
// write them in place instead of copying them in and out (see products). The memory does not
// grow during such a step (growing would detach the tensors' views): a product whose copies do
// not fit the space below the workspace runs in productKernel, and the next step reserves more.
export interface Workspace {
  chunks: Float64Array[]; // ordinary chunks, filled in order; never moved, so views stay valid
  chunk: number; // the chunk being filled
  offset: number; // its first free double
  wasm: Float64Array | null; // this step's region of the Wasm memory, null outside a step
  wasmOffset: number; // its first free double
  used: number; // doubles handed out in this step
  need: number; // the most any step has used
  busy: boolean;
}
const CHUNK = 1 << 20; // doubles per chunk (8 MB), or the tensor's size when larger
let active: Workspace | null = null;

/** An empty workspace (its memory is allocated on first use, then kept). */
export function newWorkspace(): Workspace {
  return { chunks: [], chunk: 0, offset: 0, wasm: null, wasmOffset: 0, used: 0, need: 0, busy: false };
}

/** fn() with zeros drawing from ws, from its start: ws's previous contents are overwritten. */
export function inWorkspace<T>(ws: Workspace, fn: () => T): T {
  if (ws.busy) throw new Error("inWorkspace: this workspace is already in use (a step inside a step?); give each run its own");
  const outer = active;
  ws.busy = true;
  ws.chunk = 0;
  ws.offset = 0;
  ws.used = 0;
  ws.wasmOffset = 0;
  ws.wasm = outer === null && ws.need > 0 ? pinRegion(ws.need) : null;
  active = ws;
  try {
    return fn();
  } finally {
    active = outer;
    if (ws.wasm !== null) { ws.wasm = null; pinnedAt = -1; }
    if (ws.used > ws.need) ws.need = ws.used;
    ws.busy = false;
  }
}

/** A tensor every element of which the caller writes before reading any: from the active
 * workspace without the zero fill (it holds what an earlier step left there), else new
 * (zeros). Only for outputs written whole. */
export function empty(shape: readonly number[]): Tensor {
  const n = sizeOf(shape);
  return { shape: [...shape], data: active === null ? new Float64Array(n) : take(active, n, false) };
}

/** n doubles from the active workspace, zeroed unless fill is false. */
function take(ws: Workspace, n: number, fill = true): Float64Array {
  const step = (n + 1) & ~1; // every start 16-byte aligned
  ws.used += step;
  let out: Float64Array;
  if (ws.wasm !== null && ws.wasmOffset + n <= ws.wasm.length) {
    out = ws.wasm.subarray(ws.wasmOffset, ws.wasmOffset + n);
    ws.wasmOffset += step;
  } else {
    for (;;) {
      const c = ws.chunks[ws.chunk];
      if (c === undefined) ws.chunks.push(new Float64Array(Math.max(n, CHUNK)));
      else if (ws.offset + n <= c.length) {
        out = c.subarray(ws.offset, ws.offset + n);
        ws.offset += step;
        break;
      } else {
        ws.chunk++;
        ws.offset = 0;
      }
    }
  }
  if (fill) out.fill(0);
  return out;
}

export function tensor(shape: readonly number[], values: ArrayLike<number>): Tensor {
  if (values.length !== sizeOf(shape)) {
    throw new RangeError(`tensor: shape [${shape}] needs ${sizeOf(shape)} values, got ${values.length}`);
  }
  return { shape: [...shape], data: Float64Array.from(values) };
}

export function intTensor(shape: readonly number[], values: ArrayLike<number>): IntTensor {
  if (values.length !== sizeOf(shape)) {
    throw new RangeError(`intTensor: shape [${shape}] needs ${sizeOf(shape)} values, got ${values.length}`);
  }
  return { shape: [...shape], data: Int32Array.from(values) };
}

function leadSize(shape: readonly number[]): number {
  return sizeOf(shape.slice(0, -2));
}

function sameLead(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.slice(0, -2).every((s, i) => s === b[i]);
}

// The one product kernel (docs/performance.md):
//   O[oo + m*som + n] = sum over k = 0..K-1, in order from +0, of A[ao + m*sam + k*sak] * B[bo + k*sbk + n*sbn].
// The strides give matmul (a row-major, b row-major), matmulNT (b transposed) and matmulTn
// (a transposed). It computes a 2 x 4 block of outputs at a time, eight accumulators in one pass
// over k, each its own in-order sum acc = acc + a*b from +0: the order of every output element is
// the naive loop's, only the loads of a and b are shared. No allocation inside.
function productKernel(
  A: Float64Array, ao: number, sam: number, sak: number,
  B: Float64Array, bo: number, sbk: number, sbn: number,
  O: Float64Array, oo: number, som: number, M: number, K: number, N: number,
): void {
  let m = 0;
  for (; m + 1 < M; m += 2) {
    const a0 = ao + m * sam, a1 = a0 + sam, o0 = oo + m * som, o1 = o0 + som;
    let n = 0;
    for (; n + 3 < N; n += 4) {
      const b0 = bo + n * sbn, b1 = b0 + sbn, b2 = b1 + sbn, b3 = b2 + sbn;
      let s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
      for (let k = 0; k < K; k++) {
        const ka = k * sak, kb = k * sbk;
        const x0 = A[a0 + ka], x1 = A[a1 + ka];
        const y0 = B[b0 + kb], y1 = B[b1 + kb], y2 = B[b2 + kb], y3 = B[b3 + kb];
        s00 += x0 * y0; s01 += x0 * y1; s02 += x0 * y2; s03 += x0 * y3;
        s10 += x1 * y0; s11 += x1 * y1; s12 += x1 * y2; s13 += x1 * y3;
      }
      O[o0 + n] = s00; O[o0 + n + 1] = s01; O[o0 + n + 2] = s02; O[o0 + n + 3] = s03;
      O[o1 + n] = s10; O[o1 + n + 1] = s11; O[o1 + n + 2] = s12; O[o1 + n + 3] = s13;
    }
    for (; n < N; n++) { // the last N mod 4 columns, two rows at a time
      const b0 = bo + n * sbn;
      let s0 = 0, s1 = 0;
      for (let k = 0; k < K; k++) {
        const y = B[b0 + k * sbk];
        s0 += A[a0 + k * sak] * y;
        s1 += A[a1 + k * sak] * y;
      }
      O[o0 + n] = s0; O[o1 + n] = s1;
    }
  }
  if (m < M) { // the last row when M is odd: four columns at a time, then one
    const a0 = ao + m * sam, o0 = oo + m * som;
    let n = 0;
    for (; n + 3 < N; n += 4) {
      const b0 = bo + n * sbn, b1 = b0 + sbn, b2 = b1 + sbn, b3 = b2 + sbn;
      let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (let k = 0; k < K; k++) {
        const kb = k * sbk, x = A[a0 + k * sak];
        s0 += x * B[b0 + kb]; s1 += x * B[b1 + kb]; s2 += x * B[b2 + kb]; s3 += x * B[b3 + kb];
      }
      O[o0 + n] = s0; O[o0 + n + 1] = s1; O[o0 + n + 2] = s2; O[o0 + n + 3] = s3;
    }
    for (; n < N; n++) {
      const b0 = bo + n * sbn;
      let s = 0;
      for (let k = 0; k < K; k++) s += A[a0 + k * sak] * B[b0 + k * sbk];
      O[o0 + n] = s;
    }
  }
}

const wasmProduct = instantiateProduct();
const wasmProductT = wasmProduct === null ? null : instantiateProductT(wasmProduct.memory); // the gathering kernel, on the same memory
let heap = new Float64Array(0); // a view of the module's memory, renewed when it grows

/** Which kernel runs the products. "auto": Wasm SIMD when available and the product is large
 * enough to repay the copies (WASM_MIN_WORK multiply-adds), else productKernel; "js" and "wasm"
 * force one (the tests run both on the same shapes; "wasm" falls back to productKernel where
 * `simd` is false). `simd` tells whether the Wasm kernel exists (`gather`: its gathering twin), `moduleBytes` the size of its
 * module, `counts` how many products (calls with work) each kernel has run: a host resets it and
 * reports it, so a fallback is never silent. A setting, not a function: the reference has no twin. */
export const productEngine: {
  mode: "auto" | "js" | "wasm"; readonly simd: boolean; readonly gather: boolean; readonly moduleBytes: number; readonly counts: { wasm: number; js: number };
} = { mode: "auto", simd: wasmProduct !== null, gather: wasmProductT !== null, moduleBytes: PRODUCT_MODULE.length, counts: { wasm: 0, js: 0 } };
const WASM_MIN_WORK = 4096;

let scratchWant = 0; // the most doubles the products' copies have needed
let pinnedAt = -1; // where a step's workspace region starts in the module's memory (doubles), -1: none

/** The module's memory as doubles, its first n free for the products' copies; null when a
 * step's workspace is pinned above and n does not fit below it. */
function wasmHeap(n: number): Float64Array | null {
  if (n > scratchWant) scratchWant = n;
  if (pinnedAt >= 0) return n <= pinnedAt ? heap : null;
  return heapOf(n);
}

/** The memory grown to at least n doubles, as a Float64Array. */
function heapOf(n: number): Float64Array {
  const memory = wasmProduct!.memory;
  if (memory.buffer.byteLength < n * 8) memory.grow(Math.ceil((n * 8 - memory.buffer.byteLength) / 65536));
  if (heap.buffer !== memory.buffer) heap = new Float64Array(memory.buffer);
  return heap;
}

/** A region of `need` doubles of the module's memory for a step's workspace, above the space
 * the products' copies have needed; null without the Wasm kernel. */
function pinRegion(need: number): Float64Array | null {
  if (wasmProduct === null) return null;
  const at = (scratchWant + 1) & ~1;
  const H = heapOf(at + need);
  pinnedAt = at;
  return H.subarray(at, at + need);
}

const ROW_MODULE = rowModule(EXP_CONSTANTS);
const wasmRows = wasmProduct === null ? null : instantiateRows(ROW_MODULE, wasmProduct.memory);

/** x's byte address in the kernels' memory, or -1 when it is elsewhere or the JavaScript path is
 * forced (productEngine.mode "js"). */
function addressOf(x: Float64Array): number {
  return wasmRows !== null && productEngine.mode !== "js" && x.buffer === wasmProduct!.memory.buffer ? x.byteOffset : -1;
}

/** Elementwise passes of a training step in the Wasm row kernels (core/wasmKernel.ts) when their
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
    if (F > scratchWant) scratchWant = F; // b's copy, below the next step's workspace
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
    if (2 * d > scratchWant) scratchWant = 2 * d; // gamma's and beta's copies, below the next step's workspace
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
    if (d > scratchWant) scratchWant = d; // gamma's copy, below the next step's workspace
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

/** `batch` products O_p = A_p B_p with productKernel's addressing (strides in elements), each
 * A_p at ao + p*aBatch, B_p at bo + p*bBatch (0: one B for all), O_p at oo + p*oBatch with rows
 * som apart (matmul's: 0, N, M*N; a head's slice of a (B, T, d) tensor: h*D, d, T*d).
 * The Wasm kernel reads A, and B when its rows have adjacent columns and N is a multiple of 4,
 * and writes O when N is such a multiple, in place when they are in its memory (a workspace's
 * tensors); the others it copies in (B packed) or out, except that B and O both in its memory
 * go to the gathering kernel (wasmKernel.ts, productT), which reads B at any strides and writes
 * any N in place. */
export function products(
  A: Float64Array, ao: number, sam: number, sak: number, aBatch: number,
  B: Float64Array, bo: number, sbk: number, sbn: number, bBatch: number,
  O: Float64Array, oo: number, som: number, oBatch: number, M: number, K: number, N: number, batch: number,
): void {
  const work = batch * M * K * N;
  let useWasm = wasmProduct !== null && work > 0 &&
    (productEngine.mode === "wasm" || (productEngine.mode === "auto" && work >= WASM_MIN_WORK));
  let H: Float64Array | null = null;
  const Np = (N + 3) & ~3, nB = bBatch === 0 ? 1 : batch;
  const aSpan = (batch - 1) * aBatch + (M - 1) * sam + (K - 1) * sak + 1; // the span the batch reads of A
  const mem = useWasm ? wasmProduct!.memory.buffer : null;
  const aIn = A.buffer === mem, bIn = B.buffer === mem && sbn === 1 && Np === N, oIn = O.buffer === mem && Np === N;
  // B and O both in the memory, but B's columns apart or N not a multiple of 4: the gathering
  // kernel reads B and writes O as they stand (no packed copy, no copy out)
  const gather = wasmProductT !== null && !bIn && B.buffer === mem && O.buffer === mem;
  // the copies' layout at the bottom of the memory: A, then packed B, then O
  const aAt = 0, bAt = aIn ? 0 : (aSpan + 1) & ~1, oAt = bAt + (bIn || gather ? 0 : nB * K * Np);
  if (useWasm) {
    H = wasmHeap(oIn || gather ? oAt : oAt + batch * M * Np);
    if (H === null) useWasm = false;
  }
  if (!useWasm) {
    if (work > 0) productEngine.counts.js++;
    for (let p = 0; p < batch; p++) {
      productKernel(A, ao + p * aBatch, sam, sak, B, bo + p * bBatch, sbk, sbn, O, oo + p * oBatch, som, M, K, N);
    }
    return;
  }
  H = H!;
  productEngine.counts.wasm++;
  // A: read in place, or the span copied as it is (its strides unchanged).
  let aPtr = aAt;
  if (aIn) aPtr = A.byteOffset / 8 + ao;
  else H.set(A.subarray(ao, ao + aSpan), aAt);
  if (gather) {
    wasmProductT!(aPtr * 8, sam * 8, sak * 8, B.byteOffset + bo * 8, sbk * 8, sbn * 8, O.byteOffset + oo * 8, som * 8, M, K, N, batch,
      aBatch * 8, bBatch * 8, oBatch * 8);
    return;
  }
  // B: read in place (rows sbk apart), or each (K, N) operand packed as (K, Np) rows, pad columns zero.
  let bPtr = bAt, bRow = Np, bStep = bBatch === 0 ? 0 : K * Np;
  if (bIn) {
    bPtr = B.byteOffset / 8 + bo;
    bRow = sbk;
    bStep = bBatch;
  } else {
    for (let p = 0; p < nB; p++) {
      const src = bo + p * bBatch, dst = bAt + p * K * Np;
      if (sbn === 1 && sbk === N && Np === N) H.set(B.subarray(src, src + K * N), dst);
      else {
        for (let k = 0; k < K; k++) {
          const s = src + k * sbk, d = dst + k * Np;
          for (let n = 0; n < N; n++) H[d + n] = B[s + n * sbn];
          for (let n = N; n < Np; n++) H[d + n] = 0;
        }
      }
    }
  }
  // O: written in place (rows som apart), or as (M, Np) rows of a scratch block, copied out below.
  const oPtr = oIn ? O.byteOffset / 8 + oo : oAt, oRow = oIn ? som : Np, oStep = oIn ? oBatch : M * Np;
  wasmProduct!.product(aPtr * 8, sam * 8, sak * 8, bPtr * 8, bRow * 8, oPtr * 8, oRow * 8, M, K, Np, batch,
    aBatch * 8, bStep * 8, oStep * 8);
  if (oIn) return;
  // O: the (M, Np) rows back into their places, pad columns dropped.
  for (let p = 0, s = oAt; p < batch; p++) {
    for (let m = 0, d = oo + p * oBatch; m < M; m++, s += Np, d += som) {
      for (let n = 0; n < N; n++) O[d + n] = H[s + n];
    }
  }
}

/** a (..., M, K) @ b (..., K, N) -> (..., M, N); b may also be a single (K, N) matrix. */
export function matmul(a: Tensor, b: Tensor): Tensor {
  const M = a.shape[a.shape.length - 2], K = a.shape[a.shape.length - 1];
  const N = b.shape[b.shape.length - 1];
  if (b.shape[b.shape.length - 2] !== K || !(b.shape.length === 2 || sameLead(a.shape, b.shape))) {
    throw new RangeError(`matmul: shapes [${a.shape}] @ [${b.shape}] do not fit`);
  }
  const batch = leadSize(a.shape);
  const bStride = b.shape.length === 2 ? 0 : K * N;
  const out = empty([...a.shape.slice(0, -2), M, N]); // every element written
  if (bStride === 0) products(a.data, 0, K, 1, 0, b.data, 0, N, 1, 0, out.data, 0, N, 0, batch * M, K, N, 1); // one b: rows of every batch
  else products(a.data, 0, K, 1, M * K, b.data, 0, N, 1, bStride, out.data, 0, N, M * N, M, K, N, batch);
  return out;
}

/** a (..., M, K) @ b(..., N, K)^T -> (..., M, N); b may be a single (N, K) matrix (a weight). */
export function matmulNT(a: Tensor, b: Tensor): Tensor {
  const M = a.shape[a.shape.length - 2], K = a.shape[a.shape.length - 1];
  const N = b.shape[b.shape.length - 2];
  if (b.shape[b.shape.length - 1] !== K || !(b.shape.length === 2 || sameLead(a.shape, b.shape))) {
    throw new RangeError(`matmulNT: shapes [${a.shape}] @ [${b.shape}]^T do not fit`);
  }
  const batch = leadSize(a.shape);
  const bStride = b.shape.length === 2 ? 0 : N * K;
  const out = empty([...a.shape.slice(0, -2), M, N]); // every element written
  if (bStride === 0) products(a.data, 0, K, 1, 0, b.data, 0, 1, K, 0, out.data, 0, N, 0, batch * M, K, N, 1); // one b: rows of every batch
  else products(a.data, 0, K, 1, M * K, b.data, 0, 1, K, bStride, out.data, 0, N, M * N, M, K, N, batch);
  return out;
}

/** a(..., K, M)^T @ b (..., K, N) -> (..., M, N), the in-order sum over rows k (dW = dout^T x);
 * b may be a single (K, N) matrix. */
export function matmulTn(a: Tensor, b: Tensor): Tensor {
  const K = a.shape[a.shape.length - 2], M = a.shape[a.shape.length - 1];
  const N = b.shape[b.shape.length - 1];
  if (b.shape[b.shape.length - 2] !== K || !(b.shape.length === 2 || sameLead(a.shape, b.shape))) {
    throw new RangeError(`matmulTn: shapes [${a.shape}]^T @ [${b.shape}] do not fit`);
  }
  const batch = leadSize(a.shape);
  const bStride = b.shape.length === 2 ? 0 : K * N;
  const out = empty([...a.shape.slice(0, -2), M, N]); // every element written
  products(a.data, 0, 1, M, K * M, b.data, 0, N, 1, bStride, out.data, 0, N, M * N, M, K, N, batch);
  return out;
}

/** dW of y = x W^T: dy (..., out), x (..., in) -> (out, in), summed over every leading row in
 * row-major order (twin: weight_grad). */
export function weightGrad(dy: Tensor, x: Tensor): Tensor {
  const o = dy.shape[dy.shape.length - 1], n = x.shape[x.shape.length - 1];
  const rows = dy.data.length / o;
  return matmulTn({ shape: [rows, o], data: dy.data }, { shape: [rows, n], data: x.data });
}

/** Sum over the last axis in index order: (..., K) -> (...). */
export function sumLast(x: Tensor): Tensor {
  const K = x.shape[x.shape.length - 1];
  const out = zeros(x.shape.slice(0, -1));
  const X = x.data, O = out.data;
  for (let r = 0, ro = 0; r < O.length; r++, ro += K) {
    let acc = 0;
    for (let k = 0; k < K; k++) acc += X[ro + k];
    O[r] = acc;
  }
  return out;
}

/** In-order sum over the last axis divided by its length. */
export function meanLast(x: Tensor): Tensor {
  const K = x.shape[x.shape.length - 1];
  const out = sumLast(x);
  for (let r = 0; r < out.data.length; r++) out.data[r] = out.data[r] / K;
  return out;
}
