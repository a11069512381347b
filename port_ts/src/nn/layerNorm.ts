// Layer normalisation over the last axis, biased variance (twin: layer_norm.py).
// Shapes: x (..., d); gamma (d,); beta (d,) -> out (..., d). Per row of d features:
//   mean = (in-order sum of x) / d
//   xc   = x - mean
//   var  = (in-order sum of xc * xc) / d          biased, as nn.LayerNorm
//   rstd = 1 / sqrt(var + eps)                     eps = 1e-5
//   xhat = xc * rstd
//   out  = xhat * gamma + beta                     i.e. ((x - mean) * rstd) * gamma + beta
// A constant row has var 0 and gives xhat = 0, out = beta. d = 1 is such a row.
// Backward (dout (..., d)), rows r over the flattened leading axes, sums in index order from +0:
//   dbeta[k]  = sum over r of dout[r, k]
//   dgamma[k] = sum over r of dout[r, k] * xhat[r, k]
//   dxhat     = dout * gamma
//   dx        = ((dxhat - mean(dxhat)) - xhat * mean(dxhat * xhat)) * rstd
// where mean() is the in-order sum over the row's d features divided by d (see layer_norm.py
// for the derivation). Exact for constant rows too (xhat = 0 there).

import { type Tensor, empty } from "../core/ops.ts";
import { layerNormBackwardRows, layerNormRows } from "../kernels/rows.ts";

export const EPS = 1e-5;

export interface LayerNormCache {
  mean: Tensor; // (...)
  rstd: Tensor; // (...)
  xhat: Tensor; // (..., d)
  gamma: Tensor; // (d,)
}

/** LN(x), or LN(x + residual) when residual (x's shape) is given: the sum, one rounded add per
 * element, formed row by row in xhat's array (AddNorm's x + dropout(y) without a tensor of its own). */
export function layerNormForward(
  x: Tensor, gamma: Tensor, beta: Tensor, eps = EPS, residual: Tensor | null = null,
): { out: Tensor; cache: LayerNormCache } {
  const d = x.shape[x.shape.length - 1];
  if (gamma.data.length !== d || beta.data.length !== d || gamma.shape.length !== 1 || beta.shape.length !== 1) {
    throw new RangeError(`layer_norm: gamma and beta must have shape (${d},), got [${gamma.shape}] and [${beta.shape}]`);
  }
  if (residual !== null && residual.data.length !== x.data.length) {
    throw new RangeError(`layer_norm: the residual must have x's shape [${x.shape}], got [${residual.shape}]`);
  }
  const mean = empty(x.shape.slice(0, -1)), rstd = empty(x.shape.slice(0, -1)); // (...)  every element written
  const xhat = empty(x.shape), out = empty(x.shape); // (..., d)  every element written
  // the header's formulas row by row (kernels/rows.ts: their loops, and the loops' Wasm twin)
  layerNormRows(x.data, residual === null ? null : residual.data, gamma.data, beta.data, xhat.data, out.data, mean.data, rstd.data, d, eps);
  return { out, cache: { mean, rstd, xhat, gamma } };
}

/** Returns dx (..., d), dgamma (d,), dbeta (d,). dx row by row; then dbeta and dgamma, each
 * summed over the rows in order from +0. */
export function layerNormBackward(dout: Tensor, cache: LayerNormCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor } {
  const { xhat, rstd, gamma } = cache;
  if (dout.shape.length !== xhat.shape.length || dout.shape.some((s, k) => s !== xhat.shape[k])) {
    throw new RangeError(`layerNormBackward: dout must have the forward's shape [${xhat.shape}], got [${dout.shape}]`);
  }
  const d = xhat.shape[xhat.shape.length - 1];
  const dx = empty(xhat.shape), dgamma = empty([d]), dbeta = empty([d]); // every element written
  // the header's formulas: dx row by row, then dbeta and dgamma (kernels/rows.ts)
  layerNormBackwardRows(dout.data, xhat.data, gamma.data, rstd.data, dx.data, dgamma.data, dbeta.data, d);
  return { dx, dgamma, dbeta };
}
