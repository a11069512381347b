// The optimiser: the in-order global norm (an order that changes the last bit), the book's
// clipping (strict >, new arrays, the norm returned), Adam's first step by hand, its running
// bias-correction products, a zero gradient, and a shape mismatch.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { adamInit, adamStep, clipGradients, globalNorm } from "../../src/runs/optim.ts";

test("globalNorm sums parameter by parameter, element by element, from +0", () => {
  // 16 squares of 2^-54 vanish one by one against 1, but add up to 2^-50 before it
  const grads = { a: tensor([1], [1]), b: tensor([16], new Array(16).fill(2 ** -27)) };
  assert.equal(globalNorm(grads, ["a", "b"]), 1);
  assert.equal(globalNorm(grads, ["b", "a"]), Math.sqrt(1 + 2 ** -50));
  assert.notEqual(Math.sqrt(1 + 2 ** -50), 1);
  assert.equal(globalNorm({ g: tensor([2, 1], [3, 4]) }, ["g"]), 5);
  assert.equal(globalNorm({}, []), 0);
});

test("clipGradients above theta scales every gradient by theta / n, in new arrays", () => {
  const w = tensor([2, 2], [3, 0, 0, 4]), b = tensor([1], [12]); // n = 13
  const grads = { w, b };
  const n = clipGradients(grads, ["w", "b"], 1);
  assert.equal(n, 13);
  const s = 1 / 13;
  assert.deepEqual(Array.from(grads.w.data), [3 * s, 0, 0, 4 * s]);
  assert.deepEqual(Array.from(grads.b.data), [12 * s]);
  assert.deepEqual(grads.w.shape, [2, 2]);
  assert.deepEqual(Array.from(w.data), [3, 0, 0, 4]); // the caller's tensors are left alone
  assert.ok(Math.abs(globalNorm(grads, ["w", "b"]) - 1) <= 2.3e-16);
});

test("clipGradients at or below theta changes nothing (the book's strict >, no epsilon)", () => {
  for (const theta of [5, 5 + 1e-7, 100]) {
    const g = tensor([2], [3, 4]);
    const grads = { g };
    assert.equal(clipGradients(grads, ["g"], theta), 5);
    assert.equal(grads.g, g);
    assert.deepEqual(Array.from(g.data), [3, 4]);
  }
  // just above: the clipped norm is theta itself, not torch's theta * n / (n + 1e-6)
  const grads = { g: tensor([2], [3, 4]) };
  clipGradients(grads, ["g"], 5 - 1e-7);
  assert.ok(Math.abs(globalNorm(grads, ["g"]) - (5 - 1e-7)) <= 1e-15);
});

test("Adam's first step moves each parameter by -lr g / (|g| + eps)", () => {
  const params = { x: tensor([3], [1, -2, 0.5]) };
  const g = [3, -0.25, 1e-3];
  const state = adamInit(params, ["x"]);
  adamStep(params, { x: tensor([3], g) }, ["x"], state, 0.1);
  const start = [1, -2, 0.5];
  for (let i = 0; i < 3; i++) {
    const want = start[i] - (0.1 * g[i]) / (Math.abs(g[i]) + 1e-8);
    assert.ok(Math.abs(params.x.data[i] - want) <= 1e-15, `x[${i}] = ${params.x.data[i]}, want ${want}`);
  }
  assert.ok(Math.abs(params.x.data[2] - 0.4) > 0.9e-6); // eps outside the square root shows at |g| = 1e-3
  assert.equal(state.t, 1);
  assert.ok(Math.abs(state.m.x.data[0] - 0.1 * 3) <= 1e-15 && Math.abs(state.v.x.data[0] - 0.001 * 9) <= 1e-15);
});

test("Adam keeps b1t, b2t as running products and a zero gradient moves nothing", () => {
  const params = { x: tensor([2], [0.25, -4]) };
  const state = adamInit(params, ["x"]);
  assert.deepEqual([state.t, state.b1t, state.b2t], [0, 1, 1]);
  let b1t = 1, b2t = 1;
  for (let t = 0; t < 30; t++) {
    adamStep(params, { x: tensor([2], [0, 0]) }, ["x"], state, 0.5);
    b1t *= 0.9;
    b2t *= 0.999;
  }
  assert.deepEqual([state.t, state.b1t, state.b2t], [30, b1t, b2t]);
  assert.deepEqual(Array.from(params.x.data), [0.25, -4]);
});

test("Adam refuses a gradient of the wrong size", () => {
  const params = { x: tensor([2, 3], [1, 2, 3, 4, 5, 6]) };
  const state = adamInit(params, ["x"]);
  assert.throws(() => adamStep(params, { x: tensor([5], [1, 2, 3, 4, 5]) }, ["x"], state, 0.1), /gradient of 'x'/);
});
