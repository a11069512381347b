// The finite-difference gradient check: the stencils' Taylor remainders on polynomials, the
// relative error and its floor, which coordinates are drawn, unit directions, a right gradient
// passing and a wrong one failing, and the kink detection on a ReLU.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { tensor } from "../../src/core/ops.ts";
import type { Params } from "../../src/core/params.ts";
import {
  FLOOR, centralDifference, checkIndices, directionalDerivative, gradcheck, randomDirections, relativeError, stepSweep,
  type LossFn,
} from "../../src/runs/gradcheck.ts";

const smooth = (f: (t: number) => number) => (t: number): [number, boolean] => [f(t), false];

test("second-order stencil: exact on quadratics, error h^2 on t^3", () => {
  const [q] = centralDifference(smooth((t) => 3 * t * t + 2 * t + 1), 0.25, 2);
  assert.equal(q, 2);
  for (const h of [0.5, 0.25, 0.125]) assert.equal(centralDifference(smooth((t) => t * t * t), h, 2)[0], h * h);
});

test("fourth-order stencil: exact on cubics and quartics, error -4h^4 on t^5", () => {
  assert.equal(centralDifference(smooth((t) => t * t * t - 2 * t), 0.25, 4)[0], -2);
  assert.equal(centralDifference(smooth((t) => t ** 4 + t), 0.25, 4)[0], 1);
  for (const h of [0.5, 0.25, 0.125]) assert.equal(centralDifference(smooth((t) => t ** 5), h, 4)[0], -4 * h ** 4);
  assert.throws(() => centralDifference(smooth((t) => t), 0.1, 3), /order must be 2 or 4/);
});

test("relative error: |a - n| / max(|a|, |n|, floor)", () => {
  assert.equal(relativeError(2, 1), 0.5);
  assert.equal(relativeError(0, 0), 0);
  assert.equal(relativeError(1e-12, 0), 1e-12 / FLOOR);
  assert.equal(relativeError(-3, 3), 2);
});

test("checked coordinates: all of a small tensor, else distinct ascending draws", () => {
  assert.deepEqual(Array.from(checkIndices(new Generator(1), 5, 8, 3)), [0, 1, 2, 3, 4]);
  const rng = new Generator(2);
  const idx = Array.from(checkIndices(rng, 100, 8, 6));
  assert.equal(idx.length, 6);
  assert.equal(new Set(idx).size, 6);
  assert.deepEqual(idx, [...idx].sort((a, b) => a - b));
  assert.ok(idx.every((i) => i >= 0 && i < 100));
  assert.equal(rng.counter, 99); // one permutation of 100 draws 99 doubles
  assert.deepEqual(Array.from(checkIndices(new Generator(2), 100, 8, 6)), idx);
});

test("random directions: unit norm over all parameters jointly, shaped like them", () => {
  const params: Params = { a: tensor([2, 3], [1, 2, 3, 4, 5, 6]), b: tensor([3], [0, 0, 0]) };
  const [v, w] = randomDirections(new Generator(3), params, 2);
  let n = 0;
  for (const t of Object.values(v)) for (const x of t.data) n += x * x;
  assert.ok(Math.abs(n - 1) <= 1e-15);
  assert.deepEqual(v.a.shape, [2, 3]);
  assert.notDeepEqual(Array.from(v.b.data), Array.from(w.b.data));
  assert.equal(directionalDerivative(v, v), n);
});

