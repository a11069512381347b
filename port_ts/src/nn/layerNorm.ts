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
import { rowKernels } from "../kernels/rows.ts";

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
  const rows = x.data.length / d;
  const mean = empty(x.shape.slice(0, -1)), rstd = empty(x.shape.slice(0, -1)); // (...)  every element written
  const xhat = empty(x.shape), out = empty(x.shape); // (..., d)  every element written
  const X = x.data, R = residual === null ? null : residual.data, H = xhat.data, O = out.data, G = gamma.data, Bt = beta.data;
  // the loops below, in Wasm two rows at a time when the tensors are in its memory (ops.rowKernels)
  if (rowKernels.layerNorm(X, R, G, Bt, H, O, mean.data, rstd.data, d, eps)) return { out, cache: { mean, rstd, xhat, gamma } };
  for (let r = 0; r < rows; r++) {
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
      O[o + k] = H[o + k] * G[k] + Bt[k];
    }
    mean.data[r] = m;
    rstd.data[r] = s;
  }
  return { out, cache: { mean, rstd, xhat, gamma } };
}

/** Returns dx (..., d), dgamma (d,), dbeta (d,). dx row by row; then dbeta and dgamma column by
 * column, each summed over the rows in order from +0 (a register sum per column instead of d
 * running sums in memory: the same adds in the same order). */
export function layerNormBackward(dout: Tensor, cache: LayerNormCache): { dx: Tensor; dgamma: Tensor; dbeta: Tensor } {
  const { xhat, rstd, gamma } = cache;
  if (dout.shape.length !== xhat.shape.length || dout.shape.some((s, k) => s !== xhat.shape[k])) {
    throw new RangeError(`layerNormBackward: dout must have the forward's shape [${xhat.shape}], got [${dout.shape}]`);
  }
  const d = xhat.shape[xhat.shape.length - 1];
  const rows = xhat.data.length / d;
  const dx = empty(xhat.shape), dgamma = empty([d]), dbeta = empty([d]); // every element written
  const D = dout.data, H = xhat.data, G = gamma.data, DX = dx.data, DG = dgamma.data, DB = dbeta.data;
  // the loops below, in Wasm two rows (then two columns) at a time when the tensors are in its memory (ops.rowKernels)
  if (rowKernels.layerNormBackward(D, H, G, rstd.data, DX, DG, DB, d)) return { dx, dgamma, dbeta };
  for (let r = 0; r < rows; r++) {
    const o = r * d;
    // inverts: out = xhat * gamma + beta
    let sum1 = 0, sum2 = 0;
    for (let k = 0; k < d; k++) {
      const dxhat = D[o + k] * G[k];
      sum1 += dxhat;
      sum2 += dxhat * H[o + k];
    }
    // inverts: xhat = xc * rstd, rstd = 1 / sqrt(var + eps), xc = x - mean
    const dxhatMean = sum1 / d, dxhatXhatMean = sum2 / d, s = rstd.data[r];
    for (let k = 0; k < d; k++) {
      const dxhat = D[o + k] * G[k];
      DX[o + k] = ((dxhat - dxhatMean) - H[o + k] * dxhatXhatMean) * s;
    }
  }
  // inverts: out = xhat * gamma + beta, summed over the rows
  for (let k = 0; k < d; k++) {
    let b = 0, g = 0;
    for (let i = k; i < D.length; i += d) {
      b += D[i]; // in-order over rows
      g += D[i] * H[i]; // in-order over rows
    }
    DB[k] = b;
    DG[k] = g;
  }
  return { dx, dgamma, dbeta };
}
