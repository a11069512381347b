// Nadaraya-Watson kernel regression, the book's attention-pooling lab (twin: nadaraya_watson.py).
//
//   u        = (xTrain[i] - xQuery[j]) / sigma      (N, Q)   distance of key i to query j
//   K        = kernel(u)                            (N, Q)
//   W[:, j]  = K[:, j] / sum_i K[i, j]              (N, Q)   each column sums to 1
//   yHat[j]  = sum_i yTrain[i] W[i, j]              (Q,)
//   mae      = mean_j |yHat[j] - yTrue[j]|          ()
//
// Shape legend: N training points (keys and values), Q queries (validation points).
// Kernels on u, as the book codes them: gaussian exp(-u^2/2); boxcar 1 if |u| < 1 else 0
// (strict); constant 1; "epanechikov" max(1 - |u|, 0), triangular, not 3/4 (1 - u^2).
// Both sums are in index order over the training points. A query with no key in the kernel's
// reach has a column sum of 0: as in the book, its weights are 0/0 = NaN and so is its
// estimate; the error over such queries is NaN too.
//
// The lab's data: f(x) = 2 sin(x) + x; xTrain = sort(U[0, 5), 40 draws), then 40 normal draws of
// noise, yTrain = f(xTrain) + noise; xVal[j] = j / 10 for j = 0..49; yTrue = f(xVal), noise-free.

import type { Generator } from "../core/rng.ts";
import { type Tensor, zeros } from "../core/ops.ts";
import { exp, sin } from "../core/mathlib.ts";

export type Kernel = (u: number) => number;

export function gaussian(u: number): number {
  return exp(-(u * u) / 2);
}

export function boxcar(u: number): number {
  return Math.abs(u) < 1 ? 1 : 0;
}

export function constant(_u: number): number {
  return 1;
}

export function epanechikov(u: number): number {
  return Math.max(1 - Math.abs(u), 0);
}

export const KERNELS: Record<string, Kernel> = { gaussian, boxcar, constant, epanechikov };

/** f(x) = 2 sin(x) + x. */
export function target(x: number): number {
  return 2 * sin(x) + x;
}

export interface RegressionData {
  xTrain: Tensor; // (N,)
  yTrain: Tensor; // (N,)
  xVal: Tensor; // (Q,)
  yTrue: Tensor; // (Q,)
}

/** Draws xTrain (sorted uniforms on [0, 5)) then the noise (normals). */
export function regressionData(rng: Generator, nTrain = 40, nVal = 50): RegressionData {
  const xTrain = rng.uniform([nTrain], 0, 5); // draws 1..N
  xTrain.data.sort(); // typed arrays sort numerically
  const noise = rng.normal([nTrain]); // drawn after the positions
  const yTrain = zeros([nTrain]);
  for (let i = 0; i < nTrain; i++) yTrain.data[i] = target(xTrain.data[i]) + noise.data[i];
  const xVal = zeros([nVal]);
  const yTrue = zeros([nVal]);
  for (let j = 0; j < nVal; j++) {
    xVal.data[j] = j / 10;
    yTrue.data[j] = target(xVal.data[j]);
  }
  return { xTrain, yTrain, xVal, yTrue };
}

/** The estimate at each query: { yHat (Q,), weights (N, Q) }. */
export function nadarayaWatson(
  xTrain: Tensor, yTrain: Tensor, xQuery: Tensor, kernel = "gaussian", sigma = 1,
): { yHat: Tensor; weights: Tensor } {
  if (!Object.hasOwn(KERNELS, kernel)) {
    throw new RangeError(`unknown kernel '${kernel}'; expected one of [${Object.keys(KERNELS).sort().join(", ")}]`);
  }
  if (!(sigma > 0)) throw new RangeError(`the kernel width sigma must be positive, got ${sigma}`);
  const k = KERNELS[kernel];
  const N = xTrain.data.length, Q = xQuery.data.length;
  const W = zeros([N, Q]);
  for (let i = 0; i < N; i++) {
    for (let j = 0; j < Q; j++) W.data[i * Q + j] = k((xTrain.data[i] - xQuery.data[j]) / sigma);
  }
  const yHat = zeros([Q]);
  for (let j = 0; j < Q; j++) {
    let col = 0; // in-order over the training points
    for (let i = 0; i < N; i++) col += W.data[i * Q + j];
    let acc = 0;
    for (let i = 0; i < N; i++) {
      W.data[i * Q + j] = W.data[i * Q + j] / col; // 0 / 0 = NaN for an uncovered query
      acc += yTrain.data[i] * W.data[i * Q + j];
    }
    yHat.data[j] = acc;
  }
  return { yHat, weights: W };
}

/** In-order mean of |yHat - yTrue|. */
export function meanAbsError(yHat: Tensor, yTrue: Tensor): number {
  let acc = 0;
  for (let j = 0; j < yHat.data.length; j++) acc += Math.abs(yHat.data[j] - yTrue.data[j]);
  return acc / yHat.data.length;
}
