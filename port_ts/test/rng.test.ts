// The shared generator: Threefry known answers, draw ranges, and the polar method's moments.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator, threefry2x32 } from "../src/rng.ts";
import { specLog } from "../src/mathlib.ts";

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
