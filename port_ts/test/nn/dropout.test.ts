// Dropout: p = 0 is an exact copy with no draw; 0 < p < 1 keeps about 1 - p of the entries,
// scales them by 1 / (1 - p), draws exactly one double per element; bad p is an error.
// Backward: the same mask and scale, a copy at p = 0.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tensor } from "../../src/core/ops.ts";
import { Generator } from "../../src/core/rng.ts";
import { dropoutBackward, dropoutForward } from "../../src/nn/dropout.ts";
import { checkFd, dot, tolerance } from "../toolkit.ts";

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

for (const p of [0.1, 0.5, 0.9]) {
  test(`p = ${p}: about ${1 - p} kept (within 5 sigma), kept values x / (1 - p), dropped ones 0`, () => {
    const n = 40000;
    const x = new Generator(11).normal([n]);
    const g = new Generator(12);
    const { out, cache } = dropoutForward(x, p, g);
    assert.equal(g.counter, n, "one draw per element");
    const mask = cache.mask!;
    let kept = 0;
    for (let i = 0; i < n; i++) {
      if (mask.data[i] === 1) {
        kept++;
        assert.equal(out.data[i], x.data[i] * (1 / (1 - p)));
        assert.ok(Math.abs(out.data[i] - x.data[i] / (1 - p)) <= 2.3e-16 * Math.abs(out.data[i]));
      } else {
        assert.equal(mask.data[i], 0);
        assert.ok(out.data[i] === 0, `dropped element ${i} is ${out.data[i]}`); // +0 or -0 (negative x)
      }
    }
    const sigma = Math.sqrt(n * p * (1 - p));
    assert.ok(Math.abs(kept - n * (1 - p)) <= 5 * sigma, `kept ${kept} of ${n}`);
  });
}

test("the mask is the generator's keep mask, drawn when dropout is applied", () => {
  const x = new Generator(1).normal([3, 5]);
  const { cache } = dropoutForward(x, 0.3, new Generator(2));
  assert.deepEqual(Array.from(cache.mask!.data), Array.from(new Generator(2).keepMask([3, 5], 0.3).data));
});

test("p outside [0, 1), or p > 0 without a generator, is an error", () => {
  const x = tensor([1], [1]);
  for (const p of [1, -0.1, 1.5, NaN]) assert.throws(() => dropoutForward(x, p, new Generator(0)), /p must be a number in \[0, 1\)/);
  assert.throws(() => dropoutForward(x, 0.5), /needs a generator/);
});

// ---- backward ----

test("backward uses the forward's mask and scale: dx = dout * (mask / (1 - p)); p = 0 copies", () => {
  const x = new Generator(36).normal([4, 5]), dout = new Generator(37).normal([4, 5]);
  const p = 0.4;
  const { cache } = dropoutForward(x, p, new Generator(38));
  const dx = dropoutBackward(dout, cache);
  for (let i = 0; i < 20; i++) {
    if (cache.mask!.data[i] === 1) assert.equal(dx.data[i], dout.data[i] * (1 / (1 - p)));
    else assert.ok(dx.data[i] === 0, `dropped element ${i}: ${dx.data[i]}`); // +0 or -0
  }
  const d0 = dropoutBackward(dout, dropoutForward(x, 0).cache);
  assert.deepEqual(Array.from(d0.data), Array.from(dout.data));
  assert.notEqual(d0.data, dout.data);
  // with the mask held fixed the layer is linear: finite differences agree
  checkFd("dx", () => dot({ shape: x.shape, data: x.data.map((v, i) => v * (cache.mask!.data[i] / (1 - p))) }, dout), x, dx, tolerance("dropout", "fd_in_order"));
});
