// A linear (fully connected) layer, y = x W^T + b, W stored (out, in) as PyTorch (twin: linear.py).
// Shapes: x (..., I) any number of leading axes; W (O, I); b (O,) or null -> y (..., O).
// The leading axes are flattened to M = prod(...) rows, so the product is one (M, I) x (I, O).
// Order: each y[m, o] is the in-order sum over i = 0..I-1 of x[m, i] * W[o, i] from +0
// (ops.matmulNT); the bias is added after that sum, one rounded add.

import { type Tensor, matmulNT } from "./ops.ts";

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