// f(x) = sum of c_i x_i^2 + x_0 x_1 (+ relu(x_2 - k) for the kink test); its gradient by hand
function model(kink: number | null): { f: LossFn; grad: (p: Params) => Params } {
  const c = [0.5, -1.5, 2, 0.25];
  const f: LossFn = (p) => {
    const x = p.x.data;
    let s = 0;
    for (let i = 0; i < 4; i++) s += c[i] * x[i] * x[i];
    s += x[0] * x[1];
    if (kink === null) return { loss: s, kinks: null };
    const pre = x[2] - kink;
    return { loss: s + (pre > 0 ? pre : 0), kinks: Uint8Array.of(pre > 0 ? 1 : 0) };
  };
  const grad = (p: Params): Params => {
    const x = p.x.data;
    const g = [2 * c[0] * x[0] + x[1], 2 * c[1] * x[1] + x[0], 2 * c[2] * x[2], 2 * c[3] * x[3]];
    if (kink !== null && x[2] - kink > 0) g[2] += 1;
    return { x: tensor([4], g) };
  };
  return { f, grad };
}

test("a right gradient passes everywhere; a wrong coordinate fails there and along directions", () => {
  const params: Params = { x: tensor([4], [0.3, -0.7, 1.1, 2]) };
  const { f, grad } = model(null);
  const right = gradcheck(f, params, grad(params), new Generator(4), 32, 8, 3);
  assert.deepEqual(Array.from(right.checks.x.index), [0, 1, 2, 3]);
  assert.ok(right.checks.x.relErr.every((e) => e <= 1e-9), `${right.checks.x.relErr}`);
  assert.ok(right.direction.relErr.every((e) => e <= 1e-9));
  const wrong = grad(params);
  wrong.x.data[1] *= 1.001;
  const bad = gradcheck(f, params, wrong, new Generator(4), 32, 8, 3);
  assert.ok(bad.checks.x.relErr[1] > 1e-4);
  assert.ok([0, 2, 3].every((i) => bad.checks.x.relErr[i] <= 1e-9));
  assert.ok(bad.direction.relErr.some((e) => e > 1e-6));
  assert.throws(() => gradcheck(f, params, {}, new Generator(4)), /no analytic gradient for \[x\]/);
});

test("kinks: a ReLU within the stencil's reach halves the step until it is not crossed", () => {
  const params: Params = { x: tensor([4], [0.3, -0.7, 1.1, 2]) };
  const { f, grad } = model(1.1 + 5e-4); // pre-activation -5e-4: the stencil reaches 2e-3
  const r = gradcheck(f, params, grad(params), new Generator(5), 32, 8, 0);
  assert.ok(r.kinkRetries >= 2, `retries ${r.kinkRetries}`);
  assert.ok(r.checks.x.relErr[2] <= 1e-9, `x[2]: ${r.checks.x.relErr[2]}`);
  const blind: LossFn = (p) => ({ loss: f(p).loss, kinks: null });
  const b = gradcheck(blind, params, grad(params), new Generator(5), 32, 8, 0);
  assert.equal(b.kinkRetries, 0);
  assert.ok(b.checks.x.relErr[2] > 1e-3, "without the kink pattern the crossing corrupts the numeric value");
});

test("step sweep: the second-order error falls 4x per halving of h on a smooth non-polynomial loss", () => {
  const params: Params = { x: tensor([3], [0.2, -0.4, 0.9]) };
  const f: LossFn = (p) => ({ loss: Math.exp(p.x.data[0]) * Math.sin(p.x.data[1]) + Math.tanh(p.x.data[2]), kinks: null });
  const x = params.x.data;
  const g: Params = { x: tensor([3], [Math.exp(x[0]) * Math.sin(x[1]), Math.exp(x[0]) * Math.cos(x[1]), 1 - Math.tanh(x[2]) ** 2]) };
  const steps = [1e-2, 5e-3, 2.5e-3, 1.25e-3];
  const { analytic, numeric } = stepSweep(f, params, g, new Generator(6), steps, 2);
  for (let s = 0; s + 1 < steps.length; s++) {
    const ratio = Math.abs(numeric[s] - analytic) / Math.abs(numeric[s + 1] - analytic);
    assert.ok(Math.abs(ratio - 4) < 0.05, `ratio ${ratio} between h = ${steps[s]} and ${steps[s + 1]}`);
  }
});
