// The optimiser: the book's clipping (new arrays, the caller's left alone; strict > at a norm of
// exactly theta, which no case draws) and Adam's shape check. The in-order global norm, Adam's
// steps and its running bias-correction products are the case optim_steps.clipped and every
// training case, bit for bit against the reference, which tests/test_optim.py checks against torch
// and for those facts (and the port against it, bit for bit, over 20 steps).
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { adamInit, adamStep, clipGradients, globalNorm } from "../../src/runs/optim.ts";

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

test("Adam refuses a gradient of the wrong size", () => {
  const params = { x: tensor([2, 3], [1, 2, 3, 4, 5, 6]) };
  const state = adamInit(params, ["x"]);
  assert.throws(() => adamStep(params, { x: tensor([5], [1, 2, 3, 4, 5]) }, ["x"], state, 0.1), /gradient of 'x'/);
});
