// A linear (fully connected) layer, y = x W^T + b, W stored (out, in) as PyTorch (twin: linear.py).
// Shapes: x (..., I) any number of leading axes; W (O, I); b (O,) or null -> y (..., O).
// The leading axes are flattened to M = prod(...) rows, so the product is one (M, I) x (I, O).
// Order: each y[m, o] is the in-order sum over i = 0..I-1 of x[m, i] * W[o, i] from +0
// (ops.matmulNT); the bias is added after that sum, one rounded add.
// Backward (dout (..., O)), every sum in index order from +0:
//   dx[m, i] = sum over o of dout[m, o] * W[o, i]        ops.matmul(dout, W)
//   dW[o, i] = sum over rows m of dout[m, o] * x[m, i]   a loop over m, as ops.matmul(dout^T, x)
//   db[o]    = sum over rows m of dout[m, o]             a loop over m, as ops.sumLast(dout^T)

import { type Tensor, matmul, matmulNT, matmulTn, zeros } from "../core/ops.ts";

export interface LinearCache {
  x: Tensor; // (..., I)
  W: Tensor; // (O, I)
  hasBias: boolean;
}

export function linearForward(x: Tensor, W: Tensor, b: Tensor | null = null): { out: Tensor; cache: LinearCache } {
  const I = x.shape[x.shape.length - 1];
  if (W.shape.length !== 2 || x.shape.length < 1 || W.shape[1] !== I) {
    throw new RangeError(`linear: x (..., in) and W (out, in) needed, got x [${x.shape}] and W [${W.shape}]`);
  }
  const O = W.shape[0];
  if (b !== null && (b.shape.length !== 1 || b.shape[0] !== O)) {
    throw new RangeError(`linear: bias must have shape (${O},), got [${b.shape}]`);
  }
  const M = x.data.length / I;
  const y = matmulNT({ shape: [M, I], data: x.data }, W); // (M, O)  in-order sum over i
  if (b !== null) {
    const Y = y.data, B = b.data;
    for (let m = 0; m < M; m++) {
      for (let o = 0; o < O; o++) Y[m * O + o] = Y[m * O + o] + B[o]; // bias after the sum
    }
  }
  const out = { shape: [...x.shape.slice(0, -1), O], data: y.data }; // (..., O)
  return { out, cache: { x, W, hasBias: b !== null } };
}

/** Returns dx (..., I), dW (O, I), db (O,) or null when the forward had no bias. */
export function linearBackward(dout: Tensor, cache: LinearCache): { dx: Tensor; dW: Tensor; db: Tensor | null } {
  const { x, W } = cache;
  const O = W.shape[0], I = W.shape[1];
  const want = [...x.shape.slice(0, -1), O];
  if (dout.shape.length !== want.length || dout.shape.some((s, k) => s !== want[k])) {
    throw new RangeError(`linearBackward: dout must have the forward's output shape [${want}], got [${dout.shape}]`);
  }
  const M = x.data.length / I;
  const D = dout.data, X = x.data;
  // inverts: y = x W^T + b
  let db: Tensor | null = null;
  if (cache.hasBias) {
    db = zeros([O]); // (O,)  bias: one add per row, db[o] = ((0 + dout[0, o]) + dout[1, o]) + ...
    const DB = db.data;
    for (let m = 0, r = 0; m < M; m++, r += O) {
      for (let o = 0; o < O; o++) DB[o] += D[r + o]; // every db[o] in row order, the rows read in turn
    }
  }
  const dW = matmulTn({ shape: [M, O], data: D }, { shape: [M, I], data: X }); // (O, I)  in-order over rows m
  const dx2 = matmul({ shape: [M, O], data: D }, W); // (M, I)  in-order over o
  return { dx: { shape: [...x.shape], data: dx2.data }, dW, db };
}
