// The shared generator: Threefry known answers, draw ranges, and the polar method's moments.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator, threefry2x32 } from "../../src/core/rng.ts";
import { specLog } from "../../src/core/mathlib.ts";

test("threefry2x32-20 matches the published known answers", () => {
  const out = new Uint32Array(2);
  const kat: [number, number, number, number, number, number][] = [
    [0, 0, 0, 0, 0x6b200159, 0x99ba4efe],
    [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7],
    [0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3, 0xc4923a9c, 0x483df7a0],
  ];
  for (const [k0, k1, c0, c1, e0, e1] of kat) {
    threefry2x32(k0, k1, c0, c1, out);
    assert.deepEqual([out[0], out[1]], [e0, e1]);
  }
});

test("uniform draws lie in [0, 1) on the 2^-53 grid", () => {
  const u = new Generator(5).uniform([10000]).data;
  for (const v of u) {
    assert.ok(v >= 0 && v < 1);
    assert.equal(Number.isInteger(v * 2 ** 53), true);
  }
});

test("specLog is within a few ulps of Math.log", () => {
  const g = new Generator(11);
  for (let i = 0; i < 10000; i++) {
    const s = g.nextDouble() + 1e-300;
    const rel = Math.abs(specLog(s) - Math.log(s)) / Math.abs(Math.log(s));
    assert.ok(rel < 1e-15, `s=${s} rel=${rel}`);
  }
});

test("normal draws have mean 0 and variance 1 within sampling error", () => {
  const n = 200000;
  const z = new Generator(3).normal([n]).data;
  let m = 0;
  for (const v of z) m += v;
  m /= n;
  let v2 = 0;
  for (const v of z) v2 += (v - m) ** 2;
  v2 /= n;
  assert.ok(Math.abs(m) < 5 / Math.sqrt(n), `mean ${m}`);
  assert.ok(Math.abs(v2 - 1) < 5 * Math.sqrt(2 / n), `variance ${v2}`);
});

test("integers cover [low, high) and a permutation is a permutation", () => {
  const g = new Generator(9);
  const ints = g.integers([5000], 3, 8).data;
  const seen = new Set(ints);
  assert.deepEqual([...seen].sort(), [3, 4, 5, 6, 7]);
  const p = g.permutation(50);
  assert.deepEqual([...p].sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i));
});

test("seeds must be safe non-negative integers", () => {
  assert.throws(() => new Generator(-1), RangeError);
  assert.throws(() => new Generator(2 ** 53), RangeError);
  assert.throws(() => new Generator(1.5), RangeError);
});

/** docs/generator.md's double at counter i of seed, built from threefry2x32 alone (proven above
 *  by the known answers): key (seed mod 2**32, floor(seed / 2**32)), counter (i mod 2**32,
 *  floor(i / 2**32)). */
function specDouble(seed: number, i: number): number {
  const out = new Uint32Array(2);
  threefry2x32(seed % 2 ** 32, Math.floor(seed / 2 ** 32), i % 2 ** 32, Math.floor(i / 2 ** 32), out);
  return ((out[0] >>> 5) * 2 ** 26 + (out[1] >>> 6)) * 2 ** -53;
}

test("the key takes the seed's high word and the counter its high word (seeds and counters past 2**32)", () => {
  for (const seed of [0, 7, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 7, 2 ** 53 - 1]) {
    const g = new Generator(seed);
    for (const start of [0, 2 ** 32 - 1, 2 ** 32 + 3, 2 ** 52 + 5]) {
      g.counter = start;
      const u = g.uniform([3]).data;
      for (let k = 0; k < 3; k++) assert.equal(u[k], specDouble(seed, start + k), `seed ${seed}, counter ${start + k}`);
      assert.equal(g.counter, start + 3);
    }
  }
});

test("a keep mask keeps u >= p: a draw equal to p is kept, one just above p is dropped", () => {
  const u = specDouble(21, 0);
  const g = new Generator(21);
  assert.deepEqual([...g.keepMask([1], u).data], [1]);
  g.counter = 0;
  assert.deepEqual([...g.keepMask([1], u + 2 ** -53).data], [0]);
});

test("a bad seed is named in the message", () => {
  assert.throws(() => new Generator(-1), { message: "seed must be an integer in [0, 2**53), got -1" });
  assert.throws(() => new Generator(0.5), { message: "seed must be an integer in [0, 2**53), got 0.5" });
});
