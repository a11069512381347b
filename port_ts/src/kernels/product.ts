// The products' kernel (port only: the reference's products are NumPy's loops in index order,
// reference/core/ops.py; core/ops.ts's matmul, matmulNT and matmulTn call products here).
// Every output is its own in-order sum from +0, acc = acc + a*b for k = 0..K-1 (docs/performance.md).
// productKernel, in JavaScript, is the specification and the fallback; the Wasm SIMD kernels of
// kernels/wasm.ts compute the same outputs in f64x2 lanes, each lane a different output.
// products chooses between the two (productEngine); port_ts/test/kernels/product.test.ts checks
// both bit for bit against the naive loops.

import { scratch, wasm } from "./memory.ts";
import { PRODUCT_MODULE } from "./wasm.ts";

/** Which kernel runs the products. "auto": Wasm SIMD when available and the product is large
 * enough to repay the copies (WASM_MIN_WORK multiply-adds), else productKernel; "js" and "wasm"
 * force one (the tests run both on the same shapes; "wasm" falls back to productKernel where
 * `simd` is false). `simd` tells whether the Wasm kernel exists (`gather`: its gathering twin), `moduleBytes` the size of its
 * module, `counts` how many products (calls with work) each kernel has run: a host resets it and
 * reports it, so a fallback is never silent. A setting, not a function: the reference has no twin. */
export const productEngine: {
  mode: "auto" | "js" | "wasm"; readonly simd: boolean; readonly gather: boolean; readonly moduleBytes: number; readonly counts: { wasm: number; js: number };
} = { mode: "auto", simd: wasm !== null, gather: wasm !== null && wasm.productT !== null, moduleBytes: PRODUCT_MODULE.length, counts: { wasm: 0, js: 0 } };
const WASM_MIN_WORK = 4096;

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

/** `batch` products O_p = A_p B_p with productKernel's addressing (strides in elements), each
 * A_p at ao + p*aBatch, B_p at bo + p*bBatch (0: one B for all), O_p at oo + p*oBatch with rows
 * som apart (matmul's: 0, N, M*N; a head's slice of a (B, T, d) tensor: h*D, d, T*d).
 * The Wasm kernel reads A, and B when its rows have adjacent columns and N is a multiple of 4,
 * and writes O when N is such a multiple, in place when they are in its memory (a workspace's
 * tensors); the others it copies in (B packed) or out, except that B and O both in its memory
 * go to the gathering kernel (kernels/wasm.ts, productT), which reads B at any strides and writes
 * any N in place. */
export function products(
  A: Float64Array, ao: number, sam: number, sak: number, aBatch: number,
  B: Float64Array, bo: number, sbk: number, sbn: number, bBatch: number,
  O: Float64Array, oo: number, som: number, oBatch: number, M: number, K: number, N: number, batch: number,
): void {
  const work = batch * M * K * N;
  let useWasm = wasm !== null && work > 0 &&
    (productEngine.mode === "wasm" || (productEngine.mode === "auto" && work >= WASM_MIN_WORK));
  let H: Float64Array | null = null;
  const Np = (N + 3) & ~3, nB = bBatch === 0 ? 1 : batch;
  const aSpan = (batch - 1) * aBatch + (M - 1) * sam + (K - 1) * sak + 1; // the span the batch reads of A
  const mem = useWasm ? wasm!.memory.buffer : null;
  const aIn = A.buffer === mem, bIn = B.buffer === mem && sbn === 1 && Np === N, oIn = O.buffer === mem && Np === N;
  // B and O both in the memory, but B's columns apart or N not a multiple of 4: the gathering
  // kernel reads B and writes O as they stand (no packed copy, no copy out)
  const gather = wasm !== null && wasm.productT !== null && !bIn && B.buffer === mem && O.buffer === mem;
  // the copies' layout at the bottom of the memory: A, then packed B, then O
  const aAt = 0, bAt = aIn ? 0 : (aSpan + 1) & ~1, oAt = bAt + (bIn || gather ? 0 : nB * K * Np);
  if (useWasm) {
    H = scratch(oIn || gather ? oAt : oAt + batch * M * Np);
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
    wasm!.productT!(aPtr * 8, sam * 8, sak * 8, B.byteOffset + bo * 8, sbk * 8, sbn * 8, O.byteOffset + oo * 8, som * 8, M, K, N, batch,
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
  wasm!.product(aPtr * 8, sam * 8, sak * 8, bPtr * 8, bRow * 8, oPtr * 8, oRow * 8, M, K, Np, batch,
    aBatch * 8, bStep * 8, oStep * 8);
  if (oIn) return;
  // O: the (M, Np) rows back into their places, pad columns dropped.
  for (let p = 0, s = oAt; p < batch; p++) {
    for (let m = 0, d = oo + p * oBatch; m < M; m++, s += Np, d += som) {
      for (let n = 0; n < N; n++) O[d + n] = H[s + n];
    }
  }
}

