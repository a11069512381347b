// The optimiser of the baked runs: the book's global-norm clipping and PyTorch's Adam
// (twin: reference/runs/optim.py; the contract is docs/training.md).
//
// Parameters, gradients and Adam's moments are Record<string, Tensor> keyed by parameter name;
// `names` fixes the order every loop walks them in (the model's parameter order).
//
// Clipping (d2l's clip_gradients, not torch.nn.utils.clip_grad_norm_):
//   n = sqrt(sum over names, then over row-major elements, of g * g)    one in-order sum from +0
//   if n > theta:  s = theta / n (computed once);  g <- g * s  for every gradient
//   otherwise nothing changes; n (before clipping) is returned
// Adam, PyTorch's update (beta1 = 0.9, beta2 = 0.999, eps = 1e-8, no weight decay), step t:
//   t <- t + 1;  b1t <- b1t * beta1;  b2t <- b2t * beta2        running products, never pow
//   m <- beta1 * m + (1 - beta1) * g
//   v <- beta2 * v + (1 - beta2) * (g * g)
//   bc1 = 1 - b1t;  bc2 = 1 - b2t;  stepSize = lr / bc1
//   denom = sqrt(v) / sqrt(bc2) + eps
//   theta <- theta + (-stepSize) * (m / denom)                   addcdiv_'s order
// The state is { t, b1t, b2t, m: Record<name, Tensor>, v: Record<name, Tensor> }.

import { zeros } from "../core/ops.ts";
import type { Params } from "../core/params.ts";

export const BETA1 = 0.9;
export const BETA2 = 0.999;
export const EPS = 1e-8;

export interface AdamState {
  t: number;
  b1t: number;
  b2t: number;
  m: Params;
  v: Params;
}

/** sqrt of the sum of every squared gradient entry, parameters in `names` order, each
 *  row-major; one running sum from +0 across all of them. */
export function globalNorm(grads: Params, names: readonly string[]): number {
  let acc = 0;
  for (const name of names) {
    const g = grads[name].data;
    for (let i = 0; i < g.length; i++) acc += g[i] * g[i];
  }
  return Math.sqrt(acc);
}

/** The book's rule, on the record: when n > theta every entry is replaced by g * (theta / n)
 *  (new arrays, so a gradient shared with a cache is left alone). Returns n, the norm before
 *  clipping. */
export function clipGradients(grads: Params, names: readonly string[], theta: number): number {
  const n = globalNorm(grads, names);
  if (n > theta) {
    const s = theta / n;
    for (const name of names) {
      const g = grads[name];
      grads[name] = { shape: [...g.shape], data: g.data.map((x) => x * s) };
    }
  }
  return n;
}

/** Step 0: zero moments shaped as the parameters, b1t = b2t = 1. */
export function adamInit(params: Params, names: readonly string[]): AdamState {
  const m: Params = {}, v: Params = {};
  for (const name of names) {
    m[name] = zeros(params[name].shape);
    v[name] = zeros(params[name].shape);
  }
  return { t: 0, b1t: 1, b2t: 1, m, v };
}

/** One Adam update of every parameter, in place on the params and the state. */
export function adamStep(params: Params, grads: Params, names: readonly string[], state: AdamState, lr: number): void {
  state.t += 1;
  state.b1t = state.b1t * BETA1;
  state.b2t = state.b2t * BETA2;
  const bc1 = 1 - state.b1t;
  const bc2 = 1 - state.b2t;
  const stepSize = lr / bc1;
  const sqrtBc2 = Math.sqrt(bc2);
  const c1 = 1 - BETA1, c2 = 1 - BETA2;
  for (const name of names) {
    const p = params[name].data, g = grads[name].data;
    const m = state.m[name].data, v = state.v[name].data;
    if (g.length !== p.length) {
      throw new RangeError(`adamStep: gradient of '${name}' has ${g.length} entries, the parameter ${p.length}`);
    }
    for (let i = 0; i < p.length; i++) {
      const gi = g[i];
      const mi = BETA1 * m[i] + c1 * gi;
      const vi = BETA2 * v[i] + c2 * (gi * gi);
      const denom = Math.sqrt(vi) / sqrtBc2 + EPS;
      p[i] = p[i] + -stepSize * (mi / denom);
      m[i] = mi;
      v[i] = vi;
    }
  }
}
