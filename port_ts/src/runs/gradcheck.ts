// Finite-difference gradient checks, run inside one engine in float64 (twin: reference/runs/gradcheck.py).
//
// A model is a loss function f(params) -> { loss, kinks } and its analytic gradients (a record
// keyed like params, in the model's parameter order). kinks is null, or an array that changes
// when a perturbation crosses a point where f is not differentiable (the Transformer's ReLUs: the
// sign pattern of every FFN pre-activation). docs/gradcheck.md explains the choices and figures.
//
// Numeric derivative of phi(t) = f(params + t * v) at t = 0, fourth-order central stencil:
//   numeric = (8 * (phi(h) - phi(-h)) - (phi(2h) - phi(-2h))) / (12 * h)    error O(h^4)
// (order 2, (phi(h) - phi(-h)) / (2 * h), error O(h^2), is there for the step sweep.)
// Relative error of an analytic value a against its numeric value n:
//   relErr = |a - n| / max(|a|, |n|, FLOOR)
// FLOOR turns the test into an absolute one, |a - n| <= 1e-6 * FLOOR, where the gradient itself
// is about as small as finite-difference noise.
//
// What is checked, drawing from the generator in this order:
//   1. coordinates, tensor by tensor in parameter order: every element of a tensor with at most
//      fullMax elements; otherwise `samples` distinct flat indices, the first `samples` entries of
//      rng.permutation(size), checked in ascending order. phi perturbs that one element: x + t.
//   2. `directions` random directions over all parameters jointly: v = rng.normal([P]) (one draw
//      of all P parameter values, in parameter order, row-major), scaled to unit norm,
//      v / sqrt(sum of v * v) (in-order sum); analytic = sum of g * v over all P values, in order.
// Kinks: when the kink pattern at any stencil point differs from the pattern at params, the check
// is repeated with the step halved (up to KINK_HALVINGS times); such a repeat is counted in
// kinkRetries. A check that still crosses a kink keeps its last value and fails honestly.

import type { Generator } from "../core/rng.ts";
import type { Params } from "../core/params.ts";
import type { Named } from "../core/golden.ts";
import { type Config, positiveInt } from "../core/caseConfig.ts";
import { untraced } from "../core/trace.ts";

export const STEP = 1e-3; // fourth-order stencil: truncation ~h^4, rounding ~eps/h; see docs/gradcheck.md
export const ORDER = 4;
export const FLOOR = 1e-3; // |a - n| below 1e-9 passes whatever a is
export const KINK_HALVINGS = 20;

export type LossFn = (params: Params) => { loss: number; kinks: Uint8Array | null };

export interface CheckRecord { index: Int32Array; analytic: Float64Array; numeric: Float64Array; relErr: Float64Array }
export interface GradcheckResult {
  checks: Record<string, CheckRecord>;
  direction: { analytic: Float64Array; numeric: Float64Array; relErr: Float64Array };
  kinkRetries: number;
}

/** |a - n| / max(|a|, |n|, floor). */
export function relativeError(analytic: number, numeric: number, floor = FLOOR): number {
  return Math.abs(analytic - numeric) / Math.max(Math.max(Math.abs(analytic), Math.abs(numeric)), floor);
}

/** The numeric derivative of phi at 0, and whether a kink was crossed; phi(t) -> [value, crossed]. */
export function centralDifference(phi: (t: number) => [number, boolean], h: number, order = ORDER): [number, boolean] {
  if (order === 2) {
    const [fp, cp] = phi(h), [fm, cm] = phi(-h);
    return [(fp - fm) / (2 * h), cp || cm];
  }
  if (order === 4) {
    const [fp, cp] = phi(h), [fm, cm] = phi(-h), [fp2, cp2] = phi(2 * h), [fm2, cm2] = phi(-2 * h);
    return [(8 * (fp - fm) - (fp2 - fm2)) / (12 * h), cp || cm || cp2 || cm2];
  }
  throw new RangeError(`centralDifference: order must be 2 or 4, got ${order}`);
}

