// The port's test toolkit (twin of tests/toolkit.py): closeness with one message shape (how many
// elements are beyond the tolerance, the greatest absolute difference at its index, what was
// allowed there, both values), central finite differences of a scalar loss, and the test data
// files beside this one.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Generator } from "../src/core/rng.ts";
import type { Tensor } from "../src/core/ops.ts";

/** A JSON file of test data in port_ts/test/ (small-configs.json, safetensors-hostile.json). */
export function fixture<T>(name: string): T {
  return JSON.parse(readFileSync(join(import.meta.dirname, name), "utf8")) as T;
}

/** null when |actual - expected| <= tol everywhere (relative: tol times the expected values'
 *  scale, their greatest |value|, or 1 when that is 0); otherwise the message. NaN is never
 *  close and an infinity only to itself, as in verify/compare.py. */
export function mismatch(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string, tol: number,
  relative = false): string | null {
  if (actual.length !== expected.length) return `${what}: ${actual.length} elements, expected ${expected.length}`;
  let scale = 1;
  if (relative) {
    let m = 0;
    for (let i = 0; i < expected.length; i++) if (Number.isFinite(expected[i])) m = Math.max(m, Math.abs(expected[i]));
    scale = m > 0 ? m : 1;
  }
  const allowed = tol * scale;
  let bad = 0, worst = -1, worstDiff = -1;
  for (let i = 0; i < actual.length; i++) {
    const diff = actual[i] === expected[i] ? 0 : Math.abs(actual[i] - expected[i]);
    if (!(diff <= allowed)) bad++;
    const ranked = Number.isNaN(diff) ? Infinity : diff;
    if (ranked > worstDiff) { worstDiff = ranked; worst = i; }
  }
  if (bad === 0) return null;
  const diff = actual[worst] === expected[worst] ? 0 : Math.abs(actual[worst] - expected[worst]);
  const rule = relative ? `${tol} x scale ${scale.toPrecision(3)}` : `${tol}`;
  return `${what}: ${bad} / ${actual.length} elements beyond the tolerance; greatest absolute difference ` +
    `${diff.toPrecision(6)} at index ${worst} (up to ${allowed.toPrecision(3)} allowed: ${rule}); ` +
    `expected ${expected[worst]}, actual ${actual[worst]}`;
}

/** Asserts mismatch(...) is null. */
export function close(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string, tol: number, relative = false): void {
  const message = mismatch(actual, expected, what, tol, relative);
  assert.ok(message === null, message ?? "");
}

/** The in-order dot product of two tensors' data: L = sum(out * dout). */
export function dot(a: Tensor, b: Tensor): number {
  let s = 0;
  for (let i = 0; i < a.data.length; i++) s += a.data[i] * b.data[i];
  return s;
}

/** The central difference of f() along x[i] (x perturbed in place, restored): order 2,
 *  (f(x + h) - f(x - h)) / 2h, truncation ~h^2; order 4, (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / 12h, ~h^4. */
export function centralDifference(f: () => number, x: Float64Array, i: number, h: number, order: 2 | 4 = 4): number {
  const saved = x[i];
  const at = (k: number) => { x[i] = saved + k * h; const v = f(); x[i] = saved; return v; };
  if (order === 2) {
    const up = at(1), down = at(-1);
    return (up - down) / (2 * h);
  }
  const L = [2, 1, -1, -2].map(at);
  return (-L[0] + 8 * L[1] - 8 * L[2] + L[3]) / (12 * h);
}

/** Second-order central differences of loss() in every coordinate of x against analytic: the
 *  worst |analytic - numeric| and the numeric gradient's scale (its greatest |value|). */
export function fdError(x: Tensor, analytic: Tensor, loss: () => number, h: number): { worst: number; scale: number } {
  let worst = 0, scale = 0;
  for (let i = 0; i < x.data.length; i++) {
    const numeric = centralDifference(loss, x.data, i, h, 2);
    worst = Math.max(worst, Math.abs(analytic.data[i] - numeric));
    scale = Math.max(scale, Math.abs(numeric));
  }
  return { worst, scale };
}

// The layer tests' check: L = sum(out * dout) and the fourth-order stencil with h = 1e-3:
// truncation ~1e-13 for these smooth O(1) functions, rounding ~eps |L| / h (L summed in order
// here, not exactly). FD_RTOL 1e-9 of the gradient's scale leaves a wide margin; a wrong gradient
// is off by O(1).
export const FD_STEP = 1e-3;
export const FD_RTOL = 1e-9;

/** Checks grad against fourth-order central differences of f() in every coordinate of a:
 *  |numeric - analytic| <= rtol x the gradient's scale (its greatest |value|). */
export function checkFd(label: string, f: () => number, a: Tensor, grad: Tensor, h = FD_STEP, rtol = FD_RTOL): void {
  let scale = 0;
  for (const g of grad.data) scale = Math.max(scale, Math.abs(g));
  for (let i = 0; i < a.data.length; i++) {
    const numeric = centralDifference(f, a.data, i, h, 4);
    assert.ok(Math.abs(numeric - grad.data[i]) <= rtol * Math.max(scale, 1e-300),
      `${label}[${i}]: analytic ${grad.data[i]}, numeric ${numeric} (scale ${scale})`);
  }
}

/** Up to n coordinates of g with |g| >= minGrad, drawn from rng. */
export function pickCoordinates(rng: Generator, g: Tensor, n: number, minGrad: number): number[] {
  const ok: number[] = [];
  for (let i = 0; i < g.data.length; i++) if (Math.abs(g.data[i]) >= minGrad) ok.push(i);
  const out: number[] = [];
  for (let k = 0; k < n && ok.length > 0; k++) out.push(ok[rng.integers([1], 0, ok.length).data[0]]);
  return out;
}
