// Softmax cross-entropy with padding excluded, and its gradient (twin: reference/nn/loss.py).
// Shapes: logits (..., V); targets int (...) with ids in [0, V); weights (...) or null, 1 for a
// counted position and 0 for padding. The leading axes are flattened to N rows, row-major.
// Per row n, with z = logits[n] and t = targets[n]:
//   m       = max over v of z[v]                     (exact, any order)
//   s       = sum over v of exp(z[v] - m)            in-order from +0
//   loss_n  = log(s) - (z[t] - m)                    log-sum-exp minus the target's logit
//   loss    = (sum over n of w[n] * loss_n) / (sum over n of w[n])   both in-order from +0
// Without weights the loss is the plain mean, (sum over n of loss_n) / N, which is what weights
// of all ones give too. This is the book's Seq2Seq.loss: per-token cross-entropy, masked where
// the target is <pad>, averaged over the counted tokens.
// Backward, for dloss = 1:
//   p          = exp(z - m) / s                      softmax of the row
//   coef[n]    = w[n] / (sum of w)                   one rounded division (1 / N without weights)
//   dlogits[n] = (p - onehot(t)) * coef[n]

import { type Tensor, type IntTensor, empty, zeros } from "../core/ops.ts";
import { expAll } from "../kernels/rows.ts";
import { log } from "../core/mathlib.ts";

export interface CrossEntropyCache {
  probs: Tensor; // (N, V) softmax of each row
  targets: IntTensor; // (N,)
  coef: Float64Array; // (N,) w / sum(w), or 1 / N
  shape: number[]; // the logits' shape
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((s, k) => s === b[k]);
}

/** (B,) lengths -> (B, T) weights, 1 where t < validLens[b], else 0. */
export function sequenceWeights(validLens: IntTensor, T: number): Tensor {
  if (validLens.shape.length !== 1) {
    throw new RangeError(`sequenceWeights: validLens must be lengths (B,), got shape [${validLens.shape}]`);
  }
  const B = validLens.shape[0];
  const w = zeros([B, T]); // (B, T)
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) w.data[b * T + t] = t < validLens.data[b] ? 1 : 0;
  }
  return w;
}

export function crossEntropyForward(
  logits: Tensor, targets: IntTensor, weights: Tensor | null = null,
): { loss: number; cache: CrossEntropyCache } {
  const V = logits.shape[logits.shape.length - 1];
  if (logits.shape.length < 1 || !(V >= 1)) {
    throw new RangeError(`cross_entropy: logits must be (..., V) with V >= 1, got [${logits.shape}]`);
  }
  if (!(targets.data instanceof Int32Array)) throw new TypeError("cross_entropy: targets must be integer ids (Int32Array)");
  const lead = logits.shape.slice(0, -1);
  if (!sameShape(targets.shape, lead)) {
    throw new RangeError(`cross_entropy: targets must have shape [${lead}], got [${targets.shape}]`);
  }
  if (weights !== null && !sameShape(weights.shape, lead)) {
    throw new RangeError(`cross_entropy: weights must have shape [${lead}], got [${weights.shape}]`);
  }
  const N = targets.data.length;
  const Z = logits.data, Tg = targets.data;
  const probs = zeros([N, V]); // (N, V)
  const P = probs.data;
  const losses = new Float64Array(N); // (N,)
  // every row's z - m first (m kept in losses for now), their exps in one pass over the tensor
  // (kernels/rows.ts's expAll: mathlib's exp)
  for (let n = 0; n < N; n++) {
    const o = n * V, t = Tg[n];
    if (!(t >= 0 && t < V)) throw new RangeError(`cross_entropy: target id ${t} is outside [0, ${V})`);
    let m = Z[o];
    for (let v = 1; v < V; v++) if (Z[o + v] > m) m = Z[o + v];
    for (let v = 0; v < V; v++) P[o + v] = Z[o + v] - m;
    losses[n] = m;
  }
  expAll(P); // exp(z - m) for now
  for (let n = 0; n < N; n++) {
    const o = n * V, m = losses[n];
    let s = 0;
    for (let v = 0; v < V; v++) s += P[o + v];
    losses[n] = log(s) - (Z[o + Tg[n]] - m);
    for (let v = 0; v < V; v++) P[o + v] = P[o + v] / s; // softmax
  }
  const coef = new Float64Array(N); // (N,)
  let total = 0, wsum: number;
  if (weights === null) {
    for (let n = 0; n < N; n++) total += losses[n]; // in-order over rows
    wsum = N;
    for (let n = 0; n < N; n++) coef[n] = 1 / N;
  } else {
    const W = weights.data;
    wsum = 0;
    for (let n = 0; n < N; n++) total += W[n] * losses[n]; // in-order over rows
    for (let n = 0; n < N; n++) wsum += W[n]; // in-order over rows
    if (!(wsum > 0)) throw new RangeError(`cross_entropy: the weights sum to ${wsum}; at least one position must count`);
    for (let n = 0; n < N; n++) coef[n] = W[n] / wsum;
  }
  return { loss: total / wsum, cache: { probs, targets, coef, shape: [...logits.shape] } };
}

/** Returns dlogits (..., V) for dloss = 1: (softmax - onehot(target)) * w / sum(w). */
export function crossEntropyBackward(cache: CrossEntropyCache): Tensor {
  const { probs, targets, coef } = cache;
  const N = targets.data.length, V = probs.shape[1];
  const dlogits = empty(cache.shape); // (..., V)  every element written
  const P = probs.data, D = dlogits.data;
  // inverts: loss = sum(w * (log(s) - (z[t] - m))) / sum(w)
  for (let n = 0; n < N; n++) {
    const o = n * V, t = targets.data[n];
    for (let v = 0; v < V; v++) D[o + v] = (v === t ? P[o + v] - 1 : P[o + v]) * coef[n]; // p - onehot
  }
  return dlogits;
}