/** Flat indices to check in a tensor of `size` elements: all of them when size <= fullMax, else
 *  the first `samples` of rng.permutation(size), ascending. */
export function checkIndices(rng: Generator, size: number, fullMax: number, samples: number): Int32Array {
  if (size <= fullMax) return Int32Array.from({ length: size }, (_, i) => i);
  return rng.permutation(size).slice(0, Math.min(samples, size)).sort();
}

/** `count` unit directions over all parameters jointly, each a record shaped like params. */
export function randomDirections(rng: Generator, params: Params, count: number): Params[] {
  const names = Object.keys(params);
  let total = 0;
  for (const n of names) total += params[n].data.length;
  const out: Params[] = [];
  for (let r = 0; r < count; r++) {
    const v = rng.normal([total]).data; // (P,) in parameter order, row-major
    let acc = 0;
    for (let i = 0; i < total; i++) acc += v[i] * v[i]; // in-order sum
    const norm = Math.sqrt(acc);
    const direction: Params = {};
    let start = 0;
    for (const n of names) {
      const size = params[n].data.length;
      const part = new Float64Array(size);
      for (let i = 0; i < size; i++) part[i] = v[start + i] / norm; // unit norm
      direction[n] = { shape: [...params[n].shape], data: part };
      start += size;
    }
    out.push(direction);
  }
  return out;
}

/** sum of g * v over every parameter value, in parameter order, row-major, from +0. */
export function directionalDerivative(grads: Params, direction: Params): number {
  let acc = 0;
  for (const n of Object.keys(direction)) {
    const g = grads[n].data, v = direction[n].data;
    for (let i = 0; i < v.length; i++) acc += g[i] * v[i];
  }
  return acc;
}

