// Tensors and reductions in one documented order (twin: reference/ops.py).
// A tensor is its shape plus a row-major Float64Array. Every sum runs in index order from +0,
// one rounded add per term: acc = 0; for k in 0..K-1: acc = acc + x[k].
// Shape legend: ... leading (batch) axes, M rows, K summed axis, N columns.

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
  return { shape: [...shape], data: new Float64Array(sizeOf(shape)) };
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
  const out = zeros([...a.shape.slice(0, -2), M, N]);
  const A = a.data, B = b.data, O = out.data;
  for (let p = 0; p < batch; p++) {
    const ao = p * M * K, bo = p * bStride, oo = p * M * N;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc += A[ao + m * K + k] * B[bo + k * N + n];
        O[oo + m * N + n] = acc;
      }
    }
  }
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
  const out = zeros([...a.shape.slice(0, -2), M, N]);
  const A = a.data, B = b.data, O = out.data;
  for (let p = 0; p < batch; p++) {
    const ao = p * M * K, bo = p * bStride, oo = p * M * N;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let acc = 0;
        for (let k = 0; k < K; k++) acc += A[ao + m * K + k] * B[bo + n * K + k];
        O[oo + m * N + n] = acc;
      }
    }
  }
  return out;
}

/** Sum over the last axis in index order: (..., K) -> (...). */
export function sumLast(x: Tensor): Tensor {
  const K = x.shape[x.shape.length - 1];
  const out = zeros(x.shape.slice(0, -1));
  for (let r = 0; r < out.data.length; r++) {
    let acc = 0;
    for (let k = 0; k < K; k++) acc += x.data[r * K + k];
    out.data[r] = acc;
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
