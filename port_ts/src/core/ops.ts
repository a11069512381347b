// Tensors and reductions in one documented order (twin: reference/core/ops.py).
// A tensor is its shape plus a row-major Float64Array. Every sum runs in index order from +0,
// one rounded add per term: acc = 0; for k in 0..K-1: acc = acc + x[k]. The products run in the
// kernels layer (kernels/product.ts: a JavaScript kernel and its Wasm SIMD twin, each output in
// that order, docs/performance.md); zeros and empty draw from a training step's workspace when
// one is active (kernels/memory.ts).
// Shape legend: ... leading (batch) axes, M rows, K summed axis, N columns.

import { doubles } from "../kernels/memory.ts";
import { products } from "../kernels/product.ts";

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
  return { shape: [...shape], data: doubles(n, true) };
}

/** A tensor every element of which the caller writes before reading any: from the active
 * workspace without the zero fill (it holds what an earlier step left there), else new
 * (zeros). Only for outputs written whole. */
export function empty(shape: readonly number[]): Tensor {
  const n = sizeOf(shape);
  return { shape: [...shape], data: doubles(n, false) };
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
