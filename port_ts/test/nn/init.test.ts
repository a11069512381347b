// Initialisation: bounds and draw order of linear parameters, N(0, 1) embeddings, layer norm
// without draws, the patch embedding's fan-in.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { embeddingParams, layerNormParams, linearParams, patchEmbeddingParams } from "../../src/nn/init.ts";

test("linear: |W|, |b| <= 1/sqrt(fan_in), W drawn before b, both U(-k, k)", () => {
  const g = new Generator(21);
  const { W, b } = linearParams(g, 30, 49);
  const k = 1 / 7;
  assert.deepEqual(W.shape, [30, 49]);
  assert.deepEqual(b!.shape, [30]);
  for (const v of [...W.data, ...b!.data]) assert.ok(Math.abs(v) <= k, `${v} outside +-${k}`);
  assert.equal(g.counter, 30 * 49 + 30);
  const h = new Generator(21);
  const u = h.uniform([30 * 49 + 30]).data;
  for (let i = 0; i < W.data.length; i++) assert.equal(W.data[i], -k + (2 * k) * u[i]);
  for (let i = 0; i < 30; i++) assert.equal(b!.data[i], -k + (2 * k) * u[W.data.length + i]);
});

test("linear without bias draws only W; the spread fills the interval", () => {
  const g = new Generator(22);
  const { W, b } = linearParams(g, 200, 4, false);
  assert.equal(b, null);
  assert.equal(g.counter, 800);
  const max = Math.max(...W.data), min = Math.min(...W.data);
  assert.ok(max > 0.49 && min < -0.49, `range [${min}, ${max}] should nearly fill [-0.5, 0.5]`);
});

test("embedding: N(0, 1), mean and standard deviation of 200000 draws near 0 and 1", () => {
  const E = embeddingParams(new Generator(23), 1000, 200);
  assert.deepEqual(E.shape, [1000, 200]);
  let s = 0, q = 0;
  for (const v of E.data) { s += v; q += v * v; }
  const n = E.data.length, mean = s / n, std = Math.sqrt(q / n - mean * mean);
  assert.ok(Math.abs(mean) < 5 / Math.sqrt(n), `mean ${mean}`); // 5 standard errors
  assert.ok(Math.abs(std - 1) < 5 / Math.sqrt(2 * n), `std ${std}`);
});

test("layer norm: gamma = 1, beta = 0", () => {
  const { gamma, beta } = layerNormParams(5);
  assert.deepEqual(Array.from(gamma.data), [1, 1, 1, 1, 1]);
  assert.deepEqual(Array.from(beta.data), [0, 0, 0, 0, 0]);
});

test("patch embedding: a (d, C p p) weight with bound 1/sqrt(C p p)", () => {
  const g = new Generator(24);
  const { W, b } = patchEmbeddingParams(g, 8, 1, 4);
  assert.deepEqual(W.shape, [8, 16]);
  assert.deepEqual(b.shape, [8]);
  for (const v of W.data) assert.ok(Math.abs(v) <= 0.25);
  assert.equal(g.counter, 8 * 16 + 8);
});

test("fan sizes below 1 are errors", () => {
  assert.throws(() => linearParams(new Generator(0), 3, 0), /must be >= 1/);
});
