// Act 3: why attention divides q.k by sqrt(d) (twin: reference/nn/score_scaling.py).
//
// For each model dim d in the list, in list order:
//   q, k       ~ N(0, 1), each (N, d)       drawn q first, then k
//   dots[n]    = sum_f q[n, f] k[n, f]       (N,)   in-order over the d features
//   scaled[n]  = dots[n] / sqrt(d)           (N,)
//   varRaw     = biased variance of dots     ()     Var(q.k) = d for independent unit normals
//   varScaled  = biased variance of scaled   ()     stays near 1 whatever d is
//
// Shape legend: N samples (query-key pairs), d model dim (features), S how many dims are tried.
// The biased variance is the in-order mean of (x - m) * (x - m), m the in-order mean.
// Without the scale, large d pushes scores far apart and the softmax saturates.

import type { Generator } from "../core/rng.ts";
import { type Tensor, zeros } from "../core/ops.ts";

function meanOf(x: Float64Array): number {
  let acc = 0;
  for (let i = 0; i < x.length; i++) acc += x[i];
  return acc / x.length;
}

/** { mean, variance }: the in-order mean of x and the in-order mean of its squared deviations. */
export function biasedVariance(x: Float64Array): { mean: number; variance: number } {
  const m = meanOf(x);
  let acc = 0;
  for (let i = 0; i < x.length; i++) {
    const dev = x[i] - m;
    acc += dev * dev;
  }
  return { mean: m, variance: acc / x.length };
}

export interface ScoreScaling {
  qMean: Tensor; // (S,) in-order means of all N*d draws: a fingerprint of the inputs
  kMean: Tensor; // (S,)
  dotsMean: Tensor; // (S,)
  varRaw: Tensor; // (S,)
  varScaled: Tensor; // (S,)
}

export function scoreScaling(dims: readonly number[], n: number, rng: Generator): ScoreScaling {
  const S = dims.length;
  const st: ScoreScaling = { qMean: zeros([S]), kMean: zeros([S]), dotsMean: zeros([S]), varRaw: zeros([S]), varScaled: zeros([S]) };
  for (let s = 0; s < S; s++) {
    const d = dims[s];
    if (!Number.isInteger(d) || d <= 0) {
      throw new RangeError(`scoreScaling needs positive integer dims, got ${d} in [${dims}]`);
    }
    const q = rng.normal([n, d]); // (N, d)
    const k = rng.normal([n, d]); // (N, d)  drawn after q
    const dots = new Float64Array(n); // (N,)
    const scaled = new Float64Array(n); // (N,)
    const root = Math.sqrt(d);
    for (let r = 0; r < n; r++) {
      let acc = 0;
      for (let f = 0; f < d; f++) acc += q.data[r * d + f] * k.data[r * d + f];
      dots[r] = acc;
      scaled[r] = acc / root;
    }
    st.qMean.data[s] = meanOf(q.data);
    st.kMean.data[s] = meanOf(k.data);
    const raw = biasedVariance(dots);
    st.dotsMean.data[s] = raw.mean;
    st.varRaw.data[s] = raw.variance;
    st.varScaled.data[s] = biasedVariance(scaled).variance;
  }
  return st;
}
