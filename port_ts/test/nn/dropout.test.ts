// Dropout: p = 0 is an exact copy (-0 included) with no draw and no generator, forward and
// backward; bad p is an error. The mask, its draws and the 1 / (1 - p) scale are the cases
// dropout.* (p 0, 0.5, 0.9), bit for bit against the reference, whose statistics
// tests/test_layers.py checks; the backward is compared with the reference's in
// tests/test_backward_layers.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { dropoutBackward, dropoutForward } from "../../src/nn/dropout.ts";

test("p = 0 returns a bit-exact copy (-0 included), draws nothing, has no mask", () => {
  const x = tensor([4], [-0, 1.5, -2, 0]);
  const g = new Generator(5);
  const { out, cache } = dropoutForward(x, 0, g);
  assert.equal(g.counter, 0);
  assert.equal(cache.mask, null);
  assert.notEqual(out.data, x.data);
  assert.ok(Object.is(out.data[0], -0));
  assert.deepEqual(Array.from(out.data), [-0, 1.5, -2, 0]);
  assert.equal(dropoutForward(x, 0).out.data[1], 1.5); // no generator needed at p = 0
});

test("p outside [0, 1), or p > 0 without a generator, is an error", () => {
  const x = tensor([1], [1]);
  for (const p of [1, -0.1, 1.5, NaN]) assert.throws(() => dropoutForward(x, p, new Generator(0)), /p must be a number in \[0, 1\)/);
  assert.throws(() => dropoutForward(x, 0.5), /needs a generator/);
});

// ---- backward ----

test("backward at p = 0 is a copy of dout, not dout itself", () => {
  const x = new Generator(36).normal([4, 5]), dout = new Generator(37).normal([4, 5]);
  const d0 = dropoutBackward(dout, dropoutForward(x, 0).cache);
  assert.deepEqual(Array.from(d0.data), Array.from(dout.data));
  assert.notEqual(d0.data, dout.data);
});
