// Act 4's alignment scorer: the data's draw order, identity values giving the weights exactly, the
// gradients against central differences written here, and plain gradient steps learning
// la->the, voiture->car, rouge->red, <eos>-><eos>.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Generator } from "../../src/core/rng.ts";
import { ALIGNMENT, SOURCE, TARGET, alignmentData, alignmentLoss, alignmentLossBackward, initAlignmentParams } from "../../src/models/alignment.ts";

test("data: pair by pair, source then target embeddings; pair 0 does not depend on the batch", () => {
  const one = alignmentData(new Generator(60), 4, 1);
  const three = alignmentData(new Generator(60), 4, 3);
  assert.deepEqual(three.keys.shape, [3, 4, 4]);
  assert.deepEqual(Array.from(three.keys.data.subarray(0, 16)), Array.from(one.keys.data));
  assert.deepEqual(Array.from(three.queries.data.subarray(0, 16)), Array.from(one.queries.data));
  const g = new Generator(60);
  assert.deepEqual(Array.from(one.keys.data), Array.from(g.normal([4, 4]).data));
  assert.deepEqual(Array.from(one.queries.data), Array.from(g.normal([4, 4]).data));
  assert.deepEqual(Array.from(three.gold.data), [0, 2, 1, 3, 0, 2, 1, 3, 0, 2, 1, 3]);
  assert.deepEqual(ALIGNMENT.map((j) => SOURCE[j]), ["the", "car", "red", "<eos>"]);
  assert.deepEqual([...TARGET], ["la", "voiture", "rouge", "<eos>"]);
});

test("parameters: W_q, W_k (H, E) within 1/sqrt(E), then w_v (1, H) within 1/sqrt(H)", () => {
  const p = initAlignmentParams(new Generator(61), 6, 8);
  assert.deepEqual(Object.keys(p), ["W_q", "W_k", "w_v"]);
  assert.deepEqual(p.W_q.shape, [8, 6]);
  assert.deepEqual(p.w_v.shape, [1, 8]);
  assert.ok(p.W_k.data.every((v) => Math.abs(v) <= 1 / Math.sqrt(6)));
  assert.ok(p.w_v.data.every((v) => Math.abs(v) <= 1 / Math.sqrt(8)));
});

test("identity values: the output is exactly the attention weights", () => {
  const rng = new Generator(62);
  const params = initAlignmentParams(rng, 5, 7);
  const { cache } = alignmentLoss(params, alignmentData(rng, 5, 2));
  assert.deepEqual(Array.from(cache.out.data), Array.from(cache.weights.data));
});

test("loss is the mean of -log(gold weight); gradients match central differences", () => {
  const rng = new Generator(63);
  const params = initAlignmentParams(rng, 6, 5);
  const data = alignmentData(rng, 6, 2);
  const { loss, cache } = alignmentLoss(params, data);
  let want = 0;
  for (let n = 0; n < 8; n++) want -= Math.log(cache.weights.data[n * 4 + data.gold.data[n]]) / 8;
  assert.ok(Math.abs(loss - want) <= 1e-14); // summed in another order: a few ulps of a loss ~1.5
  const grads = alignmentLossBackward(cache);
  assert.deepEqual(Object.keys(grads), ["W_q", "W_k", "w_v"]);
  const h = 1e-3;
  for (const name of ["W_q", "W_k", "w_v"]) {
    const x = params[name].data;
    for (let i = 0; i < x.length; i++) {
      const x0 = x[i];
      const at = (t: number) => { x[i] = x0 + t; const v = alignmentLoss(params, data).loss; x[i] = x0; return v; };
      const n = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h);
      const a = grads[name].data[i];
      assert.ok(Math.abs(a - n) <= 1e-8 * Math.max(Math.abs(a), Math.abs(n), 1e-3), `${name}[${i}]: analytic ${a}, numeric ${n}`);
    }
  }
});

test("plain gradient steps lower the loss and learn the alignment", () => {
  const rng = new Generator(64);
  let params = initAlignmentParams(rng, 6, 6);
  const data = alignmentData(rng, 6, 1);
  const first = alignmentLoss(params, data).loss;
  let previous = first;
  for (let step = 0; step < 200; step++) {
    const { loss, cache } = alignmentLoss(params, data);
    if (step < 5) assert.ok(loss <= previous, `step ${step}: ${previous} -> ${loss}`);
    previous = loss;
    const grads = alignmentLossBackward(cache);
    params = Object.fromEntries(Object.entries(params).map(([n, p]) =>
      [n, { shape: p.shape, data: p.data.map((v, i) => v - 0.5 * grads[n].data[i]) }]));
  }
  const { loss, cache } = alignmentLoss(params, data);
  assert.ok(loss < 0.5 * first, `loss ${first} -> ${loss}`);
  const argmax = [0, 1, 2, 3].map((i) => {
    const row = Array.from(cache.weights.data.subarray(i * 4, i * 4 + 4));
    return row.indexOf(Math.max(...row));
  });
  assert.deepEqual(argmax, [...ALIGNMENT]);
});

test("gold outside the source is an error", () => {
  const rng = new Generator(65);
  const params = initAlignmentParams(rng, 4, 4);
  const data = alignmentData(rng, 4, 1);
  data.gold.data[3] = 4;
  assert.throws(() => alignmentLoss(params, data), /gold must be source indices/);
});