function sameKinks(a: Uint8Array | null, b: Uint8Array | null): boolean {
  if (a === null || b === null) return a === b;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Numeric derivative along perturbed(t) -> params, halving the step while a kink is crossed. */
function numericAlong(lossFn: LossFn, perturbed: (t: number) => Params, baseKinks: Uint8Array | null, step: number, order: number): [number, number] {
  const phi = (t: number): [number, boolean] => {
    const { loss, kinks } = lossFn(perturbed(t));
    return [loss, baseKinks !== null && !sameKinks(kinks, baseKinks)];
  };
  let retries = 0;
  let h = step;
  let [numeric, crossed] = centralDifference(phi, h, order);
  while (crossed && retries < KINK_HALVINGS) {
    retries++;
    h = h / 2;
    [numeric, crossed] = centralDifference(phi, h, order);
  }
  return [numeric, retries];
}

/** Check grads against central differences of lossFn (see the module comment). */
export function gradcheck(
  lossFn: LossFn, params: Params, grads: Params, rng: Generator,
  fullMax = 32, samples = 8, directions = 3, step = STEP, order = ORDER,
): GradcheckResult {
  const names = Object.keys(params);
  const missing = names.filter((n) => !Object.hasOwn(grads, n));
  if (missing.length > 0) throw new RangeError(`gradcheck: no analytic gradient for [${missing}]; grads has [${Object.keys(grads)}]`);
  const baseKinks = lossFn(params).kinks;
  const indices: Record<string, Int32Array> = {};
  for (const n of names) indices[n] = checkIndices(rng, params[n].data.length, fullMax, samples);
  const dirs = randomDirections(rng, params, directions);
  let kinkRetries = 0;
  const checks: Record<string, CheckRecord> = {};
  for (const name of names) {
    const index = indices[name];
    const analytic = new Float64Array(index.length), numeric = new Float64Array(index.length), relErr = new Float64Array(index.length);
    for (let c = 0; c < index.length; c++) {
      const i = index[c];
      const perturbed = (t: number): Params => {
        const moved = Float64Array.from(params[name].data);
        moved[i] = moved[i] + t; // x + t
        return { ...params, [name]: { shape: params[name].shape, data: moved } };
      };
      analytic[c] = grads[name].data[i];
      const [value, r] = numericAlong(lossFn, perturbed, baseKinks, step, order);
      numeric[c] = value;
      relErr[c] = relativeError(analytic[c], value);
      kinkRetries += r;
    }
    checks[name] = { index, analytic, numeric, relErr };
  }
  const dAnalytic = new Float64Array(directions), dNumeric = new Float64Array(directions), dRel = new Float64Array(directions);
  dirs.forEach((v, r) => {
    dAnalytic[r] = directionalDerivative(grads, v);
    const [value, retries] = numericAlong(lossFn, (t) => along(params, v, t), baseKinks, step, order);
    dNumeric[r] = value;
    dRel[r] = relativeError(dAnalytic[r], value);
    kinkRetries += retries;
  });
  return { checks, direction: { analytic: dAnalytic, numeric: dNumeric, relErr: dRel }, kinkRetries };
}

function along(params: Params, v: Params, t: number): Params {
  const out: Params = {};
  for (const n of Object.keys(params)) {
    const x = params[n].data, d = v[n].data, moved = new Float64Array(x.length);
    for (let i = 0; i < x.length; i++) moved[i] = x[i] + t * d[i];
    out[n] = { shape: params[n].shape, data: moved };
  }
  return out;
}

/** gradcheck's draws and checks of lossFn at params (grads its analytic gradients, loss its value
 *  there), with the case config's full_max, samples and directions, as the outputs every
 *  gradient-check case writes. */
export function runCheck(config: Config, rng: Generator, params: Params, lossFn: LossFn, grads: Params, loss: number): Named {
  // the loss's many evaluations are not traced: a traced case traces its one forward and backward
  const result = untraced(() => gradcheck(lossFn, params, grads, rng, positiveInt(config, "full_max", 32), positiveInt(config, "samples", 8), positiveInt(config, "directions", 3)));
  const outputs: Named = { loss: { shape: [], data: Float64Array.of(loss) } };
  for (const name of Object.keys(params)) outputs[`grad.${name}`] = grads[name];
  for (const [name, c] of Object.entries(result.checks)) {
    const n = c.index.length;
    outputs[`check.${name}.index`] = { shape: [n], data: c.index };
    outputs[`check.${name}.analytic`] = { shape: [n], data: c.analytic };
    outputs[`check.${name}.numeric`] = { shape: [n], data: c.numeric };
    outputs[`check.${name}.rel_err`] = { shape: [n], data: c.relErr };
  }
  const R = result.direction.analytic.length;
  outputs["direction.analytic"] = { shape: [R], data: result.direction.analytic };
  outputs["direction.numeric"] = { shape: [R], data: result.direction.numeric };
  outputs["direction.rel_err"] = { shape: [R], data: result.direction.relErr };
  outputs["kink_retries"] = { shape: [], data: Int32Array.of(result.kinkRetries) };
  return outputs;
}

/** For one random unit direction (drawn from rng): the numeric directional derivative at each step
 *  h in steps (no kink handling) and its relative error: the figures of docs/gradcheck.md. */
export function stepSweep(
  lossFn: LossFn, params: Params, grads: Params, rng: Generator, steps: readonly number[], order = ORDER,
): { analytic: number; numeric: Float64Array; relErr: Float64Array } {
  const [v] = randomDirections(rng, params, 1);
  const analytic = directionalDerivative(grads, v);
  const numeric = new Float64Array(steps.length), relErr = new Float64Array(steps.length);
  steps.forEach((h, s) => {
    [numeric[s]] = centralDifference((t) => [lossFn(along(params, v, t)).loss, false], h, order);
    relErr[s] = relativeError(analytic, numeric[s]);
  });
  return { analytic, numeric, relErr };
}
